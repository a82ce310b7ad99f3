#!/usr/bin/env bash
# session 11 call 9 (final): the RMSNorm table with the graph-measured T=1024 entries: its table-points test, the
# rows, and the peers at T <= 1024 in do_bench and in a CUDA graph
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
(cd build-gpu && SL_TEST_FILTER='test_rmsnorm_table_points' timeout 100 ctest -R 'gpu_test_norm$' --output-on-failure > $O/norm-table.txt 2>&1; echo norm rc=$?)
timeout 60 build-gpu/sluice bench kernels --only rmsnorm --tokens 1024 --json $O/rms.json > $O/rms.txt 2>&1; echo rms rc=$?
timeout 200 python3 bench/torch_peers.py --budget-s 140 --tokens 1,16,128,1024 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
grep -E "^rmsnorm " $O/rms.txt | cut -c1-110
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
