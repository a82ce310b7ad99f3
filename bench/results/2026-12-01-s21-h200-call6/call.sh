#!/usr/bin/env bash
# session 21 call 6 (final code): the dispatch, route-dispatch and layer GPU tests; compute-sanitizer memcheck and
# racecheck on the staged copy's small test; then the dispatch table (every T, both routings, bf16 and quantized).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_(dispatch|route_dispatch|layer)$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "FAILED|Failed" /tmp/g/gpu-tests.log | head; grep -cE "^  ok" /tmp/g/gpu-tests.log; cp /tmp/g/gpu-tests.log $W/
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_staged_copy timeout 150 compute-sanitizer --tool $tool build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt
done
timeout 240 build-gpu/sluice bench moe-local --only moe_dispatch --json $W/dispatch.json > $W/dispatch.txt 2>&1; echo rc=$?
cp /tmp/g/gpu-tests.log $W/
grep -E "^moe_dispatch" $W/dispatch.txt | grep -E "T=(4096|16384)" | grep -vE "staged [0-9]|rows|r8" | cut -c1-150
