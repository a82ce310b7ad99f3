#!/usr/bin/env bash
# session 12 call 7: the SiLU one-item decode kernel (ONEITEM) -- gpu_test_act, the peers at T <= 128 in a graph, and the
# graph sweep of our SiLU launch choices (w=1 u=1 is the one-item kernel, other unrolls the loop)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_(device|act)$' > $O/run.txt 2>&1; tail -2 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 120 python3 bench/torch_peers.py --budget-s 90 --tokens 1,16,128 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
timeout 130 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 1 --ops silu --tokens 1,16,128 --hidden 2048,4096,7168 --top 5 --budget-s 110 > $O/sweep.txt 2>&1; echo sweep rc=$?
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt
grep -v "^#" $O/sweep.txt | head -60
