#!/usr/bin/env bash
# session 22 call 5 (diagnostic; code: fused-route.patch here): items dealt so consecutive items go to different
# blocks / SMs (SL_MOE_STAGED_MAP: first item = warp x grid + block) -- fused and rl rows; the staged tests with it.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --hidden 2048"
SL_MOE_STAGED_MAP=1 timeout 100 $B > $W/map.txt 2>&1; echo rc=$?
grep -E "^moe" $W/map.txt | grep -vE "regs" | cut -c1-150
SL_MOE_STAGED_MAP=1 SL_TEST_FILTER='test_staged*' timeout 100 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1
echo test rc=$?; grep -E "^\[  (FAILED|PASSED) " $W/test.txt
