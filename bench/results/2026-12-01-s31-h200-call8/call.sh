#!/usr/bin/env bash
# Session 31 call 8: gpu_test_act after the review's mend (act.cu's 8/4-byte lane addresses by the element size).
O=$1; export OUT=/tmp/g; W=/tmp/w8; rm -rf $W; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
stdbuf -oL timeout 100 build-gpu/tests/gpu_test_act > $W/gpu_test_act.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR" $W/gpu_test_act.txt | tail -3
tar -czf $O/all.tgz -C $W .
