#!/usr/bin/env bash
# session 21 call 3: routing back to the last-block scan (the look-back measured no gain, call 2); the staged copy's
# default shapes; the quantized and balanced-range dispatch tests and the graph test; then the quantized rows at
# T=16384 with each repetition's kernels (SL_BENCH_KERNEL_PARTS: routing and copy start/end).
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
SL_TEST_FILTER='test_[qbg]*' timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED|  OK) |ERROR" $W/test.txt | head -12
SL_BENCH_KERNEL_PARTS=1 timeout 200 $B bench moe-local --only moe_dispatch --tokens 16384 > $W/disp.txt 2>&1; echo bench rc=$?
tar -czf $O/out.tgz -C $W .
grep -E "^moe|kernel parts" $W/disp.txt | grep -vE "replicated|fused" | cut -c1-150 | head -120
