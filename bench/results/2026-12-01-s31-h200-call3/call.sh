#!/usr/bin/env bash
# Session 31 call 3: the T=1024 RMSNorm entries from call 2 (rsqrt, the fused h=2048 one-row kernel) -- gpu_test_norm's
# RMSNorm tests that cover them (table points, the row factor with SL_RMSNORM_LOOP_OFF, the residual bits); the
# extended `--tune` (rsqrt at every prefill T, the one-row kernel where AUTO runs the loop, T=1024 in a graph) at
# T=1024/8192/32768; torch_peers' RMSNorm rows at T <= 1024.
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_rmsnorm_[rt]*' stdbuf -oL timeout 200 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|compile-ahead" $W/gpu_test_norm.txt | tail -5; el
timeout 240 build-gpu/sluice bench kernels --only rmsnorm --tune --tokens 1024,8192,32768 \
  --json $W/tune.json > $W/tune.txt 2>&1; echo "tune rc=$?"; el
timeout 100 python3 bench/torch_peers.py --tokens 1,16,128,1024 --ops 'rmsnorm*' --budget-s 85 \
  --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
grep -E "^tune |^    \{|^#   \{" $W/tune.txt | cut -c1-150
grep -E "^rmsnorm" $W/tune.txt | grep -v tune | cut -c1-150 | head -30
sed -n '/^same harness, in a CUDA graph/,$p' $W/peers.txt | head -40
