#!/usr/bin/env bash
# session 21 call 8 (experiment): the staged copy's x segments with an L2 evict-first policy (SL_MOE_STAGED_HINT=1)
# vs without, quantized rows at T=16384 (each run twice, alternating).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
i=0
for h in 0 1 0 1; do
  i=$((i + 1)); f=$W/quant-$i-hint$h.txt
  SL_MOE_STAGED_HINT=$h timeout 60 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 --hidden 2048 > $f 2>&1
  echo "run $i hint $h: $(grep -E '^moe' $f | grep -v regs | awk '{printf "%s ", $5}')"
done
