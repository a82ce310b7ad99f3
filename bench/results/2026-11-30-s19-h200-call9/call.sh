#!/usr/bin/env bash
# session 19 call 9 (final code): the RMSNorm tune at T=32768 (the table's session-2 picks there) and the kernels
# bench's peers in the same harness (bench/torch_peers.py through libsluice_peer_ffi.so).
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 300 python3 bench/torch_peers.py --budget-s 220 --ours-lib build-gpu/libsluice_peer_ffi.so --json $W/peers.json > $W/peers.txt 2>&1; echo rc=$?
timeout 200 build-gpu/sluice bench kernels --tune --only rmsnorm --tokens 32768 --hidden 2048,4096,7168 > $W/tune.txt 2>&1; echo rc=$?
grep -E "best|^rmsnorm .*T=32768.* (full|res)" $W/tune.txt | grep -E "best|rmsnorm " | cut -c1-110 | head -60
tar -czf $O/out.tgz -C $W .
