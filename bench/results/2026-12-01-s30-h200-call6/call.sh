#!/usr/bin/env bash
# Session 30 call 6: the fused residual add on packed pairs and no bias add at bias 0 (kernels/rmsnorm.cu):
# gpu_test_norm's RMSNorm tests (the new test_rmsnorm_residual_add_bits included), the RMSNorm rows of
# `sluice bench kernels`, and ours vs the Triton row kernel in the peers' graph harness.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_rmsnorm_*' stdbuf -oL timeout 240 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test norm rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|differ|compile-ahead" $W/gpu_test_norm.txt | tail -6; el
timeout 90 build-gpu/sluice bench kernels --only rmsnorm --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1
echo "bench rc=$?"; el
timeout 100 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 4 \
  --ops rmsres --tokens 1,16,128 --hidden 2048,4096,7168 --budget-s 80 > $W/sweep-rmsres.txt 2>&1
echo "sweep rc=$?"; el
left=$(( 540 - ($(date +%s) - t0) )); echo "peers budget $left"
timeout $left python3 bench/torch_peers.py --ops 'rmsnorm*' --tokens 1,16,128,1024,8192 --budget-s $((left - 20)) \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
grep -E "^==" $W/sweep-rmsres.txt
grep -E "^rmsnorm" $W/bench-kernels.txt | grep -v "other row" | cut -c1-150
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
