#!/usr/bin/env python3
"""What a CUDA graph of back-to-back calls spends per call: the kernels' own durations and the start-to-start
interval of consecutive kernels (CUPTI through the PyTorch profiler, on graph replays), next to
triton.testing.do_bench_cudagraph's time per call and bench/graph_time.py's at 20 / 100 / 500 / 3000 calls per graph --
for SiLU-and-mul bf16 at small T, where bench/torch_peers.py's
graph time of ours (through the FFI) and our own bench's graph_us disagree (session 29: T=1 I=4096 1.55 vs 1.12 us).
  python3 bench/probes/graph_nodes.py --lib build-gpu/libsluice_peer_ffi.so [--tokens 1,16] [--inter 2048,4096,7168]"""
import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from graph_time import graph_us  # noqa: E402 (bench/graph_time.py)
from peer_ffi import SluicePeerFFI  # noqa: E402 (bench/peer_ffi.py)
from triton_rows import triton_silu  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--tokens", default="1,16")
ap.add_argument("--inter", default="2048,4096,7168")
ap.add_argument("--calls", type=int, default=40, help="calls captured per graph")
args = ap.parse_args()
ours = SluicePeerFFI(args.lib, 1e-6)


def eager_silu(x):
    g, u = x.chunk(2, dim=-1)
    return F.silu(g) * u


comp = torch.compile(eager_silu, dynamic=True)


def profile_graph(fn, calls):
    """(median kernel duration, median start-to-start of consecutive kernels, kernels per call, names) in us."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start)
    dur = [b - a for a, b, _ in ev]
    gaps = [ev[i + 1][0] - ev[i][0] for i in range(len(ev) - 1) if ev[i + 1][0] - ev[i][0] < 20]
    names = sorted({n[:40] for _, _, n in ev})
    return (statistics.median(dur) if dur else float("nan"), statistics.median(gaps) if gaps else float("nan"),
            len(ev) / (5 * calls), names)


for T in [int(t) for t in args.tokens.split(",")]:
    for inter in [int(i) for i in args.inter.split(",")]:
        x = torch.randn(T, 2 * inter, device="cuda", dtype=torch.bfloat16)
        ref = eager_silu(x)
        got = ours.silu(x)
        torch.cuda.synchronize()
        if not torch.allclose(got.float(), ref.float(), rtol=2e-2, atol=1e-3):
            print(f"T={T} I={inter}: ours differs from eager; not timed")
            continue
        cands = (("sluice", lambda: ours.silu(x)), ("compile", lambda: comp(x)), ("triton", lambda: triton_silu(x)))
        for name, fn in cands:
            gus = do_bench_cudagraph(fn, rep=20, return_mode="median") * 1e3
            fixed = " ".join(f"{graph_us(fn, calls=n):5.2f}" for n in (20, 100, 500, 3000))
            d, gap, kpc, names = profile_graph(fn, args.calls)
            print(f"act_silu_bf16 T={T:<3d} I={inter:<5d} {name:8s} dbc {gus:6.2f} us  graph of 20/100/500/3000 "
                  f"{fixed}  kernel {d:6.2f}  start-to-start {gap:6.2f}  kernels/call {kpc:.2f}  {' '.join(names)}",
                  flush=True)
