#!/usr/bin/env python3
"""Session 36 experiment (not committed): our FP8 group quantizer with Triton's group-kernel math (QSKEL, env
SL_EXP_SKEL=1: codes e4m3(x * 448/absmax by div.full), no NaN/tiny paths, no sign OR) against our default and
triton-grp, fixed CUDA graphs, round-robin. If ours-skel matches triton-grp, the gap is our rule and paths; if it
matches ours, it is the framework (launch, layout, reduction)."""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from graph_time import graph_us  # noqa: E402
from peer_ffi import FP8_GROUP, RULE_IEEE, SluicePeerFFI  # noqa: E402
from triton_rows import triton_fp8_group  # noqa: E402

ours = SluicePeerFFI(sys.argv[1], 1e-6)
shapes = [(1, 2048), (1, 4096), (128, 4096), (128, 7168), (1024, 2048), (1024, 4096), (1024, 7168)]
rounds = 5


def skel(x):
    os.environ["SL_EXP_SKEL"] = "1"
    try:
        return ours.quant(x, FP8_GROUP, RULE_IEEE)
    finally:
        del os.environ["SL_EXP_SKEL"]


print(f"{'shape':<16} {'ours':>8} {'ours-skel':>10} {'triton-grp':>11}   grp/ours grp/skel  skel==grp codes")
for T, H in shapes:
    torch.manual_seed(T + H)
    x = torch.randn((T, H), dtype=torch.bfloat16, device="cuda")
    qs, ss = skel(x)
    qt, st = triton_fp8_group(x)
    torch.cuda.synchronize()
    eq = (qs == qt.view(torch.uint8)).float().mean().item()
    seq = (ss == st).float().mean().item()
    cands = {"ours": lambda: ours.quant(x, FP8_GROUP, RULE_IEEE), "skel": lambda: skel(x),
             "grp": lambda: triton_fp8_group(x)}
    t = {k: [] for k in cands}
    for _ in range(rounds):
        for k, f in cands.items():
            t[k].append(graph_us(f))
    m = {k: statistics.median(v) for k, v in t.items()}
    print(f"T={T} H={H:<8} {m['ours']:8.3f} {m['skel']:10.3f} {m['grp']:11.3f}   {m['grp'] / m['ours']:8.3f} "
          f"{m['grp'] / m['skel']:8.3f}  {eq:.4f} / scales {seq:.4f}", flush=True)
