#!/usr/bin/env bash
# session 12 call 1: RMSNorm's decode factor by rsqrt (+ four partial sums), SiLU's 16-bit output by ex2.approx:
# the GPU tests of both, the rows with the other factor, the graph sweep of RMSNorm launch choices, the peers
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_(device|act)$' > $O/run.txt 2>&1; tail -3 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
(cd build-gpu && SL_TEST_FILTER='test_rmsnorm_[rit]*' timeout 150 ctest -R 'gpu_test_norm$' --output-on-failure > $O/norm.txt 2>&1; echo norm rc=$?)
timeout 60 build-gpu/sluice bench kernels --only rmsnorm --tokens 1,16,128 --json $O/rms.json > $O/rms.txt 2>&1; echo rms rc=$?
timeout 60 build-gpu/sluice bench kernels --only act_silu --tokens 1,16,128,1024 --json $O/act.json > $O/act.txt 2>&1; echo act rc=$?
timeout 200 python3 bench/torch_peers.py --budget-s 140 --tokens 1,16,128,1024 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
timeout 170 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 1 --ops rms --tokens 1,16,128 --hidden 2048,4096,7168 --top 5 --budget-s 150 > $O/sweep.txt 2>&1; echo sweep rc=$?
grep -E "^rmsnorm |^act_silu" $O/rms.txt $O/act.txt | cut -c1-120
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
grep -v "^#" $O/sweep.txt | head -60
