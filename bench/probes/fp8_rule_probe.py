#!/usr/bin/env python3
"""Where the FP8 group-128 quantizer's gap to the approximate-quotient Triton group kernel comes from: our
quantizer under each of its scale rules against bench/triton_rows.py's two group kernels, all in one fixed CUDA
graph harness (bench/graph_time.py), round-robin so drift hits every candidate alike.
  ours-ieee   the issue's rule: scale = absmax / 448, each code e4m3(x / scale) (2 fp32 ops per bf16 element)
  ours-ceil   the UE8M0 rule: scale 2^e, each code e4m3(x * 2^-e) (one multiply per element)
  triton-grp  codes e4m3(x * (448 / absmax)) (one multiply per element; the quotient approximate)
  triton-ieee the issue's rule by tl.div_rn (bit for bit ours-ieee; checked)
If ours-ceil is level with or ahead of triton-grp where ours-ieee trails it, the gap is the exact per-element quotient.
  python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so [--tokens 1,16,128,1024,8192]
                                         [--hidden 2048,4096,7168] [--rounds 3]"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from graph_time import graph_us  # noqa: E402 (bench/graph_time.py)
from peer_ffi import FP8_GROUP, RULE_CEIL, RULE_IEEE, SluicePeerFFI  # noqa: E402 (bench/peer_ffi.py)
from triton_rows import triton_fp8_group, triton_fp8_group_ieee  # noqa: E402 (bench/triton_rows.py)

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--tokens", default="1,16,128,1024,8192")
ap.add_argument("--hidden", default="2048,4096,7168")
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()
ours = SluicePeerFFI(args.lib, 1e-6)
print(f"{'shape':<16} {'ours-ieee':>10} {'ours-ceil':>10} {'triton-grp':>11} {'triton-ieee':>12}"
      "   grp/ieee  grp/ceil  (graph us per call, median of rounds)")
for T in [int(t) for t in args.tokens.split(",")]:
    for H in [int(h) for h in args.hidden.split(",")]:
        x = torch.randn((T, H), dtype=torch.bfloat16, device="cuda")
        q_ours, s_ours = ours.quant(x, FP8_GROUP, RULE_IEEE)
        q_ti, s_ti = triton_fp8_group_ieee(x)
        torch.cuda.synchronize()
        if not (torch.equal(q_ours, q_ti.view(torch.uint8)) and torch.equal(s_ours.view(torch.int32),
                                                                             s_ti.view(torch.int32))):
            print(f"T={T} H={H}: ours-ieee differs from triton-ieee -- not timed")
            continue
        cands = {
            "ours-ieee": lambda: ours.quant(x, FP8_GROUP, RULE_IEEE),
            "ours-ceil": lambda: ours.quant(x, FP8_GROUP, RULE_CEIL),
            "triton-grp": lambda: triton_fp8_group(x),
            "triton-ieee": lambda: triton_fp8_group_ieee(x),
        }
        times = {k: [] for k in cands}
        for _ in range(args.rounds):
            for k, f in cands.items():
                times[k].append(graph_us(f))
        m = {k: statistics.median(v) for k, v in times.items()}
        grp = m["triton-grp"]
        print(f"T={T} H={H:<8} {m['ours-ieee']:10.3f} {m['ours-ceil']:10.3f} {grp:11.3f} {m['triton-ieee']:12.3f}   "
              f"{grp / m['ours-ieee']:8.3f}  {grp / m['ours-ceil']:8.3f}", flush=True)
