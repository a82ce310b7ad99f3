#!/usr/bin/env bash
# Session 31 call 6 (final code): every RMSNorm test of gpu_test_norm (the T=1024 entries now take rsqrt, the fused
# h=2048 one the one-row kernel; SL_RMSNORM_LOOP_OFF).
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_rmsnorm_*' stdbuf -oL timeout 330 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|compile-ahead" $W/gpu_test_norm.txt | tail -5; el
