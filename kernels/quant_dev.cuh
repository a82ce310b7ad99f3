// Device helpers of the quantization family (quant.cu, act.cu): 16-byte packet loads and
// stores of bf16/fp16/fp32 as fp32, packed code stores, and the sub-warp block reduction.
#ifndef SL_QUANT_DEV_CUH
#define SL_QUANT_DEV_CUH

#include "kernels/quant_formats.h"
#include "kernels/sl_dtype.h"

// RN(1 / s) for s in [2^-125, 2^125): __frcp_rn's own fast path -- the approximate reciprocal
// (MUFU.RCP) and one Newton step, r + r (1 - s r) -- without its range check and the branch to the slow path
// (denormal or huge s: ptxas emits both for every __frcp_rn): 3 instructions instead of ~8 and a BSSY. 1 - s r
// is never denormal (0 or near 2^-23), so the FTZ of the approximation does not matter. tests/gpu/test_quant.c
// (test_rcp_rn, kernels/quant_selftest.cu) compares it with __frcp_rn at every s of the range.
__device__ __forceinline__ float sl_kq_rcp_rn(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return fmaf(r, fmaf(-s, r, 1.0f), r);
}
// RD(1 / s) for s in [2^-125, 2^125): the same approximation and Newton step with the step's FMA rounded down
// (fma.rm: __frcp_rd's fast path, without its range check), for the FP8 IEEE rule of 16-bit inputs
// (quant_formats.h sl_qf_div16_fast, whose low part must not be negative). tests/gpu/test_quant.c (test_rcp_rd)
// compares it with __frcp_rd at every s of the range.
__device__ __forceinline__ float sl_kq_rcp_rd(float s) {
  float r, q;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  const float e = fmaf(-s, r, 1.0f);
  asm("fma.rm.f32 %0, %1, %2, %1;" : "=f"(q) : "f"(r), "f"(e));
  return q;
}

// Each thread moves 16 bytes per access (LDG.128/STG.128): the widest single global access
// on Hopper; a warp then covers 512 contiguous bytes, four full 128-byte lines.
#define SL_KQ_PACKET 16

// Scalar conversions by PTX (sm_80+), not cuda_fp16.h / cuda_bf16.h: those headers are most of
// NVRTC's compile time for kernels this small. cvt.rn is round-to-nearest-even, as the CPU
// reference (kernels/sl_dtype.h) rounds; subnormals kept.
__device__ __forceinline__ float sl_kq_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short sl_kq_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned short sl_kq_f32_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float sl_kq_bf16_to_f32(unsigned short h) {
  return __uint_as_float((unsigned)h << 16);
}

template <int DT> struct sl_kq_elem {
  static_assert(DT == SL_DTYPE_F32 || DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16, "f32, bf16, f16 only");
  static constexpr int bytes = DT == SL_DTYPE_F32 ? 4 : 2;
  static constexpr int vec = SL_KQ_PACKET / bytes; // elements per 16-byte packet
};

// One 16-byte packet (vec elements of DT) to fp32. Kernels that keep several packets in
// flight hold them raw (4 registers) and unpack at use: half the registers of fp32 for
// bf16/f16, which keeps them within 40 registers per thread.
template <int DT> __device__ __forceinline__ void sl_kq_unpack(uint4 w, float *f) {
  unsigned int u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if constexpr (DT == SL_DTYPE_F32) {
      f[i] = __uint_as_float(u[i]);
    } else if constexpr (DT == SL_DTYPE_BF16) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    } else {
      f[2 * i] = sl_kq_f16_to_f32((unsigned short)(u[i] & 0xffffu));
      f[2 * i + 1] = sl_kq_f16_to_f32((unsigned short)(u[i] >> 16));
    }
  }
}
__device__ __forceinline__ uint4 sl_kq_load_raw(const void *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}
// Load one 16-byte packet (vec elements of DT) as fp32.
template <int DT> __device__ __forceinline__ void sl_kq_load(const void *p, float *f) {
  sl_kq_unpack<DT>(sl_kq_load_raw(p), f);
}

// Store N fp32 values rounded once to DT (RNE), in 16-byte packets (8- or 4-byte ones when N
// elements of DT are only 8 or 4 bytes: f32 in and bf16 out, act.cu's PACK < 16).
template <int DT, int N> __device__ __forceinline__ void sl_kq_store(void *p, const float *f) {
  constexpr int words = N * sl_kq_elem<DT>::bytes / 4;
  static_assert(words % 2 == 0 || words == 1, "whole 4-, 8- or 16-byte packets only");
  unsigned int u[words];
#pragma unroll
  for (int i = 0; i < words; i++) {
    if constexpr (DT == SL_DTYPE_F32) {
      u[i] = __float_as_uint(f[i]);
    } else if constexpr (DT == SL_DTYPE_BF16) {
      u[i] = (unsigned)sl_kq_f32_to_bf16(f[2 * i]) | ((unsigned)sl_kq_f32_to_bf16(f[2 * i + 1]) << 16);
    } else {
      u[i] = (unsigned)sl_kq_f32_to_f16(f[2 * i]) | ((unsigned)sl_kq_f32_to_f16(f[2 * i + 1]) << 16);
    }
  }
  if constexpr (words == 1) {
    *reinterpret_cast<unsigned *>(p) = u[0];
  } else if constexpr (words % 4 == 0) {
#pragma unroll
    for (int i = 0; i < words; i += 4)
      reinterpret_cast<uint4 *>(p)[i / 4] = make_uint4(u[i], u[i + 1], u[i + 2], u[i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < words; i += 2)
      reinterpret_cast<uint2 *>(p)[i / 2] = make_uint2(u[i], u[i + 1]);
  }
}

// Store N codes (bytes for FP8, nibbles for FP4, element 2i in the low nibble) as one
// 2/4/8-byte store: N*8 or N*4 bits.
template <int N, bool FP4> __device__ __forceinline__ void sl_kq_store_codes(unsigned char *p, const unsigned char *c) {
  unsigned long long w = 0;
#pragma unroll
  for (int i = 0; i < N; i++)
    w |= (unsigned long long)c[i] << (FP4 ? 4 * i : 8 * i);
  constexpr int bytes = FP4 ? N / 2 : N;
  if constexpr (bytes == 8)
    *reinterpret_cast<unsigned long long *>(p) = w;
  else if constexpr (bytes == 4)
    *reinterpret_cast<unsigned int *>(p) = (unsigned int)w;
  else if constexpr (bytes == 2)
    *reinterpret_cast<unsigned short *>(p) = (unsigned short)w;
  else
    static_assert(bytes == 8 || bytes == 4 || bytes == 2, "2, 4 or 8 bytes of codes per thread");
}

// Load N codes back (inverse of sl_kq_store_codes); unpacks to one code per byte.
template <int N, bool FP4> __device__ __forceinline__ void sl_kq_load_codes(const unsigned char *p, unsigned char *c) {
  constexpr int bytes = FP4 ? N / 2 : N;
  unsigned long long w;
  if constexpr (bytes == 8)
    w = *reinterpret_cast<const unsigned long long *>(p);
  else if constexpr (bytes == 4)
    w = *reinterpret_cast<const unsigned int *>(p);
  else
    w = *reinterpret_cast<const unsigned short *>(p);
#pragma unroll
  for (int i = 0; i < N; i++)
    c[i] = (unsigned char)((w >> (FP4 ? 4 * i : 8 * i)) & (FP4 ? 0xfu : 0xffu));
}

// Absmax of a block as the max of |x|'s bit patterns: for finite floats the integer order of
// the magnitude bits is the float order, and NaN/Inf (exponent all ones) sort above every
// finite value, so one integer max per element yields both the absmax and the "block holds
// NaN/Inf" flag (max bits >= 0x7f800000) — 2 instructions per element instead of 5.
template <int VEC> __device__ __forceinline__ unsigned sl_kq_thread_absmax_bits(const float *v) {
  unsigned m = 0;
#pragma unroll
  for (int j = 0; j < VEC; j++)
    m = max(m, __float_as_uint(v[j]) & 0x7fffffffu);
  return m;
}

// Reduce over a block of LANES consecutive lanes (each holding VEC elements): a butterfly of
// log2(LANES) rounds, a compile-time count. Blocks of 16 or 32 elements span 2-8 lanes, so
// this is a sub-warp reduction: every lane of the block ends with the same result, with no
// shared memory or barrier. All 32 lanes execute the shuffles (tail lanes carry 0), so the
// full mask is correct.
template <int LANES> __device__ __forceinline__ unsigned sl_kq_block_max(unsigned m) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "power-of-two lanes per block");
#pragma unroll
  for (int k = 1; k < LANES; k <<= 1)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, k));
  return m;
}

// Per 16-bit half, the largest magnitude of the packet's four words (sign bits masked: the bit
// patterns of non-negative values order as the values, NaN above Inf).
__device__ __forceinline__ unsigned sl_kq_max16x4(uint4 w) {
  unsigned a = w.x & 0x7fff7fffu, b = w.y & 0x7fff7fffu, c = w.z & 0x7fff7fffu, d = w.w & 0x7fff7fffu, m;
  asm("{\n\t.reg .b32 t0, t1;\n\tmax.u16x2 t0, %1, %2;\n\tmax.u16x2 t1, %3, %4;\n\tmax.u16x2 %0, t0, t1;\n\t}"
      : "=r"(m)
      : "r"(a), "r"(b), "r"(c), "r"(d));
  return m;
}
// The block's absmax and "not finite" flag from the two halves' largest magnitudes.
template <int DT> __device__ __forceinline__ void sl_kq_absmax16_of(unsigned m, float &absmax, int &bad) {
  const unsigned h = max(m & 0xffffu, m >> 16);
  if constexpr (DT == SL_DTYPE_BF16) {
    bad = h >= 0x7f80u;
    absmax = bad ? 0.0f : __uint_as_float(h << 16);
  } else {
    bad = h >= 0x7c00u;
    absmax = bad ? 0.0f : sl_kq_f16_to_f32((unsigned short)h);
  }
}

// Absmax and non-finite flag of the block this lane belongs to.
template <int VEC, int LANES>
__device__ __forceinline__ void sl_kq_block_absmax(const float *v, float &absmax, int &bad) {
  unsigned m = sl_kq_block_max<LANES>(sl_kq_thread_absmax_bits<VEC>(v));
  bad = m >= 0x7f800000u;
  absmax = bad ? 0.0f : __uint_as_float(m);
}

// The same for a packet of 16-bit elements (bf16/f16) straight from its words: magnitudes
// are the low 15 bits of each half, ordered like the values (NaN/Inf above every finite), so
// sign mask (4 LOP3) + 3 packed max.u16x2 (sm_90+) give the thread's two per-half maxima, the
// butterfly reduces the packed word (both halves at once), and one final max picks the larger
// half: ~9 instructions instead of ~16 (8 sign masks + 4 3-way max + unpacking for them).
template <int DT, int LANES>
__device__ __forceinline__ void sl_kq_block_absmax16(uint4 w, float &absmax, int &bad) {
  static_assert(DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16, "16-bit elements only");
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "power-of-two lanes per block");
  unsigned m = sl_kq_max16x4(w);
#pragma unroll
  for (int k = 1; k < LANES; k <<= 1) {
    const unsigned o = __shfl_xor_sync(0xffffffffu, m, k);
    asm("max.u16x2 %0, %0, %1;" : "+r"(m) : "r"(o));
  }
  sl_kq_absmax16_of<DT>(m, absmax, bad);
}
// The same over the 16 elements of two packets held by one lane (a whole NVFP4 block): no shuffle.
template <int DT> __device__ __forceinline__ void sl_kq_block_absmax16x2(uint4 w0, uint4 w1, float &absmax, int &bad) {
  static_assert(DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16, "16-bit elements only");
  unsigned m;
  const unsigned m0 = sl_kq_max16x4(w0), m1 = sl_kq_max16x4(w1);
  asm("max.u16x2 %0, %1, %2;" : "=r"(m) : "r"(m0), "r"(m1));
  sl_kq_absmax16_of<DT>(m, absmax, bad);
}

// 1: E4M3 codes by the hardware cvt (below); 0: by sl_f32_to_e4m3, the CPU reference's own
// conversion (~15 integer instructions per element). The GPU tests compare codes bit for bit
// with the CPU: if the hardware ever disagreed, build with 0 (one line here).
#ifndef SL_KQ_HW_E4M3
#define SL_KQ_HW_E4M3 1
#endif

// 1: MXFP4 codes of bf16 packets by the packed bf16x2 encoder (sl_qf_e2m1_pack_bf16x2, sm_90+,
// unit-tested on its host emulation; the GPU tests compare codes bit for bit); 0: the fp32
// encoder (sl_qf_e2m1_pack16x8). One line here if the hardware ever disagreed.
#ifndef SL_KQ_E2M1_BF16X2
#define SL_KQ_E2M1_BF16X2 1
#endif

// Two E4M3 codes by the hardware conversion (sm_89+): cvt.rn.satfinite rounds to nearest even
// and saturates finite values to +-448 exactly as sl_f32_to_e4m3 does (NaN/Inf never reach
// it: such blocks are marked before). Low byte = lo.
__device__ __forceinline__ unsigned short sl_kq_e4m3x2(float lo, float hi) {
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}

// Quantize a thread's VEC values of one block (block absmax already reduced) to codes and
// return the scale to store. Identical to the CPU reference (kernels/quant.c): the same
// sl_qf_* scale rules and element scaling from quant_formats.h; E4M3 by the hardware cvt
// (bit-identical to sl_f32_to_e4m3, see above), E2M1 by sl_f32_to_e2m1 (sm_90 has no FP4 cvt).
template <int FMT, int RULE, int VEC>
__device__ __forceinline__ void sl_kq_quantize(const float *v, float absmax, int bad, float global_scale,
                                               unsigned char *codes, float &scale_f32, unsigned char &scale_u8) {
  static_assert(VEC % 2 == 0, "codes come in pairs");
  sl_qf_scale_t s = sl_qf_block_scale(FMT, RULE, absmax, global_scale);
  scale_f32 = s.scale_f32;
  scale_u8 = s.scale_u8;
  if (bad) {
    sl_qf_nan_scale(FMT, &scale_f32, &scale_u8);
#pragma unroll
    for (int j = 0; j < VEC; j++)
      codes[j] = sl_qf_nan_code(FMT);
    return;
  }
  if (s.zero) {
#pragma unroll
    for (int j = 0; j < VEC; j++)
      codes[j] = 0;
    return;
  }
  float y[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++)
    y[j] = s.div ? SL_QF_DIV(v[j], s.mul) : SL_QF_MUL(v[j], s.mul);
  if constexpr ((FMT == SL_QFMT_FP8_GROUP || FMT == SL_QFMT_MXFP8) && SL_KQ_HW_E4M3) {
#pragma unroll
    for (int j = 0; j < VEC; j += 2) {
      unsigned short d = sl_kq_e4m3x2(y[j], y[j + 1]);
      codes[j] = (unsigned char)(d & 0xffu);
      codes[j + 1] = (unsigned char)(d >> 8);
    }
  } else if constexpr (FMT == SL_QFMT_FP8_GROUP || FMT == SL_QFMT_MXFP8) {
#pragma unroll
    for (int j = 0; j < VEC; j++)
      codes[j] = sl_f32_to_e4m3(y[j]);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; j++)
      codes[j] = sl_f32_to_e2m1(y[j]);
  }
}

// E4M3 -> fp32 by the hardware pair conversion (sm_89+): every E4M3 value is exact in f16,
// so this equals sl_e4m3_to_f32 bit for bit except for NaN codes (a NaN either way). Low
// byte -> lo.
__device__ __forceinline__ void sl_kq_e4m3x2_to_f32(unsigned short pair, float &lo, float &hi) {
  unsigned h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pair));
  lo = sl_kq_f16_to_f32((unsigned short)(h2 & 0xffffu));
  hi = sl_kq_f16_to_f32((unsigned short)(h2 >> 16));
}

// Four E4M3 codes (element j in byte j) by two hardware pair conversions and one byte merge
// (PRMT): 3 instructions per 4 codes (the 64-bit shift-or assembly it replaces cost ~3 more).
__device__ __forceinline__ unsigned sl_kq_e4m3x4(float y0, float y1, float y2, float y3) {
  unsigned d;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(d)
      : "f"(y0), "f"(y1), "f"(y2), "f"(y3));
  return d;
}

// E2M1 codes of one packet (VEC = 8 for bf16/f16, 4 for f32) under the element multiplier mul:
// nibble j = sl_f32_to_e2m1(x_j * mul); the packing is quant_formats.h's (unit-tested on the CPU
// against the reference encoder).
template <int DT, int VEC>
__device__ __forceinline__ unsigned sl_kq_e2m1_packet(const float *v, uint4 w, float mul) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
  if constexpr (VEC == 8)
    return sl_qf_e2m1_pack16x8(v, u, mul);
  else
    return sl_qf_e2m1_pack32x4(v, u, mul);
}

// An NVFP4 block's scale byte (scale_u8) and element multiplier: sl_qf_block_scale's NVFP4 rule
// with the E4M3 scale converted and decoded by the hardware (exact both ways for this finite,
// non-negative value: +Inf saturates to 448 like sl_f32_to_e4m3), mul = global_scale / decode.
// A zero scale byte returns 0 (every code of the block is 0) without the division.
__device__ __forceinline__ float sl_kq_nvfp4_scale(float absmax, float global_scale, unsigned char &scale_u8) {
  const float q6 = absmax >= SL_QF_DIV448_MIN ? sl_qf_div6_fast(absmax) : __fdiv_rn(absmax, SL_E2M1_MAX);
  const float sf_f = __fmul_rn(global_scale, q6);
  const unsigned short sfc = sl_kq_e4m3x2(sf_f, 0.0f) & 0xffu;
  scale_u8 = (unsigned char)sfc;
  if (sfc == 0) return 0.0f;
  float sf, unused;
  sl_kq_e4m3x2_to_f32(sfc, sf, unused);
  return __fdiv_rn(global_scale, sf);
}

// The E4M3 codes of one packet of 8 16-bit elements (values v) in an FP8 IEEE group block of
// scale s = sl_qf_div448_fast(absmax), absmax >= SL_QF_DIV448_MIN (sl_kq_quantize_fast's hot branch; quant.cu QLINE):
// sl_qf_div16_fast's quotient (2 instructions per element, from r = RD(1 / s)) -- its E4M3 code is the code of the
// IEEE quotient for every 16-bit x, sign and zeros included (quant_formats.h; tested exhaustively) -- and the codes
// by the hardware conversion (which keeps the sign of a zero, as sl_f32_to_e4m3 does).
__device__ __forceinline__ unsigned long long sl_kq_fp8_ieee_codes16(const float *v, float s) {
  const float r = sl_kq_rcp_rd(s), r_lo = sl_qf_rcp_lo(s, r);
  float y[8];
#pragma unroll
  for (int j = 0; j < 8; j++)
    y[j] = sl_qf_div16_fast(v[j], r, r_lo);
  const unsigned c0 = sl_kq_e4m3x4(y[0], y[1], y[2], y[3]), c1 = sl_kq_e4m3x4(y[4], y[5], y[6], y[7]);
  return ((unsigned long long)c1 << 32) | c0;
}

// The same quantization as sl_kq_quantize with the bit-identical fast rules of quant_formats.h
// (sl_qf_block_exp_fast, sl_qf_div_fast, sl_qf_e2m1_mag_raw; tests/unit/test_quant_fast.c),
// returning the thread's codes packed as sl_kq_store_codes lays them out (element j in byte j,
// or in nibble j for FP4). RAW: w is the packet the values were unpacked from (DT's words; the FP4
// encoder gathers sign bits from it by PRMT), and 16-bit values take the FP8 IEEE rule of 2 instructions
// (sl_kq_fp8_ieee_codes16); false (act: computed fp32 values) uses v only.
// Per element: FP8 IEEE 3 FP instructions (2 for 16-bit RAW inputs) + 1/2 cvt; MX one multiply;
// FP4 ~8.75 (sl_kq_e2m1_packet); the block exponent without a division.
template <int FMT, int RULE, int VEC, int DT = SL_DTYPE_F32, bool RAW = false>
__device__ __forceinline__ unsigned long long sl_kq_quantize_fast(const float *v, float absmax, int bad,
                                                                  float global_scale, float &scale_f32,
                                                                  unsigned char &scale_u8, uint4 w = uint4()) {
  static_assert(VEC == 4 || VEC == 8, "4 or 8 elements per thread");
  static_assert(!RAW || DT == SL_DTYPE_F32 || DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16, "raw packets of f32/bf16/f16");
  constexpr bool fp4 = FMT == SL_QFMT_MXFP4 || FMT == SL_QFMT_NVFP4;
  constexpr bool raw16 = RAW && DT != SL_DTYPE_F32; // 16-bit elements
  if (bad) {
    sl_qf_nan_scale(FMT, &scale_f32, &scale_u8);
    return fp4 ? 0ull : (VEC == 8 ? 0x7f7f7f7f7f7f7f7full : 0x7f7f7f7full); // E4M3 NaN, E2M1 0
  }
  float y[VEC];
  if constexpr (FMT == SL_QFMT_FP8_GROUP && RULE == SL_QRULE_IEEE) {
    scale_u8 = 0;
    if (absmax >= SL_QF_DIV448_MIN) { // block-uniform: the scale and the elements both fast
      // s in [2^-55 / 448, FLT_MAX / 448]: inside sl_kq_rcp_rn's range
      const float s = sl_qf_div448_fast(absmax);
      scale_f32 = s;
      if constexpr (raw16 && VEC == 8 && SL_KQ_HW_E4M3) {
        return sl_kq_fp8_ieee_codes16(v, s);
      } else if constexpr (raw16 && VEC == 8) { // the reference's conversion instead of the hardware's
        const float r = sl_kq_rcp_rd(s), r_lo = sl_qf_rcp_lo(s, r);
        unsigned long long c = 0;
#pragma unroll
        for (int j = 0; j < VEC; j++)
          c |= (unsigned long long)sl_f32_to_e4m3(sl_qf_div16_fast(v[j], r, r_lo)) << (8 * j);
        return c;
      } else {
        const float r = sl_kq_rcp_rn(s);
#pragma unroll
        for (int j = 0; j < VEC; j++)
          y[j] = sl_qf_div_fast(v[j], s, r);
      }
    } else { // absmax < 2^-55 or zero (rare; never in the hot loop): no division call (sl_qf_div448_tiny)
      float sx, x1, x2;
      if (!sl_qf_div448_tiny(absmax, &scale_f32, &sx, &x1, &x2)) return 0ull;
      const float r = sl_kq_rcp_rn(sx);
#pragma unroll
      for (int j = 0; j < VEC; j++)
        y[j] = sl_qf_div_fast(__fmul_rn(__fmul_rn(v[j], x1), x2), sx, r);
    }
  } else if constexpr (FMT == SL_QFMT_NVFP4) {
    scale_f32 = 0.0f;
    const float mul = sl_kq_nvfp4_scale(absmax, global_scale, scale_u8);
    if (scale_u8 == 0) return 0ull;
    if constexpr (RAW) {
      return sl_kq_e2m1_packet<DT, VEC>(v, w, mul);
    } else {
      unsigned h = 0;
#pragma unroll
      for (int j = 0; j < VEC; j++)
        h += sl_qf_e2m1_scaled(v[j], mul) << (4 * j); // disjoint nibbles: + is |
      return h;
    }
  } else if constexpr (FMT == SL_QFMT_MXFP4) { // x * 2^-e exact; codes straight from x
    const int e = sl_qf_block_exp_fast(absmax, RULE, SL_E2M1_MAX, SL_E2M1_EMAX);
    scale_u8 = (unsigned char)(e + 127);
    scale_f32 = sl_qf_pow2(e);
    if (!(absmax > 0.0f)) return 0ull;
    if constexpr (RAW && DT == SL_DTYPE_BF16 && VEC == 8 && SL_KQ_E2M1_BF16X2) {
      // two elements per instruction (quant_formats.h; e <= 126 for finite bf16, so 2^-e is a
      // normal bf16, and |x| 2^-e < 8 under both MX rules)
      const unsigned u[4] = {w.x, w.y, w.z, w.w};
      return sl_qf_e2m1_pack_bf16x2(u, sl_qf_e2m1_m2(e));
    }
    const float mul = sl_qf_pow2(-e);
    if constexpr (RAW) {
      return sl_kq_e2m1_packet<DT, VEC>(v, w, mul);
    } else {
      unsigned h = 0;
#pragma unroll
      for (int j = 0; j < VEC; j++)
        h += sl_qf_e2m1_scaled(v[j], mul) << (4 * j);
      return h;
    }
  } else { // power-of-two scales: FP8_GROUP CEIL, MXFP8 (x * 2^-e is exact); no division (tiny CEIL blocks)
    const int e = sl_qf_block_exp_e4m3(absmax, RULE);
    scale_u8 = (unsigned char)(e + 127);
    scale_f32 = sl_qf_pow2(e);
    if (!(absmax > 0.0f)) return 0ull;
    const float mul = sl_qf_pow2(-e);
#pragma unroll
    for (int j = 0; j < VEC; j++)
      y[j] = __fmul_rn(v[j], mul);
  }
  unsigned long long c = 0;
  if constexpr (!fp4 && SL_KQ_HW_E4M3) {
    const unsigned c0 = sl_kq_e4m3x4(y[0], y[1], y[2], y[3]);
    if constexpr (VEC == 8)
      c = ((unsigned long long)sl_kq_e4m3x4(y[4], y[5], y[6], y[7]) << 32) | c0;
    else
      c = c0;
  } else if constexpr (!fp4) {
#pragma unroll
    for (int j = 0; j < VEC; j++)
      c |= (unsigned long long)sl_f32_to_e4m3(y[j]) << (8 * j);
  } // FP4 formats returned their nibbles above
  return c;
}

// Store packed codes (sl_kq_quantize_fast) as one 2/4/8-byte store.
template <int N, bool FP4> __device__ __forceinline__ void sl_kq_store_packed(unsigned char *p, unsigned long long w) {
  constexpr int bytes = FP4 ? N / 2 : N;
  if constexpr (bytes == 8)
    *reinterpret_cast<unsigned long long *>(p) = w;
  else if constexpr (bytes == 4)
    *reinterpret_cast<unsigned int *>(p) = (unsigned int)w;
  else if constexpr (bytes == 2)
    *reinterpret_cast<unsigned short *>(p) = (unsigned short)w;
  else
    static_assert(bytes == 8 || bytes == 4 || bytes == 2, "2, 4 or 8 bytes of codes per thread");
}

#endif
