#!/usr/bin/env bash
# session 13 call 5: the full grid below the launcher's 4-wave point? SL_KQ_GRID=1 rows ("res" / "full") for the
# activations, quantizers and dequantizers at T=1024 and 8192 (h=2048: ~2.6 resident waves -> resident grid today)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_GRID=1 timeout 200 build-gpu/sluice bench kernels --only act_ --tokens 1024,8192 --json $O/bench-act.json > $O/act.txt 2>&1; echo rc=$?
SL_KQ_GRID=1 timeout 250 build-gpu/sluice bench kernels --only quant_ --tokens 1024,8192 --json $O/bench-quant.json > $O/quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
python3 - $O <<'PY'
import json, glob, sys
for p in sorted(glob.glob(sys.argv[1] + "/bench-*.json")):
    for l in open(p):
        o = json.loads(l) if l.startswith("{") else {}
        if "kernel_us" in o and ("T=1024 " in o["shape"] or "T=8192 " in o["shape"]):
            print(f"{o['op']:20s} {o['shape']:15s} {o['path']:18s} kern {o['kernel_us']:7.2f}")
PY
