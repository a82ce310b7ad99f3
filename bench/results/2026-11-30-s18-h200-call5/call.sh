#!/usr/bin/env bash
# session 18 call 5 (final code, tests): the local MoE GPU tests (dispatch, route dispatch, layer, decode layer,
# barrier) and compute-sanitizer memcheck/racecheck on the quantized dispatch tests (the stores' new addressing).
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_route_dispatch$|gpu_test_moe_layer$|gpu_test_moe_layer_decode$|gpu_test_moe_barrier$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -8
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for tool in memcheck racecheck; do
SL_TEST_FILTER='test_quantized_payloads' timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $W/san-$tool.txt
done
cp $W/*.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
