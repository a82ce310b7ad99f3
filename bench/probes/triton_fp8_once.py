#!/usr/bin/env python3
"""Runs bench/triton_rows.py's Triton FP8 group-128 quantization kernel -- or ours through the peer FFI at a chosen
launch -- a few times at one shape, for ncu:
  ncu -k regex:fp8_group_quant --launch-skip 3 --launch-count 1 python3 bench/probes/triton_fp8_once.py T H
  ncu -k regex:sl_quant_kernel --launch-skip 3 --launch-count 1 python3 bench/probes/triton_fp8_once.py T H \\
      --ours build-gpu/libsluice_peer_ffi.so [--launch W,U,S,MB]
(the first launches compile and warm up; --launch: warps, unroll, segment length -- 0 the item layout, -1 the
table's --, blocks per SM compiled for; default the table's launch). Inputs are rotated over 8 sets so L2 does not
serve them, as in `sluice bench kernels`. PTX_OUT / CUBIN_OUT: write Triton's PTX / cubin there."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from triton_rows import fp8_group_quant, fp8_groups_launch  # noqa: E402 (bench/triton_rows.py)

ap = argparse.ArgumentParser()
ap.add_argument("T", type=int)
ap.add_argument("H", type=int)
ap.add_argument("--ours", help="libsluice_peer_ffi.so: run ours instead of Triton's")
ap.add_argument("--launch", default="0,0,-1,0")
args = ap.parse_args()
T, H = args.T, args.H
xs = [torch.randn(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
if args.ours:
    from peer_ffi import SluicePeerFFI  # noqa: E402 (bench/peer_ffi.py)
    ours = SluicePeerFFI(args.ours, 1e-6)
    w, u, s, mb = (int(v) for v in args.launch.split(","))
    ours.kq_overrides(w, u, s, 0, mb)
    for i in range(8):
        ours.fp8_group(xs[i])
    torch.cuda.synchronize()
    sys.exit(0)
qs = [torch.empty((T, H), dtype=torch.float8_e4m3fn, device="cuda") for _ in range(8)]
ss = [torch.empty((T, H // 128), dtype=torch.float32, device="cuda") for _ in range(8)]
n = T * (H // 128)
programs, gpp, warps = fp8_groups_launch(n)
for i in range(8):
    k = fp8_group_quant[(programs,)](xs[i], qs[i], ss[i], n, gpp, num_warps=warps)
torch.cuda.synchronize()
for env, key, mode in (("PTX_OUT", "ptx", "w"), ("CUBIN_OUT", "cubin", "wb")):
    if os.environ.get(env):
        try:
            open(os.environ[env], mode).write(k.asm[key])
        except Exception as ex:
            print(f"no {key}: {ex}", file=sys.stderr)
