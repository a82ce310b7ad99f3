#!/usr/bin/env bash
# session 22 call 9: the staged copy's codes by the lanes' 16-byte stores too ("clanes" rows, staged_code_store =
# LANES) -- Qwen3 quantized rows at T=4096 and 16384, sanitizers and the quantized dispatch tests (every staged case
# also with the codes by the lanes).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 80 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 --hidden 2048 \
  > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | grep -v regs | cut -c1-140
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_staged_copy timeout 60 compute-sanitizer --tool $tool build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt
done
SL_TEST_FILTER='test_[qs]*' timeout 130 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |differ" $W/test.txt | head -5
