#!/usr/bin/env python3
"""Runs bench/torch_peers.py's Triton row RMSNorm a few times at one shape, for ncu:
  ncu -k regex:rms_row --launch-skip 3 --launch-count 1 python3 bench/probes/triton_rms_once.py T H
(the first launches compile and warm up). Inputs are rotated over 8 sets so L2 does not serve
them, as in `sluice bench kernels`."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from triton_rows import rms_row, rms_warps  # noqa: E402 (bench/triton_rows.py)


T, H = int(sys.argv[1]), int(sys.argv[2])
xs = [torch.randn(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
ys = [torch.empty_like(x) for x in xs]
w = torch.randn(H, device="cuda", dtype=torch.bfloat16)
for i in range(8):
    k = rms_row[(T,)](xs[i], w, ys[i], H, triton.next_power_of_2(H), 1e-6, num_warps=rms_warps(H))
torch.cuda.synchronize()
if os.environ.get("PTX_OUT"):  # the kernel's PTX, to compare loads, stores and math with ours
    try:
        open(os.environ["PTX_OUT"], "w").write(k.asm["ptx"])
    except Exception as ex:
        print(f"no PTX: {ex}", file=sys.stderr)
