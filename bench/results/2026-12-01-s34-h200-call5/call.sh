#!/usr/bin/env bash
# Session 34 call 5 (timing-only experiment, code in expq2.patch, not committed): the quantizer's 16-byte input loads
# as committed (ld.global.nc via __ldg), as plain coherent loads (SL_EXPQ=4), and non-coherent with a 256-byte L2
# prefetch (SL_EXPQ=8): bench/probes/fp8_rule_probe.py (T <= 1024 in fixed graphs, and T=8192) and `sluice bench
# kernels --only quant_ --tokens 8192,32768 --hidden 2048` for each.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for e in 0 4 8; do
  if [ $e = 0 ]; then unset SL_EXPQ; else export SL_EXPQ=$e; fi
  timeout 100 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so > $O/p$e.txt 2> $O/p$e.err
  echo "probe expq=$e rc=$?"; el "probe $e"
  timeout 100 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --hidden 2048 --json $O/q$e.json \
    > $O/q$e.txt 2>&1; echo "bench expq=$e rc=$?"; el "bench $e"
done
unset SL_EXPQ
for e in 0 4 8; do echo "== probe expq=$e"; cat $O/p$e.txt; done
python3 - $O <<'PY'
import json, sys
O = sys.argv[1]
rows = {}
for e in (0, 4, 8):
    for l in open(f"{O}/q{e}.json"):
        r = json.loads(l)
        if not r.get("ceiling"):
            rows.setdefault((r["op"], r["shape"], r.get("path", "")), {})[e] = r
print(f"{'op':<18} {'shape':<15} {'path':<12}" + "".join(f"  e{e}:us/kern/%cp   " for e in (0, 4, 8)))
for k, d in rows.items():
    print(f"{k[0]:<18} {k[1]:<15} {k[2]:<12}" + "".join(
        f"  {d[e]['us']:6.2f}/{d[e].get('kernel_us') or 0:6.2f}/{d[e]['pct_copy']:5.1f}" if e in d else "  -" for e in (0, 4, 8)))
PY
cd $O && tar czf all.tgz q*.json q*.txt p*.txt p*.err && rm -f q*.json q*.txt p*.txt p*.err
