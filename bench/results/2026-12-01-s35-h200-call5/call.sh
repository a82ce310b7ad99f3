#!/usr/bin/env bash
# Session 35 call 5: gpu_test_quant test_fp8_ties after the review fix of its tie generator (absmax mantissas divisible
# by 7, not m), and test_q8_line (the straight-line path on the same quotient).
O=$1
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for f in test_fp8_ties test_q8_line; do
  SL_TEST_FILTER=$f timeout 100 build-gpu/tests/gpu_test_quant >> $O/tests.txt 2>&1; echo "$f rc=$?"
done
grep -E "^\[  (PASSED|FAILED)|SEED" $O/tests.txt
