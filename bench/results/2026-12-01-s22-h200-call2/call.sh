#!/usr/bin/env bash
# session 22 call 2 (code: call5/fused-route.patch without the diagnostics): the staged copy routing itself on ONE
# block per SM, later chunks' ids prefetched to L2 -- tests, sanitizers, the barrier at more blocks, the quantized rows.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_[qs]*' timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |ERROR|differ" $W/test.txt | head
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_staged_copy timeout 100 compute-sanitizer --tool $tool build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt
done
SL_BENCH_BARRIER_BLOCKS=264,528,924 timeout 60 build-gpu/sluice bench moe-local --only grid_barrier > $W/barrier.txt 2>&1
grep -E "^grid" $W/barrier.txt | cut -c1-120
timeout 170 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384 > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | cut -c1-175
