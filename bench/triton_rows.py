"""The Triton kernels bench/torch_peers.py times as peers and their launches: row kernels (one program per row:
RMSNorm plain and fused with the residual add, SiLU- and GELU(tanh)-and-mul) and FP8 group-128 kernels (a few
128-element groups per program: quantization, and SiLU/GELU-and-mul fused with it). Shared with
bench/probes/triton_rms_once.py (ncu of one of them) and bench/probes/peer_sweep.py."""
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


@triton.jit
def rms_res_row(x_ptr, r_ptr, w_ptr, y_ptr, H: tl.constexpr, BLOCK: tl.constexpr, eps):
    """residual = x + residual, stored in bf16; y = rmsnorm(residual) * w from the stored (rounded) sum, as ours."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(x_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32)
    s = (x + r).to(tl.bfloat16)
    tl.store(r_ptr + row * H + offs, s, mask=m)
    v = s.to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(v * v, axis=0) / H + eps)
    tl.store(y_ptr + row * H + offs, (v * inv * w).to(tl.bfloat16), mask=m)


@triton.jit
def gelu_tanh(g):
    """GELU(tanh) as g * sigmoid(2z) = g / (1 + e^-2z), z = sqrt(2/pi) (g + 0.044715 g^3): the same function as
    0.5 g (1 + tanh z), without its cancellation where tanh z is near -1 (and no tanh, which Triton's core
    language lacks; kernels/act.cu computes it the same way)."""
    z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
    return g / (1 + tl.exp(-2.0 * z))


@triton.jit
def gelu_mul_row(x_ptr, y_ptr, I: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < I
    g = tl.load(x_ptr + row * 2 * I + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * I + offs, (gelu_tanh(g) * u).to(tl.bfloat16), mask=m)


# FP8 group-128 kernels: one program per GPP consecutive groups of the flattened [T, H/128] group grid (a group is
# 128 consecutive elements of a row, so group i of the grid is row i // G, column block i % G). Not one program per
# row: a row has only H/128 = 16..56 groups, so at decode (T = 1..16) per-row programs would run on 1..16 of the
# H200's 132 SMs, each walking its groups in turn; one group per program (GPP = 1, one warp: vLLM's and SGLang's
# launch) spreads even T = 1 over 16..56 SMs. From a few thousand groups on the GPU is full either way, and 8 groups
# per program (1024 elements over 4 warps: 8 per thread, one 16-byte bf16 load each) cut the programs (block
# launches) 8x. The scale is absmax / 448 (0 for a zero group); codes are the products with 448 / absmax (not a
# division per element, as vLLM's and SGLang's kernels do: a code may differ from an IEEE quotient's at a rounding
# boundary), saturated to +-448 and rounded to E4M3 by the conversion.
FP8_GROUPS_SMALL = 4096


def fp8_groups_launch(n_groups):
    """(programs, groups per program, warps) of a group-128 kernel over n_groups groups (see above)."""
    gpp, warps = (1, 1) if n_groups < FP8_GROUPS_SMALL else (8, 4)
    return triton.cdiv(n_groups, gpp), gpp, warps


@triton.jit
def fp8_store_groups(y, gi, gm, q_ptr, s_ptr, IEEE: tl.constexpr = False):
    """Quantize y [GPP, 128] fp32 (groups gi, valid where gm) into E4M3 codes q[gi * 128 + j] and scales s[gi].
    IEEE: the issue's rule instead -- scale = absmax / 448 and each code y / scale by correctly rounded divisions
    (tl.div_rn), our kernels' bits -- a peer of the same op rather than of the multiply by 448 / absmax."""
    amax = tl.max(tl.abs(y), axis=1)
    if IEEE:
        s = tl.div_rn(amax, tl.full(amax.shape, 448.0, tl.float32))
        sd = tl.where(s > 0, s, 1.0)
        q = tl.where(s[:, None] > 0, tl.div_rn(y, sd[:, None]), 0.0)
        q = tl.clamp(q, -448.0, 448.0).to(tl.float8e4nv)
    else:
        inv = tl.where(amax > 0, 448.0 / amax, 0.0)
        q = tl.clamp(y * inv[:, None], -448.0, 448.0).to(tl.float8e4nv)
        s = amax / 448.0
    offs = gi[:, None] * 128 + tl.arange(0, 128)[None, :]
    tl.store(q_ptr + offs, q, mask=gm[:, None])
    tl.store(s_ptr + gi, s, mask=gm)


@triton.jit
def fp8_group_quant(x_ptr, q_ptr, s_ptr, n_groups, GPP: tl.constexpr, IEEE: tl.constexpr = False):
    gi = tl.program_id(0) * GPP + tl.arange(0, GPP)
    gm = gi < n_groups
    offs = gi[:, None] * 128 + tl.arange(0, 128)[None, :]
    x = tl.load(x_ptr + offs, mask=gm[:, None], other=0.0).to(tl.float32)
    fp8_store_groups(x, gi, gm, q_ptr, s_ptr, IEEE)


@triton.jit
def act_fp8_groups(x_ptr, q_ptr, s_ptr, n_groups, G, GPP: tl.constexpr, GELU: tl.constexpr,
                   IEEE: tl.constexpr = False):
    """act(x[t, :I]) * x[t, I:] (I = 128 G; SiLU, or GELU(tanh) when GELU) in fp32, quantized per group of 128. G is
    not a compile-time constant (one compile for every I: an integer division more per group is no cost here)."""
    gi = tl.program_id(0) * GPP + tl.arange(0, GPP)
    gm = gi < n_groups
    base = (gi // G) * (2 * G * 128) + (gi % G) * 128
    offs = base[:, None] + tl.arange(0, 128)[None, :]
    g = tl.load(x_ptr + offs, mask=gm[:, None], other=0.0).to(tl.float32)
    u = tl.load(x_ptr + offs + G * 128, mask=gm[:, None], other=0.0).to(tl.float32)
    if GELU:
        a = gelu_tanh(g)
    else:
        a = g / (1 + tl.exp(-g))
    fp8_store_groups(a * u, gi, gm, q_ptr, s_ptr, IEEE)


def rms_warps(H):
    return 8 if H >= 4096 else 4


def triton_rms(x, w, eps):
    y = torch.empty_like(x)
    H = x.shape[-1]
    rms_row[(x.shape[0],)](x, w, y, H, triton.next_power_of_2(H), eps, num_warps=rms_warps(H))
    return y


def act_row_launch(kernel, x):
    """One program per row of a gated activation's row kernel over x [T, 2I] -> [T, I]."""
    T, I2 = x.shape
    y = torch.empty((T, I2 // 2), dtype=x.dtype, device=x.device)
    kernel[(T,)](x, y, I2 // 2, triton.next_power_of_2(I2 // 2), num_warps=8)
    return y


def triton_silu(x):
    return act_row_launch(silu_mul_row, x)


def triton_rms_res(x, res, w, eps):
    """res = x + res (in place), returns y = rmsnorm(res) * w."""
    y = torch.empty_like(x)
    H = x.shape[-1]
    rms_res_row[(x.shape[0],)](x, res, w, y, H, triton.next_power_of_2(H), eps, num_warps=rms_warps(H))
    return y


def triton_gelu(x):
    return act_row_launch(gelu_mul_row, x)


def triton_fp8_group(x, ieee=False):
    """(codes [T, H] float8_e4m3fn, scales [T, H/128] fp32) of x [T, H] (H a multiple of 128); ieee: by correctly
    rounded divisions (fp8_store_groups)."""
    T, H = x.shape
    q = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((T, H // 128), dtype=torch.float32, device=x.device)
    n = T * (H // 128)
    programs, gpp, warps = fp8_groups_launch(n)
    fp8_group_quant[(programs,)](x, q, s, n, gpp, ieee, num_warps=warps)
    return q, s


def triton_fp8_group_ieee(x):
    return triton_fp8_group(x, ieee=True)


def triton_act_fp8(x, gelu=False, ieee=False):
    """SiLU- (or GELU(tanh)-) and-mul of x [T, 2I] fused with FP8 group-128 quantization: (codes [T, I]
    float8_e4m3fn, scales [T, I/128] fp32); ieee: quantized by correctly rounded divisions (fp8_store_groups)."""
    T, I = x.shape[0], x.shape[1] // 2
    q = torch.empty((T, I), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((T, I // 128), dtype=torch.float32, device=x.device)
    n = T * (I // 128)
    programs, gpp, warps = fp8_groups_launch(n)
    act_fp8_groups[(programs,)](x, q, s, n, I // 128, gpp, gelu, ieee, num_warps=warps)
    return q, s
