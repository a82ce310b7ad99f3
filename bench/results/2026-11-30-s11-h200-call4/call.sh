#!/usr/bin/env bash
# session 11 call 4: the peers at T <= 1024 in do_bench and in a CUDA graph (do_bench_cudagraph), ours through the FFI
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -2 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 420 python3 bench/torch_peers.py --budget-s 330 --tokens 1,16,128,1024 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo rc=$?
sed -n '/^same harness/,$p' $O/peers.txt | head -80
