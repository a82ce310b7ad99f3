#!/usr/bin/env bash
# Session 29 call 7: the MoE dispatch's quantized payloads (kernels/moe_dispatch.cu runs quant_dev.cuh's
# sl_kq_quantize_fast, which this session made division-free): gpu_test_moe_dispatch's quantized, staged-copy and
# direct-copy tests against the CPU reference.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_[qsd][uti]*' stdbuf -oL timeout 150 build-gpu/tests/gpu_test_moe_dispatch > $W/gpu_test_moe_dispatch.txt 2>&1
echo "moe dispatch rc=$?"; grep -E "^SL_TEST|^\[  (PASSED|FAILED) |FAILED|ERROR|\[       OK \]" $W/gpu_test_moe_dispatch.txt | tail -8
el
