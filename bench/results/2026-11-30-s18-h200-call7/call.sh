#!/usr/bin/env bash
# session 18 call 7 (same machine as call 6, final code): the kernels bench's peers (PyTorch eager, torch.compile,
# the Triton row kernels) against ours in the same harness (bench/torch_peers.py through libsluice_peer_ffi.so).
# The command as sent (run from the repository root, after call 6 built build-gpu):
export NCCL_NVLS_ENABLE=0 SL_NVLS=0; lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
ls build-gpu/libsluice_peer_ffi.so && timeout 330 python3 bench/torch_peers.py --budget-s 220 \
  --ours-lib build-gpu/libsluice_peer_ffi.so --json $OUT/peers.json > $OUT/peers.txt 2>&1; echo rc=$?
