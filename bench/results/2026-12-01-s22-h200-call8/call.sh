#!/usr/bin/env bash
# session 22 call 8: the staged copy's shapes again now that the scales go out by the lanes' stores (Qwen3,
# T=4096 and 16384, SL_BENCH_STAGED rows), two rounds.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for r in 1 2; do
  SL_BENCH_STAGED=1024:2,1024:3,1024:4,2048:2,2048:3,512:4 timeout 120 build-gpu/sluice bench moe-local \
    --only moe_dispatch_quant --tokens 4096,16384 --hidden 2048 > $W/shapes$r.txt 2>&1; echo rc=$?
  grep -E "^moe" $W/shapes$r.txt | grep -vE "regs|sbulk" | cut -c1-150
done
