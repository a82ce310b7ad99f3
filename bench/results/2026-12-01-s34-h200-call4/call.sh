#!/usr/bin/env bash
# Session 34 call 4 (timing-only experiment, code in expq.patch, not committed): the quantizers at H=2048,
# T=8192/32768 with SL_EXPQ = "" (as committed), 1 (no scale stores), 2 (no encoding: codes = xor of the input
# words, the absmax reduction kept), 3 (both). Dequantizer rows (same filter) are unchanged: a noise control.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for e in 0 1 2 3; do
  if [ $e = 0 ]; then unset SL_EXPQ; else export SL_EXPQ=$e; fi
  timeout 150 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --hidden 2048 --json $O/q$e.json \
    > $O/q$e.txt 2>&1; echo "expq=$e rc=$?"; el "expq $e"
done
unset SL_EXPQ
python3 - $O <<'PY'
import json, sys
O = sys.argv[1]
rows = {}
for e in range(4):
    try:
        for l in open(f"{O}/q{e}.json"):
            r = json.loads(l)
            if r.get("ceiling"): continue
            rows.setdefault((r["op"], r["shape"], r.get("path", "")), {})[e] = r
    except FileNotFoundError:
        pass
print(f"{'op':<18} {'shape':<15} {'path':<12}" + "".join(f"  e{e}:us/kern/%cp" for e in range(4)))
for k, d in rows.items():
    cells = "".join(f"  {d[e]['us']:6.2f}/{d[e].get('kernel_us') or 0:6.2f}/{d[e]['pct_copy']:5.1f}" if e in d else "  -" * 1
                    for e in range(4))
    print(f"{k[0]:<18} {k[1]:<15} {k[2]:<12}{cells}")
PY
