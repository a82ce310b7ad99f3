#!/usr/bin/env bash
# session 22 call 4 (diagnostic; code: call5/fused-route.patch): the fused kernel launched without the cooperative
# attribute (SL_MOE_STAGED_NOCOOP), and the routing kernel + staged copy with the copy cooperative, no PDL (SL_MOE_STAGED_RL_COOP).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --hidden 2048"
SL_MOE_STAGED_NOCOOP=1 timeout 100 $B > $W/nocoop.txt 2>&1; echo rc=$?
grep -E "^moe" $W/nocoop.txt | grep -vE "regs" | cut -c1-150
SL_MOE_STAGED_RL_COOP=1 SL_BENCH_PAYLOAD=3 timeout 100 $B > $W/rlcoop.txt 2>&1; echo rc=$?
grep -E "^moe" $W/rlcoop.txt | grep -vE "regs" | cut -c1-150
