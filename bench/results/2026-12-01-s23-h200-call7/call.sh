#!/usr/bin/env bash
# session 23 call 7: the direct copy (kernels/moe_dispatch.cu MOE_KERNEL 5, the default for FP4 payloads): its GPU
# test, the quantized dispatch rows at T=4096 and 16384 (both models; "direct" / "staged" comparison rows), the
# whole gpu_test_moe_dispatch, then memcheck and racecheck on test_direct_copy.
# (This build made the direct copy the default for every FP4 case; call 8 has the final rule.)
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER=test_direct_copy timeout 60 build-gpu/tests/gpu_test_moe_dispatch > $W/direct.txt 2>&1; echo direct rc=$?
grep -E "^  ok|FAILED|differ|PASSED" $W/direct.txt | head -14
timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --json $W/quant.json \
  > $W/quant.txt 2>&1; echo bench rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | grep -vE "regs|sbulk" | cut -c1-150
timeout 280 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |differ" $W/test.txt | head -5
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_direct_copy timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 \
    build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED  \]" $W/san-$tool.txt | head -3
done
