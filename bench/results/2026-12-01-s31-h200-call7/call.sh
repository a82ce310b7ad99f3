#!/usr/bin/env bash
# Session 31 call 7 (final code): gpu_test_moe_layer -- the expert FFN's activation goes through sl_act (bf16 ->
# bf16), whose one-item decode kernel now takes 8-byte lanes where its blocks are <= 2 per SM.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 150 build-gpu/tests/gpu_test_moe_layer > $W/gpu_test_moe_layer.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR" $W/gpu_test_moe_layer.txt | tail -5; el
