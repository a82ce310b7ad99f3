#!/usr/bin/env python3
"""Peers for `sluice bench kernels` on the GPU machine: PyTorch eager, torch.compile and a
Triton row kernel for the same ops and shapes, timed by triton.testing.do_bench (median,
L2 flushed between repetitions), and at T <= 1024 also in a CUDA graph (do_bench_cudagraph: the
calls captured back to back and replayed, no host in the time, as our graph_us). Prints a table
and, given our bench JSON, the ratio of the fastest peer's time to ours (>1: we are faster).
With --ours-lib it also times our kernels in this same harness (bench/peer_ffi.c, rows "sluice").
From 8192 tokens every row is also timed the way `sluice bench kernels` times ours (issue #3's method): each
call on the next of several input sets that together exceed L2 several times (rotated, no fill), events per
call enqueued back to back (median), and the kernel time of such calls by the profiler ("rotated" columns).
  python3 bench/torch_peers.py [--ours bench-kernels.json] [--ours-lib libsluice_peer_ffi.so]
                               [--json out.json] [--tokens T,...] [--quick] [--budget-s S]"""
import argparse
import json
import re
import sys
import time

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

from peer_ffi import SluicePeerFFI  # bench/peer_ffi.py, next to this script
from triton_rows import triton_rms as triton_row_rms, triton_silu  # bench/triton_rows.py

ap = argparse.ArgumentParser()
ap.add_argument("--ours")
ap.add_argument("--json")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--budget-s", type=float, default=240.0)
ap.add_argument("--tokens", help="comma-separated token counts (default: all of the issue's)")
ap.add_argument("--ours-lib", help="libsluice_peer_ffi.so: also time our RMSNorm, SiLU-and-mul and FP8 "
                "quantization in this harness (rows 'sluice'), next to the peers")
args = ap.parse_args()
start = time.time()
dev = "cuda"
EPS = 1e-6


def triton_rms(x, w):
    return triton_row_rms(x, w, EPS)


def eager_rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def eager_silu(x):
    g, u = x.chunk(2, dim=-1)
    return F.silu(g) * u


ours_lib = SluicePeerFFI(args.ours_lib, EPS) if args.ours_lib else None


def ours_row(op, shape, fn, ref, nb, T, rot=None):
    """Our kernel timed like the peers, after one call that JIT-compiles it and a check of its
    output against `ref` (a peer's output: the values, or for quantization the scales, within
    2^-6 relative) -- a wrong result (an ABI slip) is reported and not timed."""
    got, want = fn(), ref()
    torch.cuda.synchronize()
    g, r = (got[1], want[1]) if isinstance(got, tuple) else (got.float(), want.float())
    if not torch.allclose(g, r, rtol=2 ** -6, atol=1e-6):
        print(f"# sluice {op} {shape}: output differs from the peer's (max {(g - r).abs().max().item():.3g}); not timed")
        return
    rec(op, shape, "sluice", fn, nb, T, rot)


def eager_fp8_group(x):
    T, H = x.shape
    g = x.float().view(T, H // 128, 128)
    s = g.abs().amax(-1, keepdim=True) / 448.0
    q = (g / s.clamp(min=1e-12)).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.view(T, H), s.view(T, H // 128)


def eager_qknorm(q, k, wq, wk):
    return F.rms_norm(q, (q.shape[-1],), wq, EPS), F.rms_norm(k, (k.shape[-1],), wk, EPS)


compiled = {}


def comp(fn):
    if fn not in compiled:
        compiled[fn] = torch.compile(fn, dynamic=True)
    return compiled[fn]


def t_us(fn):
    return do_bench(fn, warmup=3, rep=20, return_mode="median") * 1e3


def g_us(fn):
    """Median time per call of fn replayed in a CUDA graph (triton.testing.do_bench_cudagraph:
    as many calls as fill ~20 ms captured back to back, no L2 flush between them), or None where
    fn cannot be captured."""
    from triton.testing import do_bench_cudagraph
    try:
        try:
            ms = do_bench_cudagraph(fn, rep=20, return_mode="median")
        except TypeError:  # an older Triton: the mean
            ms = do_bench_cudagraph(fn, rep=20)
        return ms * 1e3
    except Exception as ex:
        print(f"# graph time: {type(ex).__name__}: {ex}", file=sys.stderr)
        torch.cuda.synchronize()
        return None


FLUSH = None


def k_us(fn, reps=20):
    """Median kernel time of one call by the PyTorch profiler (CUPTI, as our kern_us): the span
    from the call's first kernel start to its last kernel end, each call after an L2 flush (a
    256 MB fill, whose kernel separates the calls and is not counted). None if the profiler
    gives no kernels."""
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(reps):
            FLUSH.fill_(1)
            fn()
        torch.cuda.synchronize()
    return spans_median(prof)


ROT_BYTES = 256 << 20  # one round of the rotated input sets: > 4x the H200's 60 MB L2, as launch/bench_util.c


def rot_sets(nbytes_in):
    """How many input sets a rotated row cycles through: one round of them >= ROT_BYTES (at most 16)."""
    return min(16, ROT_BYTES // max(nbytes_in, 1) + 2)


def rot_times(fns, reps=40):
    """(events us, kernel us): median over `reps` calls, call i on input set i % len(fns). Events: every call
    between its own pair, all enqueued behind a ~20 ms GPU sleep before one sync, so the GPU finds them queued
    and runs them back to back (device time, as our bench's plain `us`: a Python call path takes longer than a
    T=8192 kernel). Kernel: the profiler's span of each call's kernels, the calls separated by a one-element
    fill (no L2 flush) whose kernel marks the boundary and is not counted."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(40_000_000)  # ~20 ms of GPU clocks while the host enqueues the calls
    for i, (a, b) in enumerate(ev):
        a.record()
        fns[i % len(fns)]()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    eus = t[len(t) // 2] * 1e3
    marker = torch.empty(1, device=dev)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            marker.fill_(0)
            fns[i % len(fns)]()
        torch.cuda.synchronize()
    return eus, spans_median(prof)


def spans_median(prof):
    """Median span of the kernels between fill kernels (each call's first kernel start to its last end)."""
    kern = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start)
    spans, cur = [], None
    for start, end, name in kern:
        if "fill" in name.lower() or "memset" in name.lower():
            if cur:
                spans.append(cur[1] - cur[0])
            cur = None
        elif cur is None:
            cur = [start, end]
        else:
            cur[1] = max(cur[1], end)
    if cur:
        spans.append(cur[1] - cur[0])
    if not spans:
        return None
    spans.sort()
    return spans[len(spans) // 2]


def rotated_rows(peer_rows, key):
    """The peers' rows of (op, shape) that have rotated times."""
    return [r for r in peer_rows if (r["op"], r["shape"]) == key and r.get("rot_us") and r.get("rot_kernel_us")]


def compare_rotated(title, who, items):
    """items: (key, our events us, our kernel us, the peers' rotated rows); each against the fastest peer by either
    measure (ratio = peer / ours, > 1: we are faster), then how many shapes `who` wins."""
    items = [it for it in items if it[3]]
    if not items:
        return
    n_ev = n_k = 0
    print(f"\n{title} (ratio = fastest peer / ours)")
    for k, o_us, o_k, cand in items:
        e = min(cand, key=lambda r: r["rot_us"])
        kr = min(cand, key=lambda r: r["rot_kernel_us"])
        er, kk = e["rot_us"] / o_us, kr["rot_kernel_us"] / o_k
        n_ev += er < 1
        n_k += kk < 1
        print(f"  {k[0]:<20} {k[1]:<22} ours {o_us:9.2f} us  {e['peer']:<11} {e['rot_us']:9.2f} us  ratio {er:5.2f}"
              f" | kern {o_k:8.2f} vs {kr['rot_kernel_us']:8.2f} ({kr['peer']}) ratio {kk:5.2f}")
    print(f"shapes where {who} is faster with rotated inputs: {n_ev} of {len(items)} by events, "
          f"{n_k} of {len(items)} by kernel time")


Ts = [1, 16, 8192] if args.quick else [1, 16, 128, 1024, 8192, 32768]
if args.tokens:
    Ts = [int(t) for t in args.tokens.split(",")]
Hs = [7168] if args.quick else [2048, 4096, 7168]
rows = []


def rec(op, shape, peer, fn, nbytes, tokens, rot=None):
    """One row: fn timed by do_bench, and from 8192 tokens also its kernel time (k_us), so the
    large shapes compare kernel to kernel as well as events to events; `rot` (the same call on each
    rotated input set, from 8192 tokens) adds the rotated times (rot_times)."""
    us = t_us(fn)
    gus = g_us(fn) if tokens <= 1024 else None
    kus = rus = rkus = None
    if tokens >= 8192:
        try:
            kus = k_us(fn)
            if rot:
                rus, rkus = rot_times(rot)
        except Exception as ex:  # the profiler is optional: the events time stands alone
            print(f"# kernel time of {op} {shape} {peer}: {ex}", file=sys.stderr)
    rows.append({"op": op, "shape": shape, "peer": peer, "us": us, "bytes": nbytes, "kernel_us": kus, "graph_us": gus,
                 "rot_us": rus, "rot_kernel_us": rkus})
    ktxt = f"{kus:10.2f} kern_us" if kus else f"{gus:10.2f} graph_us" if gus else ""
    if rus and rkus:
        ktxt += f" | rotated {rus:9.2f} us {rkus:9.2f} kern_us"
    print(f"{op:<20} {shape:<22} {peer:<14} {us:10.2f} us {nbytes / us / 1e3:9.1f} GB/s {ktxt}", flush=True)


def rotated(inputs, f):
    """The call f(x) on each rotated input set (None below 8192 tokens: those rows have no rotated times)."""
    return [lambda xi=xi: f(xi) for xi in inputs] if inputs else None


for H in Hs:
    w = torch.randn(H, device=dev, dtype=torch.bfloat16)
    for T in Ts:
        if time.time() - start > args.budget_s:
            break
        x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
        # rotated input sets (from 8192 tokens): x and fresh copies of its shape, likewise xa below
        xs = [x] + [torch.randn_like(x) for _ in range(rot_sets(x.nbytes) - 1)] if T >= 8192 else None
        shape = f"T={T} h={H} bf16"
        nb = 2 * T * H * 2 + H * 2
        rec("rmsnorm", shape, "eager", lambda: eager_rms(x, w), nb, T, rotated(xs, lambda xi: eager_rms(xi, w)))
        rec("rmsnorm", shape, "compile", lambda: comp(eager_rms)(x, w), nb, T,
            rotated(xs, lambda xi: comp(eager_rms)(xi, w)))
        rec("rmsnorm", shape, "triton-row", lambda: triton_rms(x, w), nb, T, rotated(xs, lambda xi: triton_rms(xi, w)))
        if ours_lib:
            ours_row("rmsnorm", shape, lambda: ours_lib.rms(x, w), lambda: triton_rms(x, w), nb, T,
                     rotated(xs, lambda xi: ours_lib.rms(xi, w)))
        xa = torch.randn(T, 2 * H, device=dev, dtype=torch.bfloat16)
        xas = [xa] + [torch.randn_like(xa) for _ in range(rot_sets(xa.nbytes) - 1)] if T >= 8192 else None
        ashape = f"T={T} I={H}"
        nb = T * 2 * H * 2 + T * H * 2
        rec("act_silu_bf16", ashape, "eager", lambda: eager_silu(xa), nb, T, rotated(xas, eager_silu))
        rec("act_silu_bf16", ashape, "compile", lambda: comp(eager_silu)(xa), nb, T,
            rotated(xas, lambda xi: comp(eager_silu)(xi)))
        rec("act_silu_bf16", ashape, "triton-row", lambda: triton_silu(xa), nb, T, rotated(xas, triton_silu))
        if ours_lib:
            ours_row("act_silu_bf16", ashape, lambda: ours_lib.silu(xa), lambda: triton_silu(xa), nb, T,
                     rotated(xas, ours_lib.silu))
        del xas
        qshape = f"T={T} H={H}"
        nb = T * H * 2 + T * H + T * H // 128 * 4
        rec("quant_fp8_g128", qshape, "eager", lambda: eager_fp8_group(x), nb, T, rotated(xs, eager_fp8_group))
        rec("quant_fp8_g128", qshape, "compile", lambda: comp(eager_fp8_group)(x), nb, T,
            rotated(xs, lambda xi: comp(eager_fp8_group)(xi)))
        if ours_lib:
            ours_row("quant_fp8_g128", qshape, lambda: ours_lib.fp8_group(x), lambda: eager_fp8_group(x), nb, T,
                     rotated(xs, ours_lib.fp8_group))
        del xs

for qh in (32, 64):
    for T in Ts if args.tokens else [1, 16, 128, 1024, 4096, 8192, 32768] if not args.quick else [16, 4096]:
        if time.time() - start > args.budget_s:
            break
        q = torch.randn(T, qh, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(T, 4, 128, device=dev, dtype=torch.bfloat16)
        wq = torch.randn(128, device=dev, dtype=torch.bfloat16)
        wk = torch.randn(128, device=dev, dtype=torch.bfloat16)
        shape = f"T={T} {qh}+4x128 bf16"
        nb = 2 * T * (qh + 4) * 128 * 2
        rec("qknorm", shape, "eager", lambda: eager_qknorm(q, k, wq, wk), nb, T)
        rec("qknorm", shape, "compile", lambda: comp(eager_qknorm)(q, k, wq, wk), nb, T)

if args.json:
    with open(args.json, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

peer_rows = [r for r in rows if r["peer"] != "sluice"]
same = {(r["op"], r["shape"]): r for r in rows if r["peer"] == "sluice"}
if same:
    # ours through the peer FFI, timed by the same do_bench and profiler as the peers
    print("\nsame harness: ours (peer_ffi) vs the fastest peer, events and kernel time (ratio = peer / ours)")
    e_slower = k_slower = 0
    for k, o in same.items():
        cand = [r for r in peer_rows if (r["op"], r["shape"]) == k]
        if not cand:
            continue
        e = min(cand, key=lambda r: r["us"])
        ratio = e["us"] / o["us"]
        e_slower += ratio < 1
        line = f"  {k[0]:<20} {k[1]:<22} ours {o['us']:9.2f} us  {e['peer']:<11} {e['us']:9.2f} us  ratio {ratio:5.2f}"
        kc = [r for r in cand if r.get("kernel_us")]
        if o.get("kernel_us") and kc:
            kr = min(kc, key=lambda r: r["kernel_us"])
            kratio = kr["kernel_us"] / o["kernel_us"]
            k_slower += kratio < 1
            line += f" | kern {o['kernel_us']:8.2f} vs {kr['kernel_us']:8.2f} ({kr['peer']}) ratio {kratio:5.2f}"
        print(line)
    print(f"shapes where a peer is faster in the same harness: {e_slower} by events, {k_slower} by kernel time")
    # T <= 1024 in a CUDA graph (no host, no flush): ours vs the fastest peer that could be captured
    g_slower = g_n = 0
    print("\nsame harness, in a CUDA graph (T <= 1024; ratio = peer / ours)")
    for k, o in same.items():
        cand = [r for r in peer_rows if (r["op"], r["shape"]) == k and r.get("graph_us")]
        if not o.get("graph_us") or not cand:
            continue
        g = min(cand, key=lambda r: r["graph_us"])
        ratio = g["graph_us"] / o["graph_us"]
        g_slower += ratio < 1
        g_n += 1
        print(f"  {k[0]:<20} {k[1]:<22} ours {o['graph_us']:9.2f} us  {g['peer']:<11} {g['graph_us']:9.2f} us  ratio {ratio:5.2f}")
    print(f"shapes where a peer is faster in a graph: {g_slower} of {g_n}")
    # T >= 8192 with rotated inputs (issue #3's method, as `sluice bench kernels`): events and kernel time
    compare_rotated("same harness, rotated inputs (T >= 8192)", "a peer",
                    [(k, o["rot_us"], o["rot_kernel_us"], rotated_rows(peer_rows, k)) for k, o in same.items()
                     if o.get("rot_us") and o.get("rot_kernel_us")])

if args.ours:
    ours = {}
    for line in open(args.ours):
        o = json.loads(line)
        if not o.get("ceiling"):
            ours.setdefault((o["op"], o["shape"]), o)
    best = {}
    for r in peer_rows:
        k = (r["op"], r["shape"])
        if k not in best or r["us"] < best[k]["us"]:
            best[k] = r
    print("\nours vs the fastest peer (same op and shape; ratio = peer time / our time, > 1: we are faster)")
    slower = 0
    for k, r in best.items():
        o = ours.get(k)
        if not o:
            continue
        ratio = r["us"] / o["us"]
        slower += ratio < 1
        print(f"  {k[0]:<20} {k[1]:<22} ours {o['us']:9.2f} us  {r['peer']:<11} {r['us']:9.2f} us  ratio {ratio:5.2f}")
    print(f"shapes where a peer is faster: {slower}")
    # kernel to kernel (CUPTI on both sides), where both have it: the fastest peer by kernel time
    kbest = {}
    for r in peer_rows:
        k = (r["op"], r["shape"])
        if r.get("kernel_us") and (k not in kbest or r["kernel_us"] < kbest[k]["kernel_us"]):
            kbest[k] = r
    kslower = 0
    if kbest:
        print("\nkernel time (CUPTI) ours vs the fastest peer's (ratio = peer / ours)")
    for k, r in kbest.items():
        o = ours.get(k)
        if not o or not o.get("kernel_us") or o["kernel_us"] <= 0:
            continue
        ratio = r["kernel_us"] / o["kernel_us"]
        kslower += ratio < 1
        print(f"  {k[0]:<20} {k[1]:<22} ours {o['kernel_us']:9.2f} us  {r['peer']:<11} {r['kernel_us']:9.2f} us  ratio {ratio:5.2f}")
    if kbest:
        print(f"shapes where a peer's kernel is faster: {kslower}")
    # the same method on both sides: our bench's rotated rows (events per repetition, CUPTI kernel time) against
    # the peers' rotated rows of this harness
    compare_rotated("rotated inputs on both sides: our bench's rows vs the peers' rotated rows", "a rotated peer",
                    [(k, o["us"], o["kernel_us"], rotated_rows(peer_rows, k)) for k, o in ours.items()
                     if o.get("kernel_us")])
