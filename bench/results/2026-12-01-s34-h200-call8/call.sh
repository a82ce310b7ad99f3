#!/usr/bin/env bash
# Session 34 call 8 (timing-only experiment, code in expq4.patch, not committed): the FP8 group quantizer's IEEE hot
# path straight-line for every lane (bad / tiny blocks take the exact path behind a warp-uniform vote) and the scale
# stored by a predicated store (SL_EXPQ=32), vs as committed, in bench/probes/fp8_rule_probe.py (which checks
# ours-ieee bit for bit against the IEEE Triton kernel before timing), alternating twice.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for r in a b; do for e in 0 32; do
  if [ $e = 0 ]; then unset SL_EXPQ; else export SL_EXPQ=$e; fi
  timeout 100 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so > $O/p$e$r.txt 2>&1
  echo "probe expq=$e $r rc=$?"
done; done; unset SL_EXPQ; el probes
for f in p0a p32a p0b p32b; do echo "== $f"; cat $O/$f.txt; done
