#!/usr/bin/env bash
# Session 35 call 4: bench/torch_peers.py at T <= 1024 with every peer (PyTorch eager, torch.compile, the Triton row and
# group kernels) and ours through the FFI in the same harness, next to call 3's `sluice bench kernels` JSON.
O=$1; W=$O
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el built
left=$(( 470 - ($(date +%s) - t0) )); echo "peers budget $left"
timeout $left python3 bench/torch_peers.py --tokens 1,16,128,1024 --budget-s $((left - 25)) \
  --ours bench/results/2026-12-01-s35-h200-call3/bench-kernels.json \
  --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; grep -E "^# budget|^# .*stopped" $W/peers.txt | head -3; el peers
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
