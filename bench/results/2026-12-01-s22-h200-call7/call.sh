#!/usr/bin/env bash
# session 22 call 7 (final code): the staged copy's scales by the lanes' 16-byte stores (default) -- the quantized
# dispatch tests (every staged case also with staged_scale_bulk), test_staged_copy under memcheck and racecheck,
# then the quantized dispatch rows at T=4096 and 16384 with the "sbulk" comparison rows (the scales by bulk copies).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_[qs]*' timeout 250 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |differ" $W/test.txt | head -5
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_staged_copy timeout 100 compute-sanitizer --tool $tool build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt
done
timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --json $W/quant.json \
  > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | grep -v regs | cut -c1-150
