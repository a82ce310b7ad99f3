// Gated activation kernels: out = act(gate) * up over [T, 2*INTER] rows, optionally fused with
// FP8 E4M3 per-token-group (128) quantization; host side and CPU reference in kernels/act.c.
#include "kernels/moe_pdl.cuh"
#include "kernels/quant_dev.cuh"

#ifndef ACT
#error "ACT (0 = SiLU-and-mul, 1 = GELU(tanh)-and-mul) must be defined by the JIT"
#endif
#ifndef INTER
#error "INTER (output columns; input rows hold 2*INTER) must be defined by the JIT"
#endif
#ifndef IN_DTYPE
#error "IN_DTYPE (SL_DTYPE_F32/BF16/F16) must be defined by the JIT"
#endif
#ifndef OUT_DTYPE
#error "OUT_DTYPE (SL_DTYPE_F32/BF16/F16, or SL_DTYPE_FP8_E4M3 for the fused quantization) must be defined"
#endif
#ifndef QRULE
#error "QRULE (SL_QRULE_IEEE or SL_QRULE_CEIL: scale rule of the FP8 output) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef UNROLL
#error "UNROLL (work items in flight per warp) must be defined by the JIT"
#endif
#ifndef SEG
#error "SEG (0: grid-stride warp items; N > 0: a warp walks N chunks of one row) must be defined by the JIT"
#endif
#ifndef ONEITEM
#error "ONEITEM (1: one block of one warp per item, no loop -- decode; 0: grid-stride) must be defined by the JIT"
#endif
#if ONEITEM && (WARPS != 1 || UNROLL != 1 || SEG != 0)
#error "ONEITEM: one warp per block, unroll 1, the item layout"
#endif
#ifndef PACK
#error "PACK (bytes of gate and of up per lane: 16, or 8 / 4 in the one-item kernel, 16-bit dtypes) must be defined"
#endif
#if PACK != 16 && (!ONEITEM || !(PACK == 8 || PACK == 4) || OUT_DTYPE == 0 || OUT_DTYPE == 3 || IN_DTYPE == 0)
#error "PACK 8 / 4: the one-item kernel from and into 16-bit dtypes only"
#endif

#define FP8_OUT (OUT_DTYPE == 3) // a preprocessor test: the enum isn't visible to #if
static_assert(SL_DTYPE_FP8_E4M3 == 3, "FP8_OUT compares with the value of SL_DTYPE_FP8_E4M3");
static constexpr int VEC = sl_kq_elem<IN_DTYPE>::vec; // 16 bytes of gate and 16 of up per lane
static constexpr int CHUNK = 32 * VEC;
static constexpr int CHUNKS = (INTER + CHUNK - 1) / CHUNK;
static constexpr int GROUP = 128;
static_assert(INTER % VEC == 0, "INTER must be a multiple of the 16-byte packet");
#if FP8_OUT
static constexpr int LANES = GROUP / VEC; // lanes sharing one FP8 scale group: 16 or 32
static_assert(INTER % GROUP == 0, "FP8 output needs INTER a multiple of 128");
#endif

// Accurate expf/tanhf (not the __expf intrinsics; SiLU into 16-bit outputs excepted, below): the
// result is compared with the CPU reference within 1-2 ulp of the output dtype (fp32 outputs: 10
// fp32 ulp). SiLU's division
// g / (1 + e^-g) is a reciprocal and a multiply. For g < 0 the denominator (up to 2^128) is
// scaled by s = 2^-64 inside its one rounding (exact), so rcp.approx (<= 1 ulp) stays normal
// for every finite d (d = Inf gives -0 like the division), and the product is scaled back
// exactly (one more rounding only where the result itself is below 2^-126); for g >= 0, d is
// in [1, 2] and s = 1,
// so g * r cannot overflow (g up to FLT_MAX). About 3 ulp from the division instead of an IEEE
// division's ~10 instructions and range check per element; Inf and NaN as the division.
// SiLU into a 16-bit output: e^-g by one ex2.approx.ftz of -g * log2(e) instead of expf's range
// reduction (5 dependent FFMA/FADD before its MUFU.EX2 and a multiply after): ~4 instructions
// and ~20 cycles less per element, which is the latency of a decode row (T = 1: 8 warps, one
// item each). Error: the product's rounding puts <= |g| * 2^-24 relative on e^-g, ex2.approx
// ~2^-22 -- at most ~2^-17 on the output for |g| <= 64 (beyond, e^-g is 0, or the division
// ends in -0 as before), far below a bf16 (2^-8) or f16 (2^-11) ulp. fp32 outputs keep expf (their
// tolerance is 10 fp32 ulp); FP8 outputs take it where the arch table says (below).
// Limits as expf: g = -Inf gives Inf -> -Inf * 0 = NaN (the division's -Inf / Inf), +Inf gives
// 0 -> Inf, subnormal results of ex2 flush to 0 where expf's are below 2^-126 anyway (d = 1).
// Only within ~1e-5 of g = -88.72, where one of e^-g and expf(-g) overflows and the other does
// not, may the output be -0 against the reference's ~ -2.6e-37.
// FASTEXP (JIT constant) says where it applies (kernels/act.c act_fast_exp): SiLU into bf16/f16,
// and into FP8 where the arch table's act8_fast_exp says so (kernels/kq_launch.h). Into FP8 the
// ~2^-17 relative on an activation moves a group's scale by as much and a code only where the
// quotient sits within that of an E4M3 rounding boundary (the E4M3 step is 2^-3 relative).
#ifndef FASTEXP
#error "FASTEXP (1: SiLU's e^-g / GELU's e^-2z by ex2.approx, 0: expf / tanhf) must be defined by the JIT"
#endif
// GELU(tanh) with FASTEXP: 0.5 g (1 + tanh(z)) = g / (1 + e^(-2z)) exactly (1 + tanh(z) = 2 / (1 +
// e^(-2z))), z = k0 (g + k1 g^3) (k0 = sqrt(2 / pi), k1 = 0.044715), so it is SiLU's quotient with e^(-2z) for e^-g: one ex2.approx of
// -2z * log2(e) and the same scaled reciprocal (z has g's sign: 1 + k1 g^2 > 0, so s = 2^-64 exactly
// where e^(-2z) can exceed 2^64). Error: z carries ~3 fp32 roundings (2^-22 relative), the product
// with log2(e) one more, so e^(-2z) is within ~|2z| * 2^-22 relative -- for |2z| <= 88 (past it the
// result is g, or -0 as tanhf's 1 + -1 gives) ~2^-15.5, still far below a bf16 (2^-8) or f16 (2^-11)
// ulp; and it has no cancellation where tanh(z) is near -1 (tanhf's 1 + tanh loses every bit there:
// the reference's own error at g = -5 is ~30 %, which the tests' tolerance carries). Limits as
// tanhf's: +Inf gives Inf, -Inf NaN (-Inf * 0 either way), finite g whose g^3 overflows g or -0; NaN
// stays NaN.
// kernels/act.c act_fast_exp says where it applies (the arch table's gelu_fast_exp, 16-bit and FP8
// outputs; fp32 outputs keep tanhf).
#define FAST_EXP (FASTEXP != 0)

__device__ __forceinline__ float act_fn(float g) {
#if ACT == 0
  const float s = g < 0.0f ? 0x1p-64f : 1.0f;
#if FAST_EXP
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(g * -1.44269504088896341f));
#else
  const float e = expf(-g);
#endif
  const float d = fmaf(e, s, s);
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return __fmul_rn(__fmul_rn(g, r), s);
#else
#if FAST_EXP
  // -2 log2(e) z = g (c0 + c1 g^2): c0 = -2 log2(e) k0, c1 = c0 k1 folded (each within 2^-24 of its
  // product): two multiplies and an FMA per element instead of four and an FMA
  constexpr float c0 = -0x1.26aec2p+1f, c1 = -0x1.a5a7d0p-4f; // -2.3022082, -0.10294324
  const float s = g < 0.0f ? 0x1p-64f : 1.0f;
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(g * fmaf(c1, g * g, c0)));
  const float d = fmaf(e, s, s);
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return __fmul_rn(__fmul_rn(g, r), s);
#else
  const float k0 = 0.7978845608028654f, k1 = 0.044715f; // sqrt(2 / pi), and GELU's cubic coefficient
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
#endif
#endif
}

// Blocks per SM for __launch_bounds__ (as kernels/quant.cu): prefill at 2048 threads per SM
// (32 registers) unless the FP8 output's division slow paths need 40; decode unbounded.
#ifndef MIN_BLOCKS
#define MIN_BLOCKS (WARPS == 1 ? 1 : 2048 / (WARPS * 32) * (FP8_OUT ? 3 : 4) / 4)
#endif
static constexpr bool RAGGED = INTER % CHUNK != 0;

// Segment layout (SEG > 0, as kernels/quant.cu): a warp task is SEGC consecutive chunks of one
// row (the row's last segment may be shorter), walked UNROLL chunks at a time with running
// pointers advanced by compile-time steps.
static constexpr int SEGC = SEG <= 0 ? 1 : SEG < CHUNKS ? SEG : CHUNKS;
static constexpr int NSEG = (CHUNKS + SEGC - 1) / SEGC;
static constexpr int OB = FP8_OUT ? 1 : sl_kq_elem<(FP8_OUT ? SL_DTYPE_F32 : OUT_DTYPE)>::bytes; // output bytes per element

// One lane's packet: act(gate) * up, stored at dst (FP8: codes, and the group scale at *sc on
// the group's first lane). All 32 lanes call this together (the FP8 group reduction).
__device__ __forceinline__ void act_packet(uint4 graw, uint4 uraw, bool live, int lane, char *dst, float *sc) {
  float y[VEC], up[VEC];
  sl_kq_unpack<IN_DTYPE>(graw, y);
  sl_kq_unpack<IN_DTYPE>(uraw, up);
#pragma unroll
  for (int j = 0; j < VEC; j++)
    y[j] = act_fn(y[j]) * up[j];
#if FP8_OUT
  float absmax;
  int bad;
  sl_kq_block_absmax<VEC, LANES>(y, absmax, bad); // all lanes take part, tail lanes hold zeros
  if (RAGGED && !live) return;
  unsigned char scale_u8;
  float scale_f32;
  const unsigned long long w =
      sl_kq_quantize_fast<SL_QFMT_FP8_GROUP, QRULE, VEC>(y, absmax, bad, 0.0f, scale_f32, scale_u8);
  sl_kq_store_packed<VEC, false>((unsigned char *)dst, w);
  if (lane % LANES == 0) *sc = scale_f32;
#else
  if (RAGGED && !live) return;
  sl_kq_store<OUT_DTYPE, VEC>(dst, y);
#endif
}

// One warp item = CHUNK output columns of one row (gate and up: 16 bytes each per lane). A warp
// loads UNROLL items (raw packets: 8 registers each) before computing any.
// SEG == 0: grid-stride items with 32-bit indices (host: rows * CHUNKS < 2^31), each computing
// its addresses; SEG > 0: grid-stride warp tasks (row, segment) with running pointers.
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
    sl_act_kernel(const void *__restrict__ in, long in_stride, void *__restrict__ out, long out_stride,
                  float *__restrict__ out_scales, int num_tokens) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & 31;
  const unsigned warp = blockIdx.x * WARPS + threadIdx.x / 32, nwarps = gridDim.x * WARPS;
  constexpr int ib = sl_kq_elem<IN_DTYPE>::bytes;
  if constexpr (SEG > 0) {
    constexpr bool whole = CHUNKS % SEGC == 0 && SEGC % UNROLL == 0; // every step is full
    const unsigned tasks = (unsigned)num_tokens * NSEG;
    for (unsigned t = warp; t < tasks; t += nwarps) {
      const unsigned row = t / NSEG, c0 = (t - row * NSEG) * SEGC;
      const unsigned nc = CHUNKS % SEGC == 0 ? SEGC : min((unsigned)SEGC, CHUNKS - c0);
      unsigned col = c0 * CHUNK + lane * VEC;
      const char *ip = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ib;
      char *op = (char *)out + ((size_t)row * (size_t)out_stride + col) * OB;
      float *sp = out_scales + (size_t)row * (INTER / GROUP) + col / GROUP; // FP8 only (unused otherwise)
      for (unsigned c = 0; c < nc; c += UNROLL) {
        uint4 graw[UNROLL], uraw[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          graw[u] = uraw[u] = make_uint4(0u, 0u, 0u, 0u);
          if ((whole || c + u < nc) && (!RAGGED || col + u * CHUNK < INTER)) {
            graw[u] = sl_kq_load_raw(ip + u * CHUNK * ib);
            uraw[u] = sl_kq_load_raw(ip + u * CHUNK * ib + (long)INTER * ib);
          }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          if (!(whole || c + u < nc)) break; // warp-uniform
          act_packet(graw[u], uraw[u], !RAGGED || col + u * CHUNK < INTER, lane, op + u * CHUNK * OB,
                     sp + u * (CHUNK / GROUP));
        }
        ip += UNROLL * CHUNK * ib;
        op += UNROLL * CHUNK * OB;
        sp += UNROLL * (CHUNK / GROUP);
        col += UNROLL * CHUNK;
      }
    }
    return;
  }
  // One item, one block (ONEITEM; decode: the host launches exactly num_tokens * CHUNKS blocks
  // of one warp): the item is blockIdx.x, its loads go out after four instructions of index
  // math, nothing else -- no loop, no bound (as RMSNorm's one-row kernel, which gained 0.13 us
  // per launch at decode over its strided loop: kernels/NOTES.md, session 12).
  // PACK < 16 (16-bit in and out): a lane takes PACK bytes of gate and of up (4 or 2 elements,
  // not 8), so the host launches 2 or 4 times the blocks. A decode item is latency-bound, and a
  // warp's activation is two MUFU instructions (ex2, rcp) per element, 8 cycles each on its
  // SM sub-partition: 8 elements per lane are ~128 cycles of one warp's MUFU issue where
  // torch.compile's kernel (one element per thread, four warps per block) spends ~16 per warp on
  // four sub-partitions (session 31 call 2: SASS and ncu at T=1 I=4096).
  if constexpr (ONEITEM && PACK < 16) {
    constexpr int PV = PACK / 2, PCHUNK = 32 * PV, PCHUNKS = (INTER + PCHUNK - 1) / PCHUNK;
    const unsigned row = blockIdx.x / PCHUNKS;
    const unsigned col = (blockIdx.x - row * PCHUNKS) * PCHUNK + lane * PV;
    if (INTER % PCHUNK != 0 && col >= INTER) return; // no group reduction on this path
    const char *p = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ib;
    uint4 g = make_uint4(0u, 0u, 0u, 0u), u = g;
    if constexpr (PACK == 8) {
      const uint2 a = __ldg(reinterpret_cast<const uint2 *>(p));
      const uint2 b = __ldg(reinterpret_cast<const uint2 *>(p + (long)INTER * ib));
      g.x = a.x, g.y = a.y, u.x = b.x, u.y = b.y;
    } else {
      g.x = __ldg(reinterpret_cast<const unsigned *>(p));
      u.x = __ldg(reinterpret_cast<const unsigned *>(p + (long)INTER * ib));
    }
    float y[8], up[8]; // the first PV are the lane's
    sl_kq_unpack<IN_DTYPE>(g, y);
    sl_kq_unpack<IN_DTYPE>(u, up);
#pragma unroll
    for (int j = 0; j < PV; j++)
      y[j] = act_fn(y[j]) * up[j];
    sl_kq_store<OUT_DTYPE, PV>((char *)out + ((size_t)row * (size_t)out_stride + col) * OB, y);
    return;
  } else if constexpr (ONEITEM) {
    const unsigned row = blockIdx.x / CHUNKS;
    const unsigned col = (blockIdx.x - row * CHUNKS) * CHUNK + lane * VEC;
    const bool live = !RAGGED || col < INTER;
    uint4 g = make_uint4(0u, 0u, 0u, 0u), u = g;
    if (live) {
      const char *p = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ib;
      g = sl_kq_load_raw(p);
      u = sl_kq_load_raw(p + (long)INTER * ib);
    }
    act_packet(g, u, live, lane, (char *)out + ((size_t)row * (size_t)out_stride + col) * OB,
               out_scales + (size_t)row * (INTER / GROUP) + col / GROUP);
    return;
  }
  const unsigned items = (unsigned)num_tokens * CHUNKS;
  for (unsigned base = warp; base < items; base += nwarps * UNROLL) {
    uint4 graw[UNROLL], uraw[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const unsigned it = base + u * nwarps;
      const unsigned row = it / CHUNKS;
      const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
      graw[u] = uraw[u] = make_uint4(0u, 0u, 0u, 0u);
      if (it < items && (!RAGGED || col < INTER)) {
        const char *p = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ib;
        graw[u] = sl_kq_load_raw(p);
        uraw[u] = sl_kq_load_raw(p + (long)INTER * ib);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const unsigned it = base + u * nwarps;
      if (it >= items) break; // warp-uniform
      const unsigned row = it / CHUNKS;
      const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
      act_packet(graw[u], uraw[u], !RAGGED || col < INTER, lane, (char *)out + ((size_t)row * (size_t)out_stride + col) * OB,
                 out_scales + (size_t)row * (INTER / GROUP) + col / GROUP);
    }
  }
}
