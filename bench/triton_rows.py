"""The Triton row kernels bench/torch_peers.py times as peers (one program per row) and their
launches, shared with bench/probes/triton_rms_once.py (ncu of one of them) and
bench/probes/peer_sweep.py."""
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


@triton.jit
def silu_mul_row(x_ptr, y_ptr, I: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < I
    g = tl.load(x_ptr + row * 2 * I + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * I + offs, (g / (1 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)


def rms_warps(H):
    return 8 if H >= 4096 else 4


def triton_rms(x, w, eps):
    y = torch.empty_like(x)
    H = x.shape[-1]
    rms_row[(x.shape[0],)](x, w, y, H, triton.next_power_of_2(H), eps, num_warps=rms_warps(H))
    return y


def triton_silu(x):
    T, I2 = x.shape
    y = torch.empty((T, I2 // 2), dtype=x.dtype, device=x.device)
    silu_mul_row[(T,)](x, y, I2 // 2, triton.next_power_of_2(I2 // 2), num_warps=8)
    return y
