#!/usr/bin/env bash
# session 21 call 7: the staged copy's bounded x wait decided by the whole warp (__all_sync / __any_sync) -- the
# quantized dispatch tests and test_staged_copy (+ memcheck), then the quantized rows at T=16384 once more.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_[qs]*' timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |ERROR" $W/test.txt | head
SL_TEST_FILTER=test_staged_copy timeout 120 compute-sanitizer --tool memcheck build-gpu/tests/gpu_test_moe_dispatch \
  > $W/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/san-memcheck.txt
timeout 150 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe" $W/quant.txt | cut -c1-150
