#!/usr/bin/env bash
# session 11 call 5: RMSNorm with the weight's unpacking kept in the row loop (no hoist between the weight's and x's
# loads): the rmsnorm GPU tests, then the RMSNorm tune (decode and prefill, every knob) to re-pick the table
O=$1; export OUT=/tmp/g
SL_TEST_FILTER='test_rmsnorm_*' tests/gpu/run --no-bench --tests 'gpu_test_norm$' > $O/run.txt 2>&1; tail -2 $O/run.txt
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
timeout 420 build-gpu/sluice bench kernels --tune --only rmsnorm --tokens 1,16,128,1024,8192 --json $O/tune.json > $O/tune.txt 2>&1; echo rc=$?
grep -E "^tune |^#|^ *\{" $O/tune.txt | head -80
