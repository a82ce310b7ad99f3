#!/usr/bin/env bash
# Session 30 call 8: QK-norm's Qwen3 GPU test on the final code (kernels/vec.cuh gained sl_raw_add), and peer_sweep
# --graph over the fused RMSNorm launches at T=1024 h=2048/4096 (call 7: the Triton row kernel 3 % ahead at h=2048).
O=$1; export OUT=/tmp/g; W=/tmp/w8; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_qknorm_qwen3*' stdbuf -oL timeout 80 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test qknorm rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|compile-ahead" $W/gpu_test_norm.txt | tail -4; el
timeout 80 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 5 \
  --ops rmsres --tokens 1024 --hidden 2048,4096 --budget-s 60 > $W/sweep-rmsres.txt 2>&1
echo "sweep rc=$?"; el
grep -E "^==|^ +[0-9]" $W/sweep-rmsres.txt | cut -c1-140
