#!/usr/bin/env bash
# Session 26 call 6: the whole `sluice bench moe-local` (grid barrier, dispatch, combine, layer; every default T) on
# the final code, for issue #4's table.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 280 build-gpu/sluice bench moe-local --json $W/moe-local.json > $W/moe-local.txt 2>&1; echo "bench rc=$?"
head -1 $W/moe-local.txt
grep -E "^grid_barrier|^moe_combine .*T=(1|128|16384) |^moe_dispatch .*T=(1|128|16384) " $W/moe-local.txt |
  grep -vE "forced|comparison|nopdl|no PDL" | awk '{print $1, $2, $3, $4, $5, $7, $9, $10}' | head -40
el
