#!/usr/bin/env bash
# session 11 call 7: the 16-bit activation below SMs rows with >= 4 warp items per SM on the prefill warps
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_act$' > $O/run.txt 2>&1; tail -2 $O/run.txt
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 100 build-gpu/sluice bench kernels --only act_silu --tokens 1,16,128,1024 --json $O/act.json > $O/act.txt 2>&1; echo act rc=$?
timeout 200 python3 bench/torch_peers.py --budget-s 150 --tokens 1,16,128,1024 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
grep -E "^act_silu" $O/act.txt | cut -c1-110
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
