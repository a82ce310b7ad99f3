#!/usr/bin/env bash
# session 12 call 2: the one-row RMSNorm decode kernel (ONEROW) and the decode entries at 16 elements per thread:
# GPU tests, our rows, the graph sweep at T=1/16/128, the peers; QK-norm's per-head knobs at T=4096 by kernel time
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
(cd build-gpu && SL_TEST_FILTER='test_rmsnorm_[rsit]*' timeout 200 ctest -R 'gpu_test_norm$' --output-on-failure > $O/norm.txt 2>&1; echo norm1 rc=$?)
(cd build-gpu && SL_TEST_FILTER='test_rmsnorm_every_dtype*' timeout 100 ctest -R 'gpu_test_norm$' --output-on-failure >> $O/norm.txt 2>&1; echo norm2 rc=$?)
timeout 60 build-gpu/sluice bench kernels --only rmsnorm --tokens 1,16,128 > $O/rms.txt 2>&1; echo rms rc=$?
timeout 90 build-gpu/sluice bench kernels --only qknorm --tokens 4096 > $O/qk.txt 2>&1; echo qk rc=$?
timeout 150 python3 bench/torch_peers.py --budget-s 110 --tokens 1,16,128 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
timeout 130 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 1 --ops rms --tokens 1,16,128 --hidden 2048,4096,7168 --top 4 --budget-s 110 > $O/sweep.txt 2>&1; echo sweep rc=$?
grep -E "^rmsnorm |^qknorm " $O/rms.txt $O/qk.txt | cut -c1-150
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
grep -v "^#" $O/sweep.txt | head -50
