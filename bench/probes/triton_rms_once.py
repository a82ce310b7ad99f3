#!/usr/bin/env python3
"""Runs bench/torch_peers.py's Triton row RMSNorm a few times at one shape, for ncu:
  ncu -k regex:rms_row --launch-skip 3 --launch-count 1 python3 bench/probes/triton_rms_once.py T H
(the first launches compile and warm up). Inputs are rotated over 8 sets so L2 does not serve
them, as in `sluice bench kernels`."""
import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def rms_row(x_ptr, w_ptr, y_ptr, H: tl.constexpr, BLOCK: tl.constexpr, eps):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(x_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + offs, (x * r * w).to(tl.bfloat16), mask=m)


T, H = int(sys.argv[1]), int(sys.argv[2])
xs = [torch.randn(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
ys = [torch.empty_like(x) for x in xs]
w = torch.randn(H, device="cuda", dtype=torch.bfloat16)
for i in range(8):
    k = rms_row[(T,)](xs[i], w, ys[i], H, triton.next_power_of_2(H), 1e-6, num_warps=8 if H >= 4096 else 4)
torch.cuda.synchronize()
if os.environ.get("PTX_OUT"):  # the kernel's PTX, to compare loads, stores and math with ours
    try:
        open(os.environ["PTX_OUT"], "w").write(k.asm["ptx"])
    except Exception as ex:
        print(f"no PTX: {ex}", file=sys.stderr)
