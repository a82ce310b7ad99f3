#!/usr/bin/env bash
# Session 28 call 6: the fused residual RMSNorm's h=2048 T=1024 entry (e=16, one row per block, weight in registers):
# gpu_test_norm's table points (h=2048/4096/7168 x rows 5/1031/4097, plain and fused), our bench's RMSNorm rows at
# T=1024, and the peers' fused rows at T=1024 with ours through the FFI.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_rmsnorm_table_points' stdbuf -oL timeout 120 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test norm rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" $W/gpu_test_norm.txt | tail -3; el
timeout 60 build-gpu/sluice bench kernels --only rmsnorm --tokens 1024 > $W/bench-rms.txt 2>&1; echo "bench rc=$?"
grep -E "^rmsnorm\+residual +T=1024" $W/bench-rms.txt | cut -c1-125; el
timeout 90 python3 bench/torch_peers.py --budget-s 70 --tokens 1024 --ops 'rmsnorm+residual' \
  --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err; echo "peers rc=$?"
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt; el
