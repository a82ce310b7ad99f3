#!/usr/bin/env bash
# session 11 call 6 (final): RMSNorm rows with the re-tuned table, launch sweeps in a CUDA graph (T=128), the peers
# in do_bench and in a graph, then the GPU tests of what this session changed
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -2 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 120 build-gpu/sluice bench kernels --only rmsnorm --tokens 1,16,128,1024,8192,32768 --json $O/rms.json > $O/rms.txt 2>&1; echo rms rc=$?
timeout 170 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 1 --ops rms,silu --tokens 128 --hidden 2048,4096,7168 --top 5 --budget-s 140 > $O/sweep.txt 2>&1; echo sweep rc=$?
timeout 200 python3 bench/torch_peers.py --budget-s 150 --tokens 1,16,128,1024 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
(cd build-gpu && SL_TEST_FILTER='test_rmsnorm_table_points' timeout 100 ctest -R 'gpu_test_norm$' --output-on-failure > $O/norm-table.txt 2>&1; echo norm rc=$?; tail -3 $O/norm-table.txt)
(cd build-gpu && timeout 200 ctest -R 'gpu_test_quant$' --output-on-failure > $O/quant-test.txt 2>&1; echo quant rc=$?; tail -3 $O/quant-test.txt)
grep -E "^rmsnorm" $O/rms.txt | cut -c1-110
grep -E "^==" $O/sweep.txt
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt | grep rmsnorm
