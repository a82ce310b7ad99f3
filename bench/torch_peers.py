#!/usr/bin/env python3
"""Peers for `sluice bench kernels` on the GPU machine: PyTorch eager, torch.compile and Triton kernels for the same
ops and shapes, timed by triton.testing.do_bench (median, L2 flushed between repetitions), and at T <= 1024 also in a
CUDA graph (bench/graph_time.py: 100 calls captured back to back, the graph replayed, no host in the time, as our
graph_us; --graph-dbc adds do_bench_cudagraph's time, which sized its graph by each candidate's host speed).
Prints a table and, given our bench JSON, the ratio of the fastest peer's time to ours (>1: we are faster).
With --ours-lib it also times our kernels in this same harness (bench/peer_ffi.c, rows "sluice"), each after a check
of its output against a peer's (a wrong result is reported with "# sluice ... differs ... not timed", never timed).
From 8192 tokens every row is also timed the way `sluice bench kernels` times ours (issue #3's method): each
call on the next of several input sets that together exceed L2 several times (rotated, no fill), events per
call enqueued back to back (median), and the kernel time of such calls by the profiler ("rotated" columns).

Ops (op and shape strings as our bench's JSON, so --ours compares them) and their peers:
  rmsnorm            "T= h= bf16"  eager F.rms_norm, compile, triton-row (bench/triton_rows.py)
  rmsnorm+residual   "T= h= bf16"  residual += x in place (bf16), then y = rmsnorm(residual) * w: eager (add_ then
                                   F.rms_norm), compile of it (in place too), triton-row (one fused pass per row)
  act_silu_bf16, act_gelu_bf16   "T= I="  act(x[:, :I]) * x[:, I:], [T, 2I] -> [T, I] bf16 (GELU: tanh form):
                                   eager, compile, triton-row
  act_silu_fp8, act_gelu_fp8     "T= I="  the same into FP8 E4M3 group-128 codes + fp32 scales (absmax / 448):
                                   eager (the bf16 activation, then eager group quantization), compile of the whole,
                                   triton-grp (fused; a few groups per program, see triton_rows.py), triton-ieee (the
                                   same, quantized by correctly rounded divisions as ours)
  quant_fp8_g128     "T= H="  E4M3 codes + fp32 scale per 128: eager, compile, triton-grp (codes by the product with
                              448 / absmax), triton-ieee (the same kernel by correctly rounded divisions, the issue's
                              rule: checked bit for bit against ours, "# ... triton-ieee vs sluice")
  quant_mxfp8_lin, quant_mxfp4_lin, quant_nvfp4_lin   "T= H="  as our bench runs them: MX with the RCEIL rule
                                   (E8M0 scale 2^ceil(log2(absmax / fmt_max))), NVFP4 (E4M3 scale per 16) with global
                                   scale 1, linear scales [T, H/block], FP4 packed two per byte (element 2i low):
                                   eager (exactly kernels/quant_formats.h's rules) and compile
  dequant_fp8_g128, dequant_nvfp4_lin   "T= H="  codes + scales -> bf16: eager and compile
  qknorm             "T= <q heads>+4x128 bf16"  eager and compile
Checks of ours: the eager MX and NVFP4 quantizers compute kernels/quant_formats.h's rules bit for bit (IEEE
divisions by device tensors: PyTorch divides by a Python number as a multiply by its reciprocal), so our codes and
scales must match theirs (>= 99.9 % of the blocks and dequantized values: quant_check); FP8 group-128 (eager divides
by 448.0 that way) and the fused activations (eager quantizes the bf16 activation, ours the fp32 one) within one
E4M3 step; the rest within 2^-6 relative. Compile may round a division otherwise (Triton's fp32 division), which
moves a code at a rounding boundary: it is timed, not checked.
  python3 bench/torch_peers.py [--ours bench-kernels.json] [--ours-lib libsluice_peer_ffi.so]
                               [--json out.json] [--tokens T,...] [--quick] [--budget-s S] [--ops PATTERN,...]"""
import argparse
import fnmatch
import json
import re
import sys
import time

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

from graph_time import graph_us  # bench/graph_time.py
from peer_ffi import (ACT_GELU, ACT_SILU, BLOCK, FP8_GROUP, LAYOUT_LINEAR, MXFP4, MXFP8, NVFP4,  # bench/peer_ffi.py
                      RULE_CEIL, RULE_IEEE, SluicePeerFFI)
from triton_rows import (triton_act_fp8, triton_fp8_group, triton_fp8_group_ieee, triton_gelu,  # bench/triton_rows.py,
                         triton_rms as triton_row_rms, triton_rms_res as triton_row_rms_res,  # next to this script
                         triton_silu)

OPS = ["rmsnorm", "rmsnorm+residual", "act_silu_bf16", "act_gelu_bf16", "act_silu_fp8", "act_gelu_fp8",
       "quant_fp8_g128", "quant_mxfp8_lin", "quant_mxfp4_lin", "quant_nvfp4_lin", "dequant_fp8_g128",
       "dequant_nvfp4_lin", "qknorm"]
ap = argparse.ArgumentParser()
ap.add_argument("--ours")
ap.add_argument("--json")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--budget-s", type=float, default=240.0)
ap.add_argument("--tokens", help="comma-separated token counts (default: all of the issue's)")
ap.add_argument("--ops", default="*", help="comma-separated op names or shell patterns (e.g. 'quant_*,act_*'; "
                "default all): " + ", ".join(OPS))
ap.add_argument("--graph-dbc", action="store_true", help="also time T <= 1024 rows by triton.testing."
                "do_bench_cudagraph (column dbc: the method before session 30)")
ap.add_argument("--ours-lib", help="libsluice_peer_ffi.so: also time our kernels in this harness (rows 'sluice'), "
                "next to the peers")
args = ap.parse_args()
patterns = [p.strip() for p in args.ops.split(",") if p.strip()]
for p in patterns:
    if not fnmatch.filter(OPS, p):
        ap.error(f"--ops: {p!r} names no op ({', '.join(OPS)})")
selected = {op for op in OPS if any(fnmatch.fnmatchcase(op, p) for p in patterns)}
start = time.time()
dev = "cuda"
EPS = 1e-6


def over_budget():
    return time.time() - start > args.budget_s


def triton_rms(x, w):
    return triton_row_rms(x, w, EPS)


def eager_rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def eager_silu(x):
    g, u = x.chunk(2, dim=-1)
    return F.silu(g) * u


def eager_gelu(x):
    g, u = x.chunk(2, dim=-1)
    return F.gelu(g, approximate="tanh") * u


def eager_rms_res(x, res, w):
    """res += x in place (bf16, our semantics: the residual stream updated); y = rmsnorm(res) * w from the stored
    sum."""
    res.add_(x)
    return F.rms_norm(res, (res.shape[-1],), w, EPS)


def triton_rms_res(x, res, w):
    return triton_row_rms_res(x, res, w, EPS)


def gelu_check(xa):
    """A check (ours_row) of GELU(tanh)-and-mul outputs against eager's: within 2^-6 relative, or 2^-20 of |g u| --
    where tanh(z) is near -1, 1 + tanhf(z) (eager's, and ours where the arch table keeps tanhf) keeps only the
    absolute accuracy of fp32 near 1 (2^-24), which is no relative accuracy of the tiny product."""
    def check(got, want):
        g, u = xa.float().chunk(2, dim=-1)
        got, want = got.float(), want.float()
        bad = ((got - want).abs() > 2 ** -6 * want.abs() + 2 ** -20 * (g * u).abs() + 1e-6).sum().item()
        return f"{bad} elements beyond 2^-6 relative, max {(got - want).abs().max().item():.3g}" if bad else None
    return check


def with_copy(f, x, res, w):
    """(y, the updated residual) of the in-place residual norm f on a copy of res: for comparing two of them."""
    r = res.clone()
    return f(x, r, w), r


ours_lib = SluicePeerFFI(args.ours_lib, EPS) if args.ours_lib else None


def close_values(got, want):
    """None when got and want (tensors, or tuples of them pairwise) agree within 2^-6 relative, else the largest
    difference."""
    for g, r in zip(got, want) if isinstance(got, tuple) else [(got, want)]:
        g, r = g.float(), r.float()
        if not torch.allclose(g, r, rtol=2 ** -6, atol=1e-6):
            return f"max {(g - r).abs().max().item():.3g}"
    return None


def ours_row(op, shape, fn, ref, nb, T, rot=None, check=close_values, probe=None):
    """Our kernel timed like the peers, after one call that JIT-compiles it and a check of its output (probe(): what
    fn returns, by default fn's own) against `ref` (a peer's output) by check(got, want) (None: they agree; else what
    differs) -- a wrong result (an ABI slip) is reported and not timed."""
    if (op, "sluice") in broken:
        return
    try:
        got = (probe or fn)()
    except Exception as ex:
        return failed(op, "sluice", shape, ex)
    try:
        want = ref()
        torch.cuda.synchronize()
        why = check(got, want)
    except Exception as ex:
        print(f"# {op} sluice: {shape}: the check against a peer failed ({type(ex).__name__}: {ex}); not timed",
              file=sys.stderr, flush=True)
        return
    if why:
        print(f"# sluice {op} {shape}: output differs from the peer's ({why}); not timed", flush=True)
        return
    rec(op, shape, "sluice", fn, nb, T, rot)


def eager_fp8_group(x):
    T, H = x.shape
    g = x.float().view(T, H // 128, 128)
    s = g.abs().amax(-1, keepdim=True) / 448.0
    q = (g / s.clamp(min=1e-12)).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.view(T, H), s.view(T, H // 128)


def eager_silu_fp8(x):
    return eager_fp8_group(eager_silu(x))


def eager_gelu_fp8(x):
    return eager_fp8_group(eager_gelu(x))


# ---- MXFP8 / MXFP4 / NVFP4 as kernels/quant_formats.h defines them, in PyTorch ----
# Divisors that must divide exactly (IEEE, as the C rules) are device tensors: PyTorch computes x / <Python number> on
# the GPU as x * (1 / number), an ulp off at times, which matters where the quotient is rounded again: absmax / 6 is
# exactly an E4M3 midpoint for some bf16 absmax (NVFP4's scale: 6.375 / 6 = 1.0625), and the MX rule's ceil(log2())
# turns on the last bit.
DIV448 = torch.tensor(448.0, device=dev)
DIV6 = torch.tensor(6.0, device=dev)
GS1 = torch.tensor(1.0, device=dev)  # NVFP4 global (encode) scale of our bench rows


def ceil_log2_clamped(s):
    """ceil(log2(s)) clamped to [-127, 127] for fp32 s >= 0 (-127 for 0), exactly from the bits (sl_qf_ceil_log2,
    sl_qf_clamp_exp): a normal s has exponent field eb and log2 in [eb - 127, eb - 126), ceil at eb - 127 only for
    a power of two; a subnormal s (< 2^-126) is -126 above 2^-127 and -127 (after the clamp) otherwise."""
    b = s.view(torch.int32)
    eb = b >> 23
    e = eb - 127 + ((b & 0x7FFFFF) != 0).to(torch.int32)
    e = torch.where(eb == 0, (s > 2.0 ** -127).to(torch.int32) - 127, e)
    return e.clamp(max=127)


def pow2_neg(e):
    """2^-e as fp32 for integers e in [-127, 126] (exact: the exponent field 127 - e)."""
    return ((127 - e).clamp(min=1) << 23).view(torch.float32)


def e8m0_values(c):
    """fp32 values of E8M0 bytes: 2^(c - 127) (c = 0: 2^-127, a subnormal), NaN for 255."""
    ci = c.to(torch.int32)
    v = (ci << 23).view(torch.float32)
    return torch.where(ci == 0, 2.0 ** -127, torch.where(ci == 255, float("nan"), v))


def e2m1_pack(v):
    """E2M1 codes of fp32 v [..., 2n] packed two per byte [..., n] (element 2i in the low nibble; bit 3 v's sign bit,
    -0 included): round to nearest even, saturate to 6 (sl_f32_to_e2m1). The grid is multiples of a step: 0.5 on
    [0, 2), 1 on [2, 4), 2 on [4, 8); with k = 0, 1, 2 on those ranges the code is round_even(|v| / step) + 2k
    (the step's ties to the even multiple are the ties to the even code; 4 multiples of a step are the next range's
    first code), clamped to 7 (6.0). Exact: |v| / step is a multiplication by a power of two. (Ours codes the -0
    inputs of an all-zero MX block +0: the same value; such blocks are not in these inputs.)"""
    a = v.abs().clamp(max=8.0)
    two, four = (a >= 2.0).to(torch.float32), (a >= 4.0).to(torch.float32)
    n = torch.round(a * (2.0 - two - 0.5 * four))  # round half to even
    mag = (n + 2.0 * (two + four)).clamp(max=7.0).to(torch.int32)
    nib = mag + 8 * torch.signbit(v).to(torch.int32)
    nib = nib.view(*nib.shape[:-1], -1, 2)
    return (nib[..., 0] + 16 * nib[..., 1]).to(torch.uint8)


def e2m1_unpack(p):
    """fp32 values [..., 2n] of packed E2M1 codes [..., n] (element 2i in the low nibble): 0, 0.5, 1, 1.5 for codes
    0..3 (code / 2), then 2, 3, 4, 6; bit 3 the sign."""
    p = p.to(torch.int32)
    nib = torch.stack((p & 15, p >> 4), dim=-1).flatten(-2)
    m = (nib & 7).to(torch.float32)
    v = torch.where(m < 4.0, 0.5 * m, torch.where(m < 6.0, m - 2.0, 2.0 * m - 8.0))
    return torch.where(nib >= 8, -v, v)


def mx_exp(g, fmt_max):
    """E8M0 exponents [..., 1] of the blocks g [..., 32] fp32 by RCEIL (sl_qf_block_exp, rule CEIL): ceil(log2(absmax /
    fmt_max)) with an IEEE division, -127 for a zero block."""
    return ceil_log2_clamped(g.abs().amax(-1, keepdim=True) / fmt_max)


def eager_mxfp8(x):
    """(E4M3 codes [T, H] float8_e4m3fn, E8M0 scales [T, H/32] uint8): code = e4m3(x * 2^-e), saturated."""
    T, H = x.shape
    g = x.float().view(T, H // 32, 32)
    e = mx_exp(g, DIV448)
    q = (g * pow2_neg(e)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(T, H), (e + 127).to(torch.uint8).view(T, H // 32)


def eager_mxfp4(x):
    """(packed E2M1 codes [T, H/2] uint8, E8M0 scales [T, H/32] uint8): code = e2m1(x * 2^-e)."""
    T, H = x.shape
    g = x.float().view(T, H // 32, 32)
    e = mx_exp(g, DIV6)
    return e2m1_pack(g * pow2_neg(e)).view(T, H // 2), (e + 127).to(torch.uint8).view(T, H // 32)


def eager_nvfp4(x, gs):
    """(packed E2M1 codes [T, H/2] uint8, E4M3 scales [T, H/16] float8_e4m3fn) with the fp32 global (encode) scale gs
    (a device tensor): sf = e4m3_satfinite(gs * (absmax / 6)), code = e2m1(x * (gs / decode(sf))), 0 where sf is 0."""
    T, H = x.shape
    g = x.float().view(T, H // 16, 16)
    sf = (gs * (g.abs().amax(-1, keepdim=True) / DIV6)).clamp(max=448.0).to(torch.float8_e4m3fn)
    sff = sf.float()
    v = torch.where(sff > 0, g * (gs / sff), 0.0)  # a zero scale: codes +0
    return e2m1_pack(v).view(T, H // 2), sf.view(T, H // 16)


def eager_dequant_fp8(q, s):
    """bf16 [T, H] of E4M3 codes q [T, H] (float8_e4m3fn) times their group's fp32 scale s [T, H/128]."""
    T, H = q.shape
    return (q.float().view(T, H // 128, 128) * s.view(T, H // 128, 1)).view(T, H).to(torch.bfloat16)


def eager_dequant_nvfp4(p, sf, gs):
    """bf16 [T, H] of packed E2M1 codes p [T, H/2], E4M3 scales sf [T, H/16] (float8_e4m3fn) and the global scale gs
    (a device tensor): e2m1 * decode(sf) / gs (sl_qf_decode)."""
    T, H = p.shape[0], 2 * p.shape[1]
    v = e2m1_unpack(p.view(T, H // 16, 8)) * sf.view(torch.float8_e4m3fn).float().view(T, H // 16, 1)
    return (v / gs).view(T, H).to(torch.bfloat16)


def decoded(fmt, q, s, gs=1.0):
    """(values fp32 [T, H], scales fp32 [T, H/block]) of codes q and linear scales s of an FFI format, whatever their
    dtypes (ours are bytes; the peers' float8 where PyTorch has the type)."""
    T = q.shape[0]
    v = e2m1_unpack(q.view(torch.uint8)) if fmt in (MXFP4, NVFP4) else q.view(torch.float8_e4m3fn).float()
    H, blk = v.shape[1], BLOCK[fmt]
    if fmt == FP8_GROUP:
        sc = s.float()
    elif fmt == NVFP4:
        sc = s.view(torch.float8_e4m3fn).float() / gs
    else:
        sc = e8m0_values(s.view(torch.uint8))
    sc = sc.view(T, H // blk)
    return (v.view(T, H // blk, blk) * sc.view(T, H // blk, 1)).view(T, H), sc


def quant_check(fmt, exact):
    """A check (ours_row) of quantized (codes, scales) against a peer's: the decoded scales within 2^-6 relative in
    >= 99.9 % of the blocks, and the dequantized values in >= 99.9 % of the elements equal (exact: the peer computes
    our rule exactly, only a tie broken otherwise could differ) or within one E4M3 step (1/8 of the larger magnitude,
    or 2^-9 of the block's scale among the subnormals: the peer's scale may differ in its last bits, which moves
    codes at rounding boundaries by one step). A slip of layout, nibble order or rule fails far more than 0.1 %."""
    def check(got, want):
        gv, gsc = decoded(fmt, *got)
        wv, wsc = decoded(fmt, *want)
        sc_ok = torch.isclose(gsc, wsc, rtol=2 ** -6, atol=0.0).float().mean().item()
        d = (gv - wv).abs()
        if exact:
            ok = d == 0
        else:
            ok = d <= 0.125 * torch.maximum(gv.abs(), wv.abs()) + 2 ** -9 * wsc.repeat_interleave(BLOCK[fmt], dim=1)
        v_ok = ok.float().mean().item()
        if sc_ok < 0.999 or v_ok < 0.999:
            return f"scales agree in {100 * sc_ok:.3f}% of blocks, values in {100 * v_ok:.3f}% of elements"
        return None
    return check


def bits_equal(got, want):
    """How much of two FP8 group quantizations' (codes, fp32 scales) agree bit for bit."""
    c = (got[0].view(torch.uint8) == want[0].view(torch.uint8)).float().mean().item()
    s = (got[1].view(torch.int32) == want[1].view(torch.int32)).float().mean().item()
    return f"codes {100 * c:.4f} % equal, scales {100 * s:.4f} % equal (bits)"


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
    """Median time per call of fn replayed in a CUDA graph of 100 calls (bench/graph_time.py; no L2 flush between
    the calls), or None where fn cannot be captured."""
    try:
        return graph_us(fn)
    except Exception as ex:
        print(f"# graph time: {type(ex).__name__}: {ex}", file=sys.stderr)
        torch.cuda.synchronize()
        return None


def dbc_us(fn):
    """do_bench_cudagraph's median time per call (--graph-dbc), or None."""
    from triton.testing import do_bench_cudagraph
    try:
        return do_bench_cudagraph(fn, rep=20, return_mode="median") * 1e3
    except Exception as ex:
        print(f"# do_bench_cudagraph: {type(ex).__name__}: {ex}", file=sys.stderr)
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


broken = set()  # (op, peer) that raised: not tried again at the later shapes (a compile error costs seconds a shape)


def failed(op, peer, shape, ex):
    """One line on stderr for a row that raised; the script goes on with the rest."""
    msg = " | ".join(line.strip() for line in str(ex).strip().splitlines()[:3])[:400]
    print(f"# {op} {peer}: {shape}: {type(ex).__name__}: {msg}", file=sys.stderr, flush=True)
    if not isinstance(ex, torch.cuda.OutOfMemoryError):  # memory is the shape's, not the peer's
        broken.add((op, peer))
    try:
        torch.cuda.synchronize()
    except Exception:
        pass


def rec(op, shape, peer, fn, nbytes, tokens, rot=None):
    """One row: fn timed by do_bench, and from 8192 tokens also its kernel time (k_us), so the
    large shapes compare kernel to kernel as well as events to events; `rot` (the same call on each
    rotated input set, from 8192 tokens) adds the rotated times (rot_times). A row that raises (a Triton or
    torch.compile error, an unsupported dtype) prints "# <op> <peer>: ..." on stderr and is left out."""
    if (op, peer) in broken:
        return
    try:
        us = t_us(fn)
        gus = g_us(fn) if tokens <= 1024 else None
        dbc = dbc_us(fn) if tokens <= 1024 and args.graph_dbc else None
    except Exception as ex:
        return failed(op, peer, shape, ex)
    kus = rus = rkus = None
    if tokens >= 8192:
        try:
            kus = k_us(fn)
            if rot:
                rus, rkus = rot_times(rot)
        except Exception as ex:  # the profiler is optional: the events time stands alone
            print(f"# kernel time of {op} {shape} {peer}: {ex}", file=sys.stderr)
    rows.append({"op": op, "shape": shape, "peer": peer, "us": us, "bytes": nbytes, "kernel_us": kus, "graph_us": gus,
                 "rot_us": rus, "rot_kernel_us": rkus, "graph_dbc_us": dbc})
    ktxt = f"{kus:10.2f} kern_us" if kus else f"{gus:10.2f} graph_us" if gus else ""
    if dbc:
        ktxt += f" {dbc:7.2f} dbc"
    if rus and rkus:
        ktxt += f" | rotated {rus:9.2f} us {rkus:9.2f} kern_us"
    print(f"{op:<20} {shape:<22} {peer:<14} {us:10.2f} us {nbytes / us / 1e3:9.1f} GB/s {ktxt}", flush=True)


def rotated(inputs, f):
    """The call f(x) on each rotated input set (None below 8192 tokens: those rows have no rotated times)."""
    return [lambda xi=xi: f(xi) for xi in inputs] if inputs else None


def rot_copies(T, first, nbytes, make):
    """The rotated input sets from 8192 tokens (None below): `first` and make() for the others, enough sets that one
    round of them (nbytes each) exceeds L2 several times (rot_sets)."""
    return [first] + [make() for _ in range(rot_sets(nbytes) - 1)] if T >= 8192 else None


def randn(*shape):
    return torch.randn(*shape, device=dev, dtype=torch.bfloat16)


# ---- op families: each makes its inputs, times its peers and ours; a family's locals (its inputs) go with it ----
def fam_rmsnorm(T, H, w):
    x = randn(T, H)
    xs = rot_copies(T, x, x.nbytes, lambda: torch.randn_like(x))
    shape, nb = f"T={T} h={H} bf16", 2 * T * H * 2 + H * 2
    rec("rmsnorm", shape, "eager", lambda: eager_rms(x, w), nb, T, rotated(xs, lambda xi: eager_rms(xi, w)))
    rec("rmsnorm", shape, "compile", lambda: comp(eager_rms)(x, w), nb, T,
        rotated(xs, lambda xi: comp(eager_rms)(xi, w)))
    rec("rmsnorm", shape, "triton-row", lambda: triton_rms(x, w), nb, T, rotated(xs, lambda xi: triton_rms(xi, w)))
    if ours_lib:
        ours_row("rmsnorm", shape, lambda: ours_lib.rms(x, w), lambda: triton_rms(x, w), nb, T,
                 rotated(xs, lambda xi: ours_lib.rms(xi, w)))


def fam_rmsnorm_residual(T, H, w):
    """Every call updates its residual in place (x added again and again: the bf16 sums stop growing once x is below
    half their ulp, so the values stay finite); the check runs ours and eager on copies of one residual."""
    op, shape, nb = "rmsnorm+residual", f"T={T} h={H} bf16", T * H * 2 * 4 + 2 * H
    x, res = randn(T, H), randn(T, H)
    pairs = rot_copies(T, (x, res), 2 * x.nbytes, lambda: (torch.randn_like(x), torch.randn_like(x)))

    def rot(f):
        return [lambda p=p: f(p[0], p[1], w) for p in pairs] if pairs else None

    rec(op, shape, "eager", lambda: eager_rms_res(x, res, w), nb, T, rot(eager_rms_res))
    rec(op, shape, "compile", lambda: comp(eager_rms_res)(x, res, w), nb, T,
        rot(lambda xi, ri, wi: comp(eager_rms_res)(xi, ri, wi)))
    rec(op, shape, "triton-row", lambda: triton_rms_res(x, res, w), nb, T, rot(triton_rms_res))
    if ours_lib:
        ours_row(op, shape, lambda: ours_lib.rms_res(x, res, w), lambda: with_copy(eager_rms_res, x, res, w), nb, T,
                 rot(ours_lib.rms_res), probe=lambda: with_copy(ours_lib.rms_res, x, res, w))


def fam_act_bf16(gelu, T, H):
    op, shape, nb = f"act_{'gelu' if gelu else 'silu'}_bf16", f"T={T} I={H}", T * 2 * H * 2 + T * H * 2
    eager, tri = (eager_gelu, triton_gelu) if gelu else (eager_silu, triton_silu)
    xa = randn(T, 2 * H)
    xas = rot_copies(T, xa, xa.nbytes, lambda: torch.randn_like(xa))
    rec(op, shape, "eager", lambda: eager(xa), nb, T, rotated(xas, eager))
    rec(op, shape, "compile", lambda: comp(eager)(xa), nb, T, rotated(xas, lambda xi: comp(eager)(xi)))
    rec(op, shape, "triton-row", lambda: tri(xa), nb, T, rotated(xas, tri))
    if ours_lib and gelu:  # against eager (fp32 GELU rounded to bf16, then the product: two roundings, < 2^-7)
        ours_row(op, shape, lambda: ours_lib.act(xa, ACT_GELU), lambda: eager(xa), nb, T,
                 rotated(xas, lambda xi: ours_lib.act(xi, ACT_GELU)), check=gelu_check(xa))
    elif ours_lib:
        ours_row(op, shape, lambda: ours_lib.silu(xa), lambda: triton_silu(xa), nb, T, rotated(xas, ours_lib.silu))


def fam_act_fp8(gelu, T, H):
    """Ours quantizes the fp32 activations, eager its bf16 output: scales within 2^-8, codes within one step."""
    op, shape = f"act_{'gelu' if gelu else 'silu'}_fp8", f"T={T} I={H}"
    nb = T * 2 * H * 2 + T * H + T * (H // 128) * 4
    eager, kind = (eager_gelu_fp8, ACT_GELU) if gelu else (eager_silu_fp8, ACT_SILU)
    xa = randn(T, 2 * H)
    xas = rot_copies(T, xa, xa.nbytes, lambda: torch.randn_like(xa))
    rec(op, shape, "eager", lambda: eager(xa), nb, T, rotated(xas, eager))
    rec(op, shape, "compile", lambda: comp(eager)(xa), nb, T, rotated(xas, lambda xi: comp(eager)(xi)))
    rec(op, shape, "triton-grp", lambda: triton_act_fp8(xa, gelu), nb, T,
        rotated(xas, lambda xi: triton_act_fp8(xi, gelu)))
    # the same kernel quantizing by correctly rounded divisions, as ours (its activation differs in the last bits)
    rec(op, shape, "triton-ieee", lambda: triton_act_fp8(xa, gelu, True), nb, T,
        rotated(xas, lambda xi: triton_act_fp8(xi, gelu, True)))
    if ours_lib:
        ours_row(op, shape, lambda: ours_lib.act_fp8(xa, kind), lambda: eager(xa), nb, T,
                 rotated(xas, lambda xi: ours_lib.act_fp8(xi, kind)), check=quant_check(FP8_GROUP, exact=False))


QUANT_EAGER = {FP8_GROUP: eager_fp8_group, MXFP8: eager_mxfp8, MXFP4: eager_mxfp4,
               NVFP4: lambda x: eager_nvfp4(x, GS1)}
QUANT_OP = {FP8_GROUP: "quant_fp8_g128", MXFP8: "quant_mxfp8_lin", MXFP4: "quant_mxfp4_lin", NVFP4: "quant_nvfp4_lin"}


def comp_nvfp4(x):
    return comp(eager_nvfp4)(x, GS1)


def fam_quant(fmt, T, H):
    """Our bench's rows: FP8 group-128 by the IEEE rule; MX by RCEIL; NVFP4 with global scale 1; linear scales."""
    op, shape = QUANT_OP[fmt], f"T={T} H={H}"
    codes = T * H // 2 if fmt in (MXFP4, NVFP4) else T * H
    nb = T * H * 2 + codes + T * (H // BLOCK[fmt]) * (4 if fmt == FP8_GROUP else 1)
    eager = QUANT_EAGER[fmt]
    compiled = comp_nvfp4 if fmt == NVFP4 else lambda xi: comp(eager)(xi)
    x = randn(T, H)
    xs = rot_copies(T, x, x.nbytes, lambda: torch.randn_like(x))
    rec(op, shape, "eager", lambda: eager(x), nb, T, rotated(xs, eager))
    rec(op, shape, "compile", lambda: compiled(x), nb, T, rotated(xs, compiled))
    if fmt == FP8_GROUP:
        rec(op, shape, "triton-grp", lambda: triton_fp8_group(x), nb, T, rotated(xs, triton_fp8_group))
        rec(op, shape, "triton-ieee", lambda: triton_fp8_group_ieee(x), nb, T, rotated(xs, triton_fp8_group_ieee))
    if ours_lib:
        rule = RULE_IEEE if fmt == FP8_GROUP else RULE_CEIL  # FP8 group: absmax / 448

        def ours(xi):
            return ours_lib.quant(xi, fmt, rule, LAYOUT_LINEAR, 1.0)

        if fmt == FP8_GROUP:  # the IEEE Triton kernel computes our rule: the same bits
            try:
                print(f"# {op} {shape}: triton-ieee vs sluice {bits_equal(ours(x), triton_fp8_group_ieee(x))}",
                      flush=True)
            except Exception as ex:
                print(f"# {op} {shape}: triton-ieee vs sluice not compared ({type(ex).__name__}: {ex})", flush=True)

        ours_row(op, shape, lambda: ours(x), lambda: eager(x), nb, T, rotated(xs, ours),
                 check=quant_check(fmt, exact=fmt != FP8_GROUP))


def fam_dequant(fmt, T, H):
    """Inputs: codes and scales of random data by the eager quantizer, one set per rotated input."""
    nv = fmt == NVFP4
    op, shape = "dequant_nvfp4_lin" if nv else "dequant_fp8_g128", f"T={T} H={H}"
    nb = (T * H // 2 + T * (H // 16) if nv else T * H + T * (H // 128) * 4) + T * H * 2

    def make():
        return eager_nvfp4(randn(T, H), GS1) if nv else eager_fp8_group(randn(T, H))

    qs = make()
    sets = rot_copies(T, qs, qs[0].nbytes + qs[1].nbytes, make)
    if nv:
        def eager(p):
            return eager_dequant_nvfp4(p[0], p[1], GS1)

        def compiled(p):
            return comp(eager_dequant_nvfp4)(p[0], p[1], GS1)
    else:
        def eager(p):
            return eager_dequant_fp8(p[0], p[1])

        def compiled(p):
            return comp(eager_dequant_fp8)(p[0], p[1])

    def ours(p):
        return ours_lib.dequant(p[0], p[1], NVFP4 if nv else FP8_GROUP, LAYOUT_LINEAR, 1.0)

    rec(op, shape, "eager", lambda: eager(qs), nb, T, rotated(sets, eager))
    rec(op, shape, "compile", lambda: compiled(qs), nb, T, rotated(sets, compiled))
    if ours_lib:
        ours_row(op, shape, lambda: ours(qs), lambda: eager(qs), nb, T, rotated(sets, ours))


FAMILIES = [  # (op, run(T, H, w)), in the order they run at each shape
    ("rmsnorm", fam_rmsnorm),
    ("rmsnorm+residual", fam_rmsnorm_residual),
    ("act_silu_bf16", lambda T, H, w: fam_act_bf16(False, T, H)),
    ("act_gelu_bf16", lambda T, H, w: fam_act_bf16(True, T, H)),
    ("act_silu_fp8", lambda T, H, w: fam_act_fp8(False, T, H)),
    ("act_gelu_fp8", lambda T, H, w: fam_act_fp8(True, T, H)),
    ("quant_fp8_g128", lambda T, H, w: fam_quant(FP8_GROUP, T, H)),
    ("quant_mxfp8_lin", lambda T, H, w: fam_quant(MXFP8, T, H)),
    ("quant_mxfp4_lin", lambda T, H, w: fam_quant(MXFP4, T, H)),
    ("quant_nvfp4_lin", lambda T, H, w: fam_quant(NVFP4, T, H)),
    ("dequant_fp8_g128", lambda T, H, w: fam_dequant(FP8_GROUP, T, H)),
    ("dequant_nvfp4_lin", lambda T, H, w: fam_dequant(NVFP4, T, H)),
]
assert [op for op, _ in FAMILIES] + ["qknorm"] == OPS


def run_family(op, run, T, H, w):
    try:
        run(T, H, w)
    except Exception as ex:  # the inputs (a row's own errors are rec's)
        print(f"# {op} inputs: T={T} H={H}: {type(ex).__name__}: {ex}", file=sys.stderr, flush=True)
        try:
            torch.cuda.synchronize()
        except Exception:
            pass


for H in Hs:
    w = torch.randn(H, device=dev, dtype=torch.bfloat16)
    for T in Ts:
        if over_budget():
            break
        for op, run in FAMILIES:
            if op in selected and not over_budget():
                run_family(op, run, T, H, w)

for qh in (32, 64) if "qknorm" in selected else ():
    for T in Ts if args.tokens else [1, 16, 128, 1024, 4096, 8192, 32768] if not args.quick else [16, 4096]:
        if over_budget():
            break
        try:
            q = torch.randn(T, qh, 128, device=dev, dtype=torch.bfloat16)
            k = torch.randn(T, 4, 128, device=dev, dtype=torch.bfloat16)
            wq = torch.randn(128, device=dev, dtype=torch.bfloat16)
            wk = torch.randn(128, device=dev, dtype=torch.bfloat16)
        except Exception as ex:
            print(f"# qknorm inputs: T={T}: {type(ex).__name__}: {ex}", file=sys.stderr, flush=True)
            continue
        shape = f"T={T} {qh}+4x128 bf16"
        nb = 2 * T * (qh + 4) * 128 * 2
        rec("qknorm", shape, "eager", lambda: eager_qknorm(q, k, wq, wk), nb, T)
        rec("qknorm", shape, "compile", lambda: comp(eager_qknorm)(q, k, wq, wk), nb, T)
        del q, k

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
        print(f"  {k[0]:<20} {k[1]:<22} ours {o['graph_us']:9.2f} us  {g['peer']:<11} {g['graph_us']:9.2f} us"
              f"  ratio {ratio:5.2f}")
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
        print(f"  {k[0]:<20} {k[1]:<22} ours {o['kernel_us']:9.2f} us  {r['peer']:<11} {r['kernel_us']:9.2f} us"
              f"  ratio {ratio:5.2f}")
    if kbest:
        print(f"shapes where a peer's kernel is faster: {kslower}")
    # the same method on both sides: our bench's rotated rows (events per repetition, CUPTI kernel time) against
    # the peers' rotated rows of this harness
    compare_rotated("rotated inputs on both sides: our bench's rows vs the peers' rotated rows", "a rotated peer",
                    [(k, o["us"], o["kernel_us"], rotated_rows(peer_rows, k)) for k, o in ours.items()
                     if o.get("kernel_us")])
