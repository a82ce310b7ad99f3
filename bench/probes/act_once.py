#!/usr/bin/env python3
"""Runs SiLU-and-mul (or GELU(tanh)-and-mul) at one shape a few times on the same inputs (L2-resident, as in
bench/torch_peers.py's CUDA graphs, where torch.compile was 0.01-0.04 us ahead of ours at T=1 in session 30) --
torch.compile's kernel as torch_peers.py builds it (dynamic=True), or ours through the peer FFI -- for ncu:
  TRITON_CACHE_DIR=/tmp/tc ncu --cache-control none -k regex:triton_ --launch-skip 5 --launch-count 1 \\
      python3 bench/probes/act_once.py T I
  ncu --cache-control none -k regex:sl_act --launch-skip 5 --launch-count 1 \\
      python3 bench/probes/act_once.py T I --ours build-gpu/libsluice_peer_ffi.so
torch.compile's cubins land in TRITON_CACHE_DIR; ours in the JIT cache under SL_CACHE_DIR."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ap = argparse.ArgumentParser()
ap.add_argument("T", type=int)
ap.add_argument("I", type=int)
ap.add_argument("--gelu", action="store_true")
ap.add_argument("--ours", help="libsluice_peer_ffi.so: run ours instead of torch.compile's")
args = ap.parse_args()
x = torch.randn(args.T, 2 * args.I, device="cuda", dtype=torch.bfloat16)


def eager(t):
    g, u = t.chunk(2, dim=-1)
    return (F.gelu(g, approximate="tanh") if args.gelu else F.silu(g)) * u


if args.ours:
    from peer_ffi import ACT_GELU, ACT_SILU, SluicePeerFFI  # noqa: E402 (bench/peer_ffi.py)
    ours = SluicePeerFFI(args.ours, 1e-6)
    fn = lambda: ours.act(x, ACT_GELU if args.gelu else ACT_SILU)  # noqa: E731
else:
    comp = torch.compile(eager, dynamic=True)
    fn = lambda: comp(x)  # noqa: E731
for _ in range(8):
    y = fn()
torch.cuda.synchronize()
err = (y.float() - eager(x).float()).abs().max().item()
print(f"max |ours - eager| {err:.3g}" if args.ours else f"max |compile - eager| {err:.3g}")
