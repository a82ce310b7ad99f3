"""The Triton row kernels bench/torch_peers.py times as peers (one program per row), shared with
bench/probes/triton_rms_once.py (ncu of one of them)."""
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


@triton.jit
def silu_mul_row(x_ptr, y_ptr, I: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < I
    g = tl.load(x_ptr + row * 2 * I + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * I + offs, (g / (1 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)
