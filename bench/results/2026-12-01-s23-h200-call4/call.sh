#!/usr/bin/env bash
# session 23 call 4: the scatter probe at Qwen3 and DeepSeek-V3 sizes (bench/probes/scatter_bw.cu), then every local
# MoE GPU test (barrier, dispatch + combine, route + dispatch, layer, decode layer) and compute-sanitizer memcheck and
# racecheck on the dispatch + combine tests of odd shapes and ranges and on the staged copy's test.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
(cd bench/probes && nvcc -O3 -arch=sm_90 scatter_bw.cu -o /tmp/scatter_bw) && timeout 120 /tmp/scatter_bw > $W/probe.txt 2>&1
echo probe rc=$?; cat $W/probe.txt
timeout 420 tests/gpu/run --no-bench --tests 'gpu_test_moe_' > $W/run.txt 2>&1; echo run rc=$?; tail -3 $W/run.txt
cp /tmp/g/gpu-tests.log $W/ 2>/dev/null; grep -E "tests passed|Failed|FAILED|Passed|\*\*\*" $W/gpu-tests.log | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for tool in memcheck racecheck; do
  for f in test_odd_shapes_and_ranges test_staged_copy; do
    SL_TEST_FILTER=$f timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch \
      > $W/san-$tool-$f.txt 2>&1; echo "$tool $f rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool-$f.txt
  done
done
