#!/usr/bin/env bash
# session 22 call 3 (diagnostic; code: call5/fused-route.patch): kernel spans with the fused kernel cut after each phase
# (SL_MOE_STAGED_CUT 1: ranking, 2: + barrier 1, 3: + scan + barrier 2, 4: x prefetch only; each waits for its x
# copies), SL_BENCH_KERNEL_PARTS, and the x prefetch after the ranking (SL_MOE_STAGED_LATEPF).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --hidden 2048"
for cut in 1 2 3 4; do
  SL_MOE_STAGED_CUT=$cut SL_BENCH_PAYLOAD=3 timeout 60 $B > $W/cut$cut.txt 2>&1; echo "cut $cut rc=$?"
  grep -E "^moe" $W/cut$cut.txt | grep -vE "regs|rl" | cut -c1-150
done
SL_BENCH_KERNEL_PARTS=1 timeout 100 $B > $W/parts.txt 2>&1; echo rc=$?
grep -E "^moe|kernel parts" $W/parts.txt | cut -c1-150 | head -60
SL_MOE_STAGED_LATEPF=1 timeout 100 $B > $W/latepf.txt 2>&1; echo rc=$?
grep -E "^moe" $W/latepf.txt | grep -vE "regs|rl" | cut -c1-150
