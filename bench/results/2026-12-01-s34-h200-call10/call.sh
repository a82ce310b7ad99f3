#!/usr/bin/env bash
# Session 34 call 10: bench/torch_peers.py's same-harness comparison for the FP8 group quantizer at T <= 1024 with
# the straight-line decode path committed (the peer target: no slower than the fastest peer in a graph).
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 200 python3 bench/torch_peers.py --tokens 1,16,128,1024 --ops quant_fp8_g128 --budget-s 170 \
  --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2> $O/peers.err
echo "peers rc=$?"; el peers
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt | head -40
