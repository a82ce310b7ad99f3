#!/usr/bin/env bash
# session 21 call 1: the staged quantized prefill copy (kernels/moe_dispatch.cu MOE_KERNEL 4): the dispatch GPU test's
# quantized cases (every path, both copies, forced staged shapes), then the quantized dispatch rows at T=4096/16384
# with staged shapes side by side and the register copy.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
SL_TEST_FILTER='test_quantized*' timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $W/test-quant.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test-quant.txt; grep -E "FAIL|fail|rror|PASSED|passed" $W/test-quant.txt | head -12
SL_BENCH_STAGED="512:2,512:4,1024:2,1024:4,2048:2,2048:3" timeout 200 $B bench moe-local --only moe_dispatch_quant \
  --tokens 4096,16384 > $W/quant.txt 2>&1; echo bench rc=$?
tar -czf $O/out.tgz -C $W .
grep -E "^moe" $W/quant.txt | grep -E "T=(4096|16384)" | cut -c1-150
