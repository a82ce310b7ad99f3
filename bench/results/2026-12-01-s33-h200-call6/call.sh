#!/usr/bin/env bash
# Session 33 call 6: (a) probe: is the state reversible (destroy the second stream), does work on the victim's own
# stream count (victim on the legacy stream), how many kernels on a second stream set it; (b) the bench now enters the
# multi-stream state before its first row (launch/bench_util.c): every op at T=1 H=2048 with and without
# (SL_BENCH_ONE_STREAM=1), and call 7-of-s32's positive case (--only act_ --tokens 1,128) now level.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger S=build-gpu/sluice
rep() { local n=$1 a=$2 r=""; for i in $(seq $n); do r="$r $a"; done; echo $r; }
run() { echo "== $*" | tee -a $O/probe.txt; "$@" 2>&1 | tee -a $O/probe.txt; }
run $P $(rep 32 memsetN:8192~) sync destroyN
run env SL_PROBE_VICTIM_LEGACY=1 $P $(rep 16 memset:8192~) sync $(rep 32 memsetN:8192~) sync
run $P actL:4 actL:3 actL:1 actL:8
el probes
SL_BENCH_ONE_STREAM=1 $S bench kernels --tokens 1 --hidden 2048 --json $O/t1-one.json > $O/t1-one.txt 2>&1; el one
$S bench kernels --tokens 1 --hidden 2048 --json $O/t1-multi.json > $O/t1-multi.txt 2>&1; el multi
$S bench kernels --only act_ --hidden 2048 --tokens 1,128 > $O/act-t1-128.txt 2>&1
SL_BENCH_ONE_STREAM=1 $S bench kernels --only act_ --hidden 2048 --tokens 1,128 > $O/act-t1-128-one.txt 2>&1
el bench
grep -h "^# device" $O/t1-one.txt $O/t1-multi.txt $O/act-t1-128.txt
python3 - $O <<'PY'
import json, sys
o = sys.argv[1]
def rows(f):
    r = {}
    for l in open(f):
        d = json.loads(l)
        if d.get('graph_us') is not None and 'op' in d:
            r[(d['op'], d['shape'], d.get('path', ''))] = (d['graph_us'], d.get('kernel_us', -1))
    return r
a, b = rows(o + '/t1-one.json'), rows(o + '/t1-multi.json')
print(f"{'op':22} {'shape':26} {'path':28} one-stream  multi  diff   kern")
for k in a:
    if k in b:
        print(f"{k[0]:22} {k[1]:26} {k[2][:28]:28} {a[k][0]:8.2f} {b[k][0]:6.2f} {b[k][0]-a[k][0]:+6.2f} {b[k][1]:6.2f}")
PY
for f in act-t1-128 act-t1-128-one; do echo "== $f"; grep -E " T=1 " $O/$f.txt | grep -vE "p16|p4" | sed -E 's/ +/ /g' | cut -c1-110; done
