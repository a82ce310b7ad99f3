#!/usr/bin/env python3
"""Runs the fused residual-add RMSNorm at one decode shape a few times on the same inputs (L2-resident, as in
bench/torch_peers.py's CUDA graphs, where the Triton row kernel was 3-8 % ahead of ours at T=1..128 h=4096/7168
in session 30) -- bench/triton_rows.py's rms_res_row, or ours through the peer FFI -- for ncu:
  ncu --cache-control none -k regex:rms_res_row --launch-skip 5 --launch-count 1 \\
      python3 bench/probes/rms_res_once.py T H
  ncu --cache-control none -k regex:sl_rmsnorm --launch-skip 5 --launch-count 1 \\
      python3 bench/probes/rms_res_once.py T H --ours build-gpu/libsluice_peer_ffi.so
CUBIN_OUT: write Triton's cubin there (ours: the JIT cache under SL_CACHE_DIR)."""
import argparse
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from triton_rows import rms_res_row, rms_warps  # noqa: E402 (bench/triton_rows.py)

ap = argparse.ArgumentParser()
ap.add_argument("T", type=int)
ap.add_argument("H", type=int)
ap.add_argument("--ours", help="libsluice_peer_ffi.so: run ours instead of Triton's")
args = ap.parse_args()
T, H = args.T, args.H
x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
res = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
w = torch.randn(H, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
if args.ours:
    from peer_ffi import SluicePeerFFI  # noqa: E402 (bench/peer_ffi.py)
    ours = SluicePeerFFI(args.ours, 1e-6)
    for _ in range(8):
        ours.rms_res(x, res, w)
    torch.cuda.synchronize()
    sys.exit(0)
for _ in range(8):
    k = rms_res_row[(T,)](x, res, w, y, H, triton.next_power_of_2(H), 1e-6, num_warps=rms_warps(H))
torch.cuda.synchronize()
if os.environ.get("CUBIN_OUT"):
    try:
        open(os.environ["CUBIN_OUT"], "wb").write(k.asm["cubin"])
    except Exception as ex:
        print(f"no cubin: {ex}", file=sys.stderr)
