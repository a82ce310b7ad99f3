#!/usr/bin/env bash
# session 12 call 8 (final): SiLU's one-item decode kernel and the 4-warp blocks at 4-8 items per SM -- gpu_test_act,
# gpu_test_moe_layer (its split FFN runs sl_act at small T), the peers at T <= 128 in a graph
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_(device|act|moe_layer)$' > $O/run.txt 2>&1; tail -2 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 120 python3 bench/torch_peers.py --budget-s 90 --tokens 1,16,128 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; grep -E "Test +#" $O/gpu-tests.log
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
