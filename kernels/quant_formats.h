/* Exact low-precision formats and block-scale rules (FP8 E4M3, FP4 E2M1, E8M0, E4M3 scales),
 * the Blackwell 128x4 swizzled scale layout, and a reproducible expf: plain C included by the
 * CPU references (kernels/quant.c, act.c, router.c) and the CUDA kernels, so the two backends
 * produce bit-identical codes and scales.
 *
 * Reproducibility rules for everything in this file:
 *  - only integer bit manipulation, single IEEE fp32 operations (+ - * / each rounded once),
 *    comparisons, and explicit fmaf; never an expression a*b+c that a compiler could contract
 *    into an FMA on one side only (NVRTC contracts by default). Where a product feeds a sum,
 *    SL_QF_ADD / SL_QF_MUL (__fadd_rn/__fmul_rn on the device: never contracted) are used.
 *  - rounding is round-to-nearest-even everywhere; conversions saturate to the format's
 *    largest finite value (OCP "satfinite"); NaN handling is the caller's (block level). */
#ifndef SL_QUANT_FORMATS_H
#define SL_QUANT_FORMATS_H

#ifndef __CUDACC_RTC__
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#else
/* NVRTC has no <stdint.h>; identical typedefs may be repeated in C++. */
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
#endif

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define SL_QF_FN static __device__ __forceinline__
#define SL_QF_ADD(a, b) __fadd_rn((a), (b))
#define SL_QF_MUL(a, b) __fmul_rn((a), (b))
#define SL_QF_DIV(a, b) __fdiv_rn((a), (b))
#else
#define SL_QF_FN static inline
#define SL_QF_ADD(a, b) ((a) + (b))
#define SL_QF_MUL(a, b) ((a) * (b))
#define SL_QF_DIV(a, b) ((a) / (b))
#endif

/* ---- Formats and rules (values shared with the JIT -D constants) --------------------- */
/* SL_QFMT_FP8_GROUP: E4M3 codes, one fp32 scale per 128 elements (DeepSeek/vLLM
 *   per-token-group). SL_QFMT_MXFP8: E4M3 codes, E8M0 scale per 32 (OCP MX).
 *   SL_QFMT_MXFP4: E2M1 codes, E8M0 scale per 32 (OCP MX). SL_QFMT_NVFP4: E2M1 codes, E4M3
 *   scale per 16, and an fp32 tensor scale. */
#define SL_QFMT_FP8_GROUP 0
#define SL_QFMT_MXFP8 1
#define SL_QFMT_MXFP4 2
#define SL_QFMT_NVFP4 3
/* Scale rules. IEEE: fp32 scale = absmax / max_code (FP8_GROUP only). CEIL: power of two
 * 2^ceil(log2(absmax / max_code)) (UE8M0 for FP8_GROUP, "RCEIL" for MX). FLOOR: the OCP MX
 * rule 2^(floor(log2(absmax)) - emax_code) (MX only). NVFP4 has its own rule (E4M3). */
#define SL_QRULE_IEEE 0
#define SL_QRULE_CEIL 1
#define SL_QRULE_FLOOR 2
#define SL_QLAYOUT_LINEAR 0
#define SL_QLAYOUT_SWIZZLED 1

#define SL_E4M3_MAX 448.0f
#define SL_E2M1_MAX 6.0f
#define SL_E4M3_EMAX 8 /* 448 = 1.75 * 2^8 */
#define SL_E2M1_EMAX 2 /* 6 = 1.5 * 2^2 */
#define SL_E4M3_NAN 0x7f
#define SL_E8M0_NAN 0xff

/* Elements per scale block of a format. */
SL_QF_FN int sl_qfmt_block(int fmt) {
  return fmt == SL_QFMT_FP8_GROUP ? 128 : fmt == SL_QFMT_NVFP4 ? 16 : 32;
}
/* 1 when the codes are FP4 (two per byte, element 2i in the low nibble). */
SL_QF_FN int sl_qfmt_is_fp4(int fmt) {
  return fmt == SL_QFMT_MXFP4 || fmt == SL_QFMT_NVFP4;
}

/* ---- Bits --------------------------------------------------------------------------- */
SL_QF_FN uint32_t sl_qf_bits(float f) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
#endif
}
SL_QF_FN float sl_qf_float(uint32_t u) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
/* Not NaN and not +-Inf. */
SL_QF_FN int sl_qf_finite(float f) {
  return (sl_qf_bits(f) & 0x7f800000u) != 0x7f800000u;
}
SL_QF_FN float sl_qf_abs(float f) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return fabsf(f); /* the same bits (sign cleared); folds into an FMUL's |.| operand (no LOP3) */
#else
  return sl_qf_float(sl_qf_bits(f) & 0x7fffffffu);
#endif
}
/* max for absmax reductions: inputs are never NaN here (a non-finite block is flagged). */
SL_QF_FN float sl_qf_max(float a, float b) {
  return a > b ? a : b;
}

/* 2^e as fp32 for e in [-127, 127] (exact; 2^-127 is an fp32 subnormal). */
SL_QF_FN float sl_qf_pow2(int e) {
  return e >= -126 ? sl_qf_float((uint32_t)(e + 127) << 23) : sl_qf_float(0x00400000u);
}

/* ---- FP8 E4M3 (OCP, "fn": no infinities, S.1111.111 is NaN, max 448, subnormals m*2^-9) */
/* fp32 -> E4M3, round to nearest even, saturate to +-448; NaN -> 0x7f (sign kept). */
SL_QF_FN uint8_t sl_f32_to_e4m3(float f) {
  uint32_t u = sl_qf_bits(f);
  uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448 (incl. Inf): satfinite */
  if (a >= 0x3c800000u) {                               /* >= 2^-6: normal E4M3 */
    uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);       /* RNE to 3 mantissa bits */
    return (uint8_t)(sign | ((r >> 20) - (120u << 3))); /* rebias 127 -> 7 */
  }
  /* Subnormal: the code is round(|f| / 2^-9) in 0..8 (8 is the smallest normal, 0x08). */
  uint32_t e = a >> 23;
  if (e < 117u) return (uint8_t)sign;                         /* < 2^-10 (half the smallest subnormal): 0 */
  uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 141u - e; /* 21..24 */
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint8_t)(sign | q);
}
SL_QF_FN float sl_e4m3_to_f32(uint8_t c) {
  uint32_t sign = (uint32_t)(c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
  if ((c & 0x7fu) == 0x7fu) return sl_qf_float(sign | 0x7fc00000u);
  if (e == 0) return sl_qf_float(sign | sl_qf_bits((float)m * 0.001953125f)); /* m * 2^-9 */
  return sl_qf_float(sign | ((e + 120u) << 23) | (m << 20));
}

/* ---- FP4 E2M1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6; no NaN/Inf) -------------------------- */
/* fp32 -> E2M1 nibble, round to nearest even, saturate to +-6. The midpoints and where their
 * ties go (to the even code): 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4.
 * Branch-free (the GPU runs this per element; sm_90 has no FP4 cvt): |x| >= 1 rounds its bits
 * to one mantissa bit (carry into the exponent included) and rebiases 127 -> 1, saturating
 * at code 7; |x| < 1 is the subnormal step 0.5: code = round_even(2|x|) by the 1.5*2^23 trick
 * (2|x| is exact, so the add rounds once). */
SL_QF_FN uint8_t sl_f32_to_e2m1(float f) {
  uint32_t u = sl_qf_bits(f), sign = (u >> 28) & 0x8u, a = u & 0x7fffffffu;
  uint32_t r = a + 0x1fffffu + ((a >> 22) & 1u);
  uint32_t normal = (r >> 22) - 252u; /* (exponent 127..129) << 1 | mantissa bit, rebiased */
  normal = normal > 7u ? 7u : normal;
  float t = SL_QF_ADD(SL_QF_MUL(sl_qf_float(a), 2.0f), 12582912.0f);
  uint32_t sub = sl_qf_bits(t) - 0x4b400000u; /* 0, 1 or 2 (2 = 1.0, the first normal code) */
  return (uint8_t)(sign | (a >= 0x3f800000u ? normal : sub));
}
SL_QF_FN float sl_e2m1_to_f32(uint8_t c) {
  /* magnitude = code * 0.5 for codes 0..4, then 3, 4, 6 */
  uint32_t m = c & 7u;
  float v = m <= 4u ? (float)m * 0.5f : m == 5u ? 3.0f : m == 6u ? 4.0f : 6.0f;
  return (c & 8u) ? -v : v;
}

/* ---- E8M0 (UE8M0): 2^(c-127), c = 255 is NaN --------------------------------------------- */
SL_QF_FN float sl_e8m0_to_f32(uint8_t c) {
  if (c == 0xffu) return sl_qf_float(0x7fc00000u);
  return sl_qf_pow2((int)c - 127);
}

/* floor(log2(a)) of a finite a > 0 (subnormals included). */
SL_QF_FN int sl_qf_floor_log2(float a) {
  uint32_t u = sl_qf_bits(a) & 0x7fffffffu, e = u >> 23;
  if (e) return (int)e - 127;
  int p = 22;
  while (p > 0 && !(u & (1u << p)))
    p--;
  return p - 149;
}
/* ceil(log2(a)) of a finite a > 0. */
SL_QF_FN int sl_qf_ceil_log2(float a) {
  uint32_t u = sl_qf_bits(a) & 0x7fffffffu, e = u >> 23, m = u & 0x7fffffu;
  if (e) return (int)e - 127 + (m != 0);
  int p = sl_qf_floor_log2(a);
  return p + (m != (1u << (p + 149)));
}
SL_QF_FN int sl_qf_clamp_exp(int e) {
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

/* Block exponent of a power-of-two scale from the block absmax (finite, >= 0).
 * CEIL ("RCEIL", UE8M0 rounded up): ceil(log2(absmax / max_code)), absmax / max_code by
 *   IEEE division, so every element / 2^e <= max_code: nothing saturates.
 * FLOOR (OCP MX v1.0 section 6.3): floor(log2(absmax)) - emax_code; the largest elements may
 *   exceed max_code after scaling and saturate.
 * A zero block gets the smallest exponent, -127 (E8M0 code 0), and all-zero codes. */
SL_QF_FN int sl_qf_block_exp(float absmax, int rule, float max_code, int emax_code) {
  if (!(absmax > 0.0f)) return -127;
  if (rule == SL_QRULE_FLOOR) return sl_qf_clamp_exp(sl_qf_floor_log2(absmax) - emax_code);
  float s = SL_QF_DIV(absmax, max_code);
  if (!(s > 0.0f)) return -127;
  return sl_qf_clamp_exp(sl_qf_ceil_log2(s));
}

/* ---- Block scale of each format -------------------------------------------------------
 * sl_qf_scale_t carries what the element conversion needs:
 *   FP8_GROUP IEEE:  scale = absmax / 448 (IEEE); code = e4m3(x / scale); scale 0 -> codes 0.
 *   FP8_GROUP CEIL:  scale = 2^e (CEIL rule, max 448); code = e4m3(x * 2^-e).
 *   MXFP8 / MXFP4:   E8M0 code e + 127 (rule CEIL or FLOOR); code = e4m3 / e2m1(x * 2^-e).
 *   NVFP4 (NVIDIA's convention, as in TensorRT-LLM's cvt_warp_fp16_to_fp4 and vLLM's
 *     scaled_fp4_quant, Transformer Engine's NVFP4 recipe): the fp32 tensor scale
 *     global_scale = 448 * 6 / tensor_absmax is the *encode* scale the caller supplies;
 *       sf     = e4m3_satfinite(global_scale * (absmax / 6))      (each op IEEE, RNE)
 *       enc    = sf == 0 ? 0 : global_scale / decode(sf)           (IEEE division)
 *       code_i = e2m1(x_i * enc)
 *     and dequantization is x ~= e2m1(code) * decode(sf) / global_scale. (TensorRT-LLM uses
 *     rcp.approx for 1/6 and the reciprocals; we use IEEE division so the CPU reproduces the
 *     GPU bit for bit — a code can differ from TensorRT-LLM's only where its approximate
 *     reciprocal moves a value across a rounding boundary.)
 * A block holding NaN or Inf is not quantized: its scale is the format's NaN (fp32 NaN,
 * E8M0 0xff, E4M3 0x7f) and its codes are E4M3 NaN (0x7f) or E2M1 0, so dequantization
 * yields NaN, never plausible garbage; the host reports SL_ERR_NUMERIC (kernels/quant.h). */
typedef struct {
  float mul;        /* element multiplier (x * mul), or the divisor when div is set */
  int div;          /* FP8_GROUP IEEE: code = e4m3(x / mul) */
  int zero;         /* codes are all zero */
  float scale_f32;  /* the fp32 scale stored (FP8_GROUP) */
  uint8_t scale_u8; /* the byte scale stored (E8M0 or E4M3) */
} sl_qf_scale_t;

SL_QF_FN sl_qf_scale_t sl_qf_block_scale(int fmt, int rule, float absmax, float global_scale) {
  sl_qf_scale_t s;
  s.mul = 0.0f;
  s.div = 0;
  s.zero = 0;
  s.scale_f32 = 0.0f;
  s.scale_u8 = 0;
  if (fmt == SL_QFMT_NVFP4) {
    float sf_f = SL_QF_MUL(global_scale, SL_QF_DIV(absmax, SL_E2M1_MAX));
    s.scale_u8 = sl_f32_to_e4m3(sf_f);
    float sf = sl_e4m3_to_f32(s.scale_u8);
    if (sf == 0.0f)
      s.zero = 1;
    else
      s.mul = SL_QF_DIV(global_scale, sf);
    return s;
  }
  if (fmt == SL_QFMT_FP8_GROUP && rule == SL_QRULE_IEEE) {
    s.scale_f32 = SL_QF_DIV(absmax, SL_E4M3_MAX);
    s.mul = s.scale_f32;
    s.div = 1;
    s.zero = !(s.scale_f32 > 0.0f);
    return s;
  }
  int fp4 = fmt == SL_QFMT_MXFP4;
  int e = sl_qf_block_exp(absmax, rule, fp4 ? SL_E2M1_MAX : SL_E4M3_MAX, fp4 ? SL_E2M1_EMAX : SL_E4M3_EMAX);
  s.scale_u8 = (uint8_t)(e + 127);
  s.scale_f32 = sl_qf_pow2(e);
  s.mul = sl_qf_pow2(-e);
  s.zero = !(absmax > 0.0f);
  return s;
}

/* Code of one element under a block scale (FP8 formats return E4M3, FP4 an E2M1 nibble). */
SL_QF_FN uint8_t sl_qf_encode(int fmt, sl_qf_scale_t s, float x) {
  int fp4 = sl_qfmt_is_fp4(fmt);
  if (s.zero) return 0;
  float v = s.div ? SL_QF_DIV(x, s.mul) : SL_QF_MUL(x, s.mul);
  return fp4 ? sl_f32_to_e2m1(v) : sl_f32_to_e4m3(v);
}
/* ---- Faster equivalents of the rules above (bit-identical; tests/unit/test_quant_fast.c) ----
 * The GPU quantizers are instruction-bound, so the per-block and per-element work below
 * replaces IEEE divisions by exact integer logic or a multiply plus one FMA correction. Each
 * returns exactly what the reference function returns on every input it accepts (the test
 * sweeps every bf16 and f16 input and every fp32 mantissa at several exponents).
 *
 * sl_qf_block_exp_fast == sl_qf_block_exp. CEIL: for a normal absmax a >= 2^-100 and
 * M = 448 = 1.75*2^8 or 6 = 1.5*2^2, RN(a / M) <= 2^k <=> a <= M*2^k: a tie at 2^k rounds to
 * 2^k (even), and M*2^k*(1 + 2^-24) lies less than one ulp of a above M*2^k, so no float is in
 * between. Hence ceil(log2(RN(a / M))) = ceil(log2(a / M)) = (Ea - EM) + (mant(a) > mant(M)),
 * with no division; smaller absmax (quotients near or below the subnormal range) take the
 * reference path. FLOOR is the reference itself (an exponent read for normal absmax). */
SL_QF_FN int sl_qf_block_exp_fast(float absmax, int rule, float max_code, int emax_code) {
  uint32_t a = sl_qf_bits(absmax), m = sl_qf_bits(max_code);
  if (rule == SL_QRULE_CEIL && a >= 0x0d800000u && a < 0x7f800000u) /* [2^-100, Inf) */
    return (int)(a >> 23) - (int)(m >> 23) + ((a & 0x7fffffu) > (m & 0x7fffffu));
  return sl_qf_block_exp(absmax, rule, max_code, emax_code);
}
/* Lower bound of the FP8 IEEE scale for sl_qf_div_fast (2^-64): above it the remainder of
 * every quotient that can round to a nonzero E4M3 code is exact (see below). */
#define SL_QF_DIV_FAST_MIN 0x1p-64f
/* RN(x / s) for s >= SL_QF_DIV_FAST_MIN (finite, normal), given r = RN(1 / s): q = RN(|x| r)
 * is within one ulp of |x| / s, the remainder |x| - q*s is exact in one FMA and
 * RN(q + remainder * r) is the correctly rounded quotient (Markstein's theorem: r is the
 * correctly rounded reciprocal, q a faithful quotient). Computed on |x| and the sign put back
 * so -0 and negative values round exactly like the division (RN is symmetric). Quotients below
 * 2^-12 may miss the last bit where the remainder underflows, but all of them (and their
 * neighbours) are E4M3 code 0 with the sign of x, like the division's; the test checks the
 * quotient bit for bit wherever it can reach a nonzero E4M3 or E2M1 code, and the code
 * everywhere. 3 instructions per element instead of an IEEE division (~10 and a range check). */
SL_QF_FN float sl_qf_div_fast(float x, float s, float r) {
  float ax = sl_qf_abs(x);
  float q = SL_QF_MUL(ax, r);
  float e = fmaf(-q, s, ax);
  float q1 = fmaf(e, r, q);
  return sl_qf_float(sl_qf_bits(q1) | (sl_qf_bits(x) & 0x80000000u));
}
/* sl_qf_div_fast on the signed x (3 instructions, no |x| and no sign put back): every
 * operation commutes with negation (RN is symmetric), so the result is -sl_qf_div_fast(|x|)
 * wherever that is nonzero, and a zero of either sign where it is zero. Hence
 * e4m3(sl_qf_div_fast_signed(x)) | (sign of x) == e4m3(sl_qf_div_fast(x)) for every x: the GPU
 * ORs the sign bits into 4 codes at once (tests/unit/test_quant_fast.c checks the identity). */
SL_QF_FN float sl_qf_div_fast_signed(float x, float s, float r) {
  float q = SL_QF_MUL(x, r);
  return fmaf(fmaf(-q, s, x), r, q);
}
/* The low part of 1 / s next to r = RD(1 / s) (or RN): RN((1 - s r) r), the residual 1 - s r exact in one FMA (it is
 * below 2^-23 s r, so it fits 24 bits). r + r_lo is 1 / s within ~2^-46 relative ((1 - s r)^2 and r_lo's rounding);
 * r_lo >= 0 when r is rounded down. For sl_qf_div16_fast. */
SL_QF_FN float sl_qf_rcp_lo(float s, float r) {
  return SL_QF_MUL(fmaf(-s, r, 1.0f), r);
}
/* The FP8 IEEE element rule for 16-bit inputs in 2 instructions instead of 3: q = RN(x r + RN(x r_lo)) (r = RD(1 /
 * s), r_lo = sl_qf_rcp_lo(s, r) >= 0). Not RN(x / s) bit for bit, but the same E4M3 code, sign and zeros included,
 * for every bf16 or f16 x with |x| <= absmax, s = RN(absmax / 448), absmax >= SL_QF_DIV448_MIN of the same dtype.
 * Why: q is within ~2^-45 of x / s, so the two codes can only differ where an E4M3 rounding midpoint M lies within
 * an fp32 ulp of x / s; x / s = (448 x / absmax)(1 + d), |d| <= 2^-24, and with x and absmax of <= 11 significant
 * bits 448 x / absmax is either M exactly or >= 2^-16 away from it (a ratio of integers below 2^16). The exact ties
 * that remain are what the exhaustive test covers: tests/unit/test_quant_fast.c test_div16_fast, every x against
 * every bf16 absmax mantissa at 56 binades (the range's ends among them) and against every third f16 absmax (every
 * one in 7 binades); with SL_TEST_EXHAUSTIVE=1 every finite absmax >= 2^-55 of both dtypes against every x of both
 * signs (~2 G quotients; none differ, session 36). The reciprocal is rounded down so that r_lo >= 0: then x r_lo has
 * x's sign, -0 included, and q keeps it (with r = RN(1 / s), r_lo < 0 for about half the s, and x = -0 gave +0 there:
 * session 35 OR'ed the sign bits back into the codes, 4 instructions per lane that RD saves). Not for fp32 inputs. */
SL_QF_FN float sl_qf_div16_fast(float x, float r, float r_lo) {
  return fmaf(x, r, SL_QF_MUL(x, r_lo));
}
/* The FP8 IEEE block scale absmax / 448 without a division: with r = RN(1/448) (0x3b124925),
 * q = RN(a r), the remainder a - 448 q exact in one FMA and RN(q + rem * r), for every a in
 * [SL_QF_DIV448_MIN, FLT_MAX] (the result only depends on a's mantissa there: scaling a by 2^k
 * scales every step exactly; the unit test runs every mantissa at the range ends and in the
 * middle). The lower bound also keeps the scale >= SL_QF_DIV_FAST_MIN (2^-55 / 448 > 2^-64), so
 * one block-uniform test selects both fast paths. 3 instructions instead of ~10 and a check. */
#define SL_QF_DIV448_MIN 0x1p-55f
#define SL_QF_R448 0x1.24924ap-9f /* RN(1 / 448) = 0x3b124925 */
SL_QF_FN float sl_qf_div448_fast(float a) {
  float q = SL_QF_MUL(a, SL_QF_R448);
  return fmaf(fmaf(-q, SL_E4M3_MAX, a), SL_QF_R448, q);
}
/* The FP8 IEEE scale s = RN(absmax / 448) of a block with 0 <= absmax < SL_QF_DIV448_MIN, and its quotients'
 * operands, without a division (on the GPU a division call's calling sequence makes the 32-register kernels
 * spill): RN(x / s) = RN(X / sx) for X = x x1 x2 and sx = s x1 x2, exact power-of-two scalings into
 * sl_qf_div_fast's range (X / sx = x / s exactly, so both round alike), sx in [2^-62, 2^-53] or [2^-21, 2^9].
 *   absmax >= 448 * 2^-126 (s normal): sx = sl_qf_div448_fast(absmax 2^64) = RN(absmax 2^64 / 448) (absmax 2^64 is
 *     exact and >= 2^-53.2, in its range) = s 2^64 exactly (scaling commutes with RN while normal); x1 = 2^64, x2 = 1.
 *   below (s subnormal, or 0): s is an integer m times 2^-149; N = absmax 2^149 is an exact integer < 2^32
 *     (absmax has 24 significant bits and is a multiple of 2^-149), m = N / 448 rounded to nearest even by the
 *     integer remainder, and m's bits are s's (m <= 2^23: a subnormal, or 2^-126 itself); sx = s 2^128;
 *     x1 = x2 = 2^64.
 * Returns 0 where s = 0 (every code 0). tests/unit/test_quant_fast.c checks s and the quotients against the
 * divisions; the GPU tests' tiny blocks (below 2^-100, bf16 subnormals included) check codes and scales. */
SL_QF_FN int sl_qf_div448_tiny(float absmax, float *s, float *sx, float *x1, float *x2) {
  *x1 = 0x1p64f;
  if (absmax >= SL_E4M3_MAX * 0x1p-126f) {
    *sx = sl_qf_div448_fast(SL_QF_MUL(absmax, 0x1p64f));
    *s = SL_QF_MUL(*sx, 0x1p-64f);
    *x2 = 1.0f;
    return 1;
  }
  const uint32_t n = (uint32_t)SL_QF_MUL(SL_QF_MUL(SL_QF_MUL(absmax, 0x1p64f), 0x1p64f), 0x1p21f);
  uint32_t m = n / 448u;
  const uint32_t rem = n - m * 448u;
  m += rem > 224u || (rem == 224u && (m & 1u));
  *s = sl_qf_float(m);
  *sx = SL_QF_MUL(SL_QF_MUL(*s, 0x1p64f), 0x1p64f);
  *x2 = 0x1p64f;
  return m != 0;
}
/* sl_qf_block_exp_fast for the E4M3 codes (max_code 448: FP8 group CEIL, MXFP8) with the CEIL rule's tiny blocks
 * (absmax < 2^-100) by sl_qf_div448_tiny's exact quotient instead of a division: the same exponent. */
SL_QF_FN int sl_qf_block_exp_e4m3(float absmax, int rule) {
  if (rule == SL_QRULE_CEIL && absmax < 0x1p-100f) {
    float s, sx, x1, x2;
    if (!sl_qf_div448_tiny(absmax, &s, &sx, &x1, &x2)) return -127; /* 0, or a quotient that rounds to 0 */
    return sl_qf_clamp_exp(sl_qf_ceil_log2(s));
  }
  return sl_qf_block_exp_fast(absmax, rule, SL_E4M3_MAX, SL_E4M3_EMAX);
}
/* The same for the NVFP4 block scale's absmax / 6 (r = RN(1/6) = 0x3e2aaaab), same range. */
#define SL_QF_R6 0x1.555556p-3f
SL_QF_FN float sl_qf_div6_fast(float a) {
  float q = SL_QF_MUL(a, SL_QF_R6);
  return fmaf(fmaf(-q, SL_E2M1_MAX, a), SL_QF_R6, q);
}
/* sl_f32_to_e2m1 with the subnormal step as one FMA: 2|x| is exact, so
 * fma(|x|, 2, 1.5*2^23) = RN(RN(2|x|) + 1.5*2^23), the reference's two operations. */
SL_QF_FN uint8_t sl_f32_to_e2m1_fast(float f) {
  uint32_t u = sl_qf_bits(f), sign = (u >> 28) & 0x8u, a = u & 0x7fffffffu;
  uint32_t r = a + 0x1fffffu + ((a >> 22) & 1u);
  uint32_t normal = (r >> 22) - 252u;
  normal = normal > 7u ? 7u : normal;
  uint32_t sub = sl_qf_bits(fmaf(sl_qf_float(a), 2.0f, 12582912.0f)) - 0x4b400000u;
  return (uint8_t)(sign | (a >= 0x3f800000u ? normal : sub));
}

/* NVFP4 dequantization's division by the tensor scale with sl_qf_div_fast: for
 * global_scale in [2^-60, 2^60] (r = RN(1/global_scale) normal) and the exact products
 * e2m1 * decode(sf) (0 or >= 2^-10), the remainder never underflows, so the quotient is the
 * division's bit for bit (test: every product against random scales at every exponent). */
#define SL_QF_DEQ_FAST_MIN 0x1p-60f
#define SL_QF_DEQ_FAST_MAX 0x1p60f
SL_QF_FN int sl_qf_deq_fast_ok(float global_scale) {
  return global_scale >= SL_QF_DEQ_FAST_MIN && global_scale <= SL_QF_DEQ_FAST_MAX;
}

/* E2M1 nibble (sign in bit 3) of RN(x * mul) for mul > 0, as sl_f32_to_e2m1(SL_QF_MUL(x, mul)):
 * |x * mul| = |x| * mul exactly (RN is symmetric; a free |.| operand modifier on the GPU) and
 * the sign is x's; the code's low 3 bits are taken before the sign goes in, so the FMA's high
 * bits need no separate mask. */
SL_QF_FN uint32_t sl_qf_e2m1_scaled(float x, float mul) {
  uint32_t u = sl_qf_bits(x), a = sl_qf_bits(SL_QF_MUL(sl_qf_abs(x), mul));
  uint32_t r = a + 0x1fffffu + ((a >> 22) & 1u);
  uint32_t normal = (r >> 22) - 252u;
  normal = normal > 7u ? 7u : normal;
  uint32_t sub = sl_qf_bits(fmaf(sl_qf_float(a), 2.0f, 12582912.0f)); /* code in bits 0..1 */
  uint32_t c = a >= 0x3f800000u ? normal : sub;
  return (c & 7u) | ((u >> 28) & 8u);
}

/* E2M1 magnitude code of y >= +0 (finite or +Inf, never NaN) by one rounding add, as
 * sl_f32_to_e2m1(y) for y >= 0; the code is in bits 0..2 of the result, bits 3..21 are zero
 * and bits 22..31 are not (callers mask or pack by shifts that leave them out).
 * The E2M1 grid is "multiples of a step": step 0.5 on [0, 2) (subnormals 0, 0.5 and the
 * normals 1, 1.5 alike), 1 on [2, 4), 2 on [4, 8); and code = n + 2k where n = y / step
 * rounded and k = 0, 1, 2 on those ranges (n is 0..4, 2..4, 2..3; n = 4 is the next range's
 * first value, whose code is again n + 2k). Ties to even n are ties to the even code (2k is
 * even). So with yc = min(y, 6) (6 is code 7: saturation), E = max(exponent(yc), 0) (k = E,
 * 2^E * 0.5 = step) and M = 1.5 * 2^(E + 22) + 2k (ulp(M) = step; 2k ulps added, an even
 * count), RN(yc + M) = M + n * step exactly (yc + M stays in M's binade: yc < 2^(E+1)), i.e.
 * bits(RN(yc + M)) = bits(1.5 * 2^(E+22)) + 2k + n, whose low 22 bits are the code.
 * GPU cost: FMNMX, IMNMX, SHF, IMAD, FADD (5; the mul by the block scale is a 6th)
 * instead of ~9 for sl_qf_e2m1_scaled's normal/subnormal select. Exhaustive test:
 * tests/unit/test_quant_fast.c (every fp32 in [2^-5, 8], sampled mantissas elsewhere). */
SL_QF_FN uint32_t sl_qf_e2m1_mag_raw(float y) {
  float yc = y < 6.0f ? y : 6.0f;
  uint32_t b = sl_qf_bits(yc);
  uint32_t e = (b > 0x3f800000u ? b : 0x3f800000u) >> 23; /* E + 127, E = 0..2 */
  /* (E + 127) << 23 | 0x400000 is 1.5 * 2^E, plus 22 in the exponent and 2E = 2(e - 127) */
  uint32_t m = e * 0x800002u + (0x0b400000u - 254u);
  return sl_qf_bits(SL_QF_ADD(yc, sl_qf_float(m)));
}

/* Byte permute (CUDA __byte_perm / PTX prmt.b32 without the sign-replicate modes): byte i of
 * the result is byte (sel >> 4i) & 7 of the 8 bytes {b:a} (a's bytes are 0..3). */
SL_QF_FN uint32_t sl_qf_prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __byte_perm(a, b, sel);
#else
  uint64_t x = ((uint64_t)b << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; i++)
    d |= (uint32_t)((x >> (8 * ((sel >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return d;
#endif
}

/* Bitwise select (a & m) | (b & ~m): one 3-input logic instruction on the GPU (the compiler
 * splits it in two when it simplifies the mask of a shifted operand). */
SL_QF_FN uint32_t sl_qf_bitsel(uint32_t a, uint32_t b, uint32_t m) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  uint32_t d; /* lut of (a & c) | (b & ~c) at a = 0xf0, b = 0xcc, c = 0xaa: 0xe4 */
  asm("lop3.b32 %0, %1, %2, %3, 0xe4;" : "=r"(d) : "r"(a), "r"(b), "r"(m));
  return d;
#else
  return (a & m) | (b & ~m);
#endif
}

/* Eight E2M1 codes (nibble j = sl_f32_to_e2m1(x_j * mul), mul > 0 finite, no x_j NaN/Inf) of
 * the 16-bit elements (bf16 or f16) in words w[0..3] (element 2i in the low half of w[i]),
 * x[0..7] being their fp32 values. The magnitudes by sl_qf_e2m1_mag_raw of |x| * mul (|x| * mul
 * = |x * mul| exactly: RN is symmetric), packed 4 at a time by (acc << 4) + raw, which keeps
 * each raw's bits above 21 out of the group's 16 bits, and the two groups merged by one byte
 * permute. The signs come from the words by byte permutes: bytes 1 and 3 of each word hold the
 * sign bits (bit 7); p, q gather them for elements 0..3 and 4..7; the odd elements' bytes go to
 * bit 7 of bytes 0..3 (nibbles 1, 3, 5, 7: their bit 3), the even elements' likewise shifted
 * right by 4 (nibbles 0, 2, 4, 6). GPU: ~1.75 instructions per element for packing and signs
 * instead of ~4 (mask, sign shift, or, shift-or), 6 for the magnitude. */
SL_QF_FN uint32_t sl_qf_e2m1_pack16x8(const float *x, const uint32_t *w, float mul) {
  uint32_t r[8];
  for (int j = 0; j < 8; j++)
    r[j] = sl_qf_e2m1_mag_raw(SL_QF_MUL(sl_qf_abs(x[j]), mul));
  uint32_t lo = r[3], hi = r[7];
  for (int j = 2; j >= 0; j--) {
    lo = (lo << 4) + r[j];
    hi = (hi << 4) + r[j + 4];
  }
  uint32_t c = sl_qf_prmt(lo, hi, 0x5410u);
  uint32_t p = sl_qf_prmt(w[0], w[1], 0x7531u), q = sl_qf_prmt(w[2], w[3], 0x7531u);
  c |= sl_qf_prmt(p, q, 0x7531u) & 0x80808080u;
  c |= (sl_qf_prmt(p, q, 0x6420u) >> 4) & 0x08080808u;
  return c;
}
/* The same for four fp32 elements (x[j] = the float of w[j]): 16 bits of codes. */
SL_QF_FN uint32_t sl_qf_e2m1_pack32x4(const float *x, const uint32_t *w, float mul) {
  uint32_t r[4];
  for (int j = 0; j < 4; j++)
    r[j] = sl_qf_e2m1_mag_raw(SL_QF_MUL(sl_qf_abs(x[j]), mul));
  uint32_t c = r[3];
  for (int j = 2; j >= 0; j--)
    c = (c << 4) + r[j];
  c &= 0xffffu;
  c |= (w[0] >> 28) & 0x8u;
  c |= (w[1] >> 24) & 0x80u;
  c |= (w[2] >> 20) & 0x800u;
  c |= (w[3] >> 16) & 0x8000u;
  return c;
}

/* Packed bf16x2 arithmetic for sl_qf_e2m1_pack_bf16x2 (device: one sm_90+ instruction each;
 * host: the same per half on fp32, then round-to-nearest-even to bf16). Non-negative, finite
 * operands only (the encoder's). */
SL_QF_FN uint32_t sl_qf_bf16_rne(float f) { /* fp32 -> bf16 bits, RNE (finite f) */
  uint32_t u = sl_qf_bits(f);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
SL_QF_FN uint32_t sl_qf_bf16x2_mul(uint32_t a, uint32_t b) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return sl_qf_bf16_rne(sl_qf_float(a << 16) * sl_qf_float(b << 16)) |
         sl_qf_bf16_rne(sl_qf_float(a & 0xffff0000u) * sl_qf_float(b & 0xffff0000u)) << 16;
#endif
}
SL_QF_FN uint32_t sl_qf_bf16x2_add(uint32_t a, uint32_t b) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  uint32_t d;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return sl_qf_bf16_rne(sl_qf_float(a << 16) + sl_qf_float(b << 16)) |
         sl_qf_bf16_rne(sl_qf_float(a & 0xffff0000u) + sl_qf_float(b & 0xffff0000u)) << 16;
#endif
}
/* Per-half unsigned max (for non-negative bf16 the bit order is the value order: also the min
 * below is one on the bits). */
SL_QF_FN uint32_t sl_qf_u16x2_max(uint32_t a, uint32_t b) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  uint32_t d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  uint32_t lo = (a & 0xffffu) > (b & 0xffffu) ? (a & 0xffffu) : (b & 0xffffu);
  uint32_t hi = (a >> 16) > (b >> 16) ? (a >> 16) : (b >> 16);
  return lo | hi << 16;
#endif
}
SL_QF_FN uint32_t sl_qf_u16x2_min(uint32_t a, uint32_t b) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  uint32_t d;
  asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  uint32_t lo = (a & 0xffffu) < (b & 0xffffu) ? (a & 0xffffu) : (b & 0xffffu);
  uint32_t hi = (a >> 16) < (b >> 16) ? (a >> 16) : (b >> 16);
  return lo | hi << 16;
#endif
}

/* Eight E2M1 codes (nibble j = sl_f32_to_e2m1(x_j * 2^-e)) of the bf16 elements in words w[0..3]
 * (element 2i in the low half of w[i]) under a power-of-two multiplier given as the bf16 pair
 * m2 = 2^-e | 2^-e << 16 (MXFP4 of bf16: e in [-127, 126], so 2^-e is a normal bf16), for blocks whose
 * |x| 2^-e are < 8 (the MX rules guarantee it). Two elements per instruction:
 *  - y = |x| 2^-e in bf16 is exact (8 significant bits scaled by a power of two; results below
 *    2^-126 may lose bits or flush, but every y < 0.25 has code 0), clamped to 6 (saturation);
 *  - the magic add of sl_qf_e2m1_mag_raw in bf16: M = 1.5 * 2^(E+6) has ulp 2^(E-1), the step of
 *    the E2M1 grid on [2^E, 2^(E+1)) (E = 0 for y < 2, 1, 2), so RN(y + M) = M + n ulp with
 *    n = RN_even(y / step), and 2E added to M's bits makes the low nibble n + 2E = the code. M's
 *    bits from E's: eb = the exponent field of max(y, 1) (per half), M = eb + (6 << 7) + 0x40 +
 *    2(eb >> 7) - 254 = eb + (eb >> 6) + 0x242 per half (no carry crosses the halves);
 *  - nibbles: the code bytes of the 8 halves gathered by 2 permutes, nibble pairs merged by a
 *    shift and one 3-input logic op per 4 codes, a last permute (7 per packet; was 15 with a
 *    shift-mask-or per word); the signs from the words as sl_qf_e2m1_pack16x8.
 * ~4 instructions per element (was ~8.5 with the fp32 encoder).
 * m2 for exponent e: sl_qf_e2m1_m2 (one multiply-add on the GPU). */
SL_QF_FN uint32_t sl_qf_e2m1_m2(int e) { /* (127 - e) << 7 in both halves; 127 - e in [1, 254] */
  return (uint32_t)(127 - e) * 0x00800080u;
}
SL_QF_FN uint32_t sl_qf_e2m1_pack_bf16x2(const uint32_t *w, uint32_t m2) {
  uint32_t s[4];
  for (int i = 0; i < 4; i++) {
    uint32_t y = sl_qf_u16x2_min(sl_qf_bf16x2_mul(w[i] & 0x7fff7fffu, m2), 0x40c040c0u); /* min(y, 6) */
    uint32_t eb = sl_qf_u16x2_max(y, 0x3f803f80u) & 0x7f807f80u;
    uint32_t r = sl_qf_bf16x2_add(y, eb + (eb >> 6) + 0x02420242u);
    s[i] = r; /* code 2i in bits 0..3, code 2i+1 in bits 16..19, M's bits around them */
  }
  /* bytes 0 and 2 of each word (low nibble: a code, high nibble: garbage), 4 codes per word;
   * then nibble pairs: byte 0 = code | (byte 1's code << 4) (the high nibble of x >> 4's byte 0
   * is x's bits 8..11), the same for byte 2; bytes 1 and 3 are garbage, dropped by the permute */
  uint32_t a = sl_qf_prmt(s[0], s[1], 0x6420u), b = sl_qf_prmt(s[2], s[3], 0x6420u);
  a = sl_qf_bitsel(a, a >> 4, 0x0f0f0f0fu);
  b = sl_qf_bitsel(b, b >> 4, 0x0f0f0f0fu);
  uint32_t c = sl_qf_prmt(a, b, 0x6420u);
  uint32_t p = sl_qf_prmt(w[0], w[1], 0x7531u), q = sl_qf_prmt(w[2], w[3], 0x7531u);
  c |= sl_qf_prmt(p, q, 0x7531u) & 0x80808080u;
  c |= (sl_qf_prmt(p, q, 0x6420u) >> 4) & 0x08080808u;
  return c;
}

/* Dequantization side of E2M1 by byte permutes. |e2m1| of code m (0..7) is the bf16 value
 * whose high byte is {00, 3f, 3f, 3f, 40, 40, 40, 40}[m] and low byte {00, 00, 80, c0, 00, 40,
 * 80, c0}[m] (0, 0.5, 1, 1.5, 2, 3, 4, 6): two 8-byte tables a byte permute indexes with the
 * code nibbles (sign masked off) 4 at a time, and two more permutes interleave them into bf16
 * pairs: p[i] = |e2m1(code 2i)| | |e2m1(code 2i+1)| << 16 as bf16, for the 8 codes of c (nibble
 * j = element j). 1 instruction per element instead of the select chain (~6 and an I2F). */
SL_QF_FN void sl_qf_e2m1_mag8_bf16(uint32_t c, uint32_t *p) {
  uint32_t sel = c & 0x77777777u;
  for (int h = 0; h < 2; h++, sel >>= 16) {
    uint32_t lo = sl_qf_prmt(0xc0800000u, 0xc0804000u, sel), hi = sl_qf_prmt(0x3f3f3f00u, 0x40404040u, sel);
    p[2 * h] = sl_qf_prmt(lo, hi, 0x5140u);
    p[2 * h + 1] = sl_qf_prmt(lo, hi, 0x7362u);
  }
}
/* Signs of the 8 codes of c for 16-bit output pairs: bit 15 of s[i] is element 2i's sign (code
 * bit 8i+3, moved to a byte's bit 7 by c << 4) and bit 31 element 2i+1's (code bit 8i+7); the
 * other bits are not masked (callers AND with 0x80008000). One permute per pair. */
SL_QF_FN void sl_qf_e2m1_sign8(uint32_t c, uint32_t *s) {
  uint32_t d = c << 4;
  for (uint32_t i = 0; i < 4; i++)
    s[i] = sl_qf_prmt(d, c, ((4u + i) << 12) | (i << 4));
}

/* The 16-bit (bf16, or f16 where f16 != 0) dequantized values of the 8 E2M1 magnitudes under one
 * block scale, from two of them: h = RN16(q1) and t = RN16(q3), where q1 and q3 are the
 * reference's fp32 results for the magnitudes 1.0 and 3.0 (MXFP4: 2^E and 3 * 2^E; NVFP4: d / gs
 * and 3d / gs, d = decode(sf), both exact products over gs, one rounding). Every other magnitude
 * is one of them times 2^j (0.5, 2, 4 = 1.0 * 2^-1, 2^1, 2^2; 1.5, 6 = 3.0 * 2^-1, 2^1), and
 * while no value leaves the normal range, RN32(2^j y) = 2^j RN32(y) and RN16(2^j q) =
 * 2^j RN16(q): the result's bits are h or t plus j in the exponent field. The fp32 quotients
 * stay normal wherever the 16-bit values do (8-bit exponents either way; for f16 far inside).
 * So with h's exponent field in [3, 250] (bf16) / [3, 26] (f16) every value of the entry is
 * normal and finite: 0.5 * q1 keeps a normal exponent and 6 * q1 < 8 * 2^(E + 1) does not
 * overflow (t's exponent is at most h's + 2). Outside that range (and for h = 0, NaN, or a sign
 * bit) this returns 0 and the caller takes the reference's decode. The entry is the two 8-byte
 * permute tables kernels/quant.cu decodes with: e[0..1] the low bytes of magnitudes 0..7, e[2..3]
 * the high bytes (magnitude 0 is +0). ~10 integer instructions where the 8 values took 8
 * multiplies (MXFP4) or 8 quotients (NVFP4); tests/unit/test_quant_fast.c checks every scale byte
 * against sl_qf_decode (NVFP4: over random tensor scales in the fast range and its ends). */
SL_QF_FN int sl_qf_fp4_entry16(uint32_t h, uint32_t t, int f16, uint32_t *e) {
  const uint32_t mb = f16 ? 10u : 7u, one = 1u << mb, emax = f16 ? 26u : 250u;
  if ((h >> mb) - 3u > emax - 3u) return 0;
  const uint32_t pk = h | (t << 16);
  const uint32_t w0 = (pk << 16) - (one << 16); /* {0, 0.5}: +0, h - one */
  const uint32_t w1 = pk - (one << 16);         /* {1, 1.5}: h, t - one */
  const uint32_t w2 = pk + one;                 /* {2, 3}: h + one, t */
  const uint32_t w3 = pk + 2u * one + (one << 16); /* {4, 6}: h + 2 one, t + one */
  e[0] = sl_qf_prmt(w0, w1, 0x6420u);
  e[1] = sl_qf_prmt(w2, w3, 0x6420u);
  e[2] = sl_qf_prmt(w0, w1, 0x7531u);
  e[3] = sl_qf_prmt(w2, w3, 0x7531u);
  return 1;
}

/* The scale stored for a non-finite block. */
SL_QF_FN void sl_qf_nan_scale(int fmt, float *scale_f32, uint8_t *scale_u8) {
  *scale_f32 = sl_qf_float(0x7fc00000u);
  *scale_u8 = fmt == SL_QFMT_NVFP4 ? (uint8_t)SL_E4M3_NAN : (uint8_t)SL_E8M0_NAN;
}
SL_QF_FN uint8_t sl_qf_nan_code(int fmt) {
  return sl_qfmt_is_fp4(fmt) ? 0 : (uint8_t)SL_E4M3_NAN;
}

/* Dequantize one code: the decoded value times the block's decode scale, one rounding.
 * NVFP4: (e2m1 * decode(sf)) is exact in fp32, then / global_scale rounds once. */
SL_QF_FN float sl_qf_decode(int fmt, uint8_t code, float scale_f32, uint8_t scale_u8, float global_scale) {
  if (fmt == SL_QFMT_FP8_GROUP) return SL_QF_MUL(sl_e4m3_to_f32(code), scale_f32);
  if (fmt == SL_QFMT_MXFP8) return SL_QF_MUL(sl_e4m3_to_f32(code), sl_e8m0_to_f32(scale_u8));
  if (fmt == SL_QFMT_MXFP4) return SL_QF_MUL(sl_e2m1_to_f32(code), sl_e8m0_to_f32(scale_u8));
  return SL_QF_DIV(SL_QF_MUL(sl_e2m1_to_f32(code), sl_e4m3_to_f32(scale_u8)), global_scale);
}

/* ---- Scale layouts ------------------------------------------------------------------------
 * LINEAR: scales[row * cols + col], cols = hidden / block.
 * SWIZZLED: the "block scaling factors layout" of cuBLAS (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0
 * / VEC16_UE4M3) and CUTLASS's Sm1xxBlockScaledConfig, read by Blackwell block-scaled GEMMs:
 * the [rows, cols] scale matrix is padded to rows a multiple of 128 and cols a multiple of 4
 * (the padding must be zero) and cut into 128x4 tiles of 512 bytes, stored tile-row-major
 * (tile (rt, ct) at (rt * col_tiles + ct) * 512). Inside a tile, row r (0..127) and col c (0..3)
 * sit at (r % 32) * 16 + (r / 32) * 4 + c: 32 lines of 16 bytes, line i holding rows i, i+32,
 * i+64, i+96 with their 4 columns each. Equivalently (vLLM's swizzle_blockscale): view the
 * padded matrix as [rt, 4, 32, ct, 4] and permute to [rt, ct, 32, 4, 4]. Byte scales only
 * (FP8_GROUP's fp32 scales are linear). */
SL_QF_FN int sl_qf_round_up(int x, int m) {
  return (x + m - 1) / m * m;
}
SL_QF_FN size_t sl_qf_swizzled_offset(int row, int col, int cols) {
  size_t col_tiles = (size_t)((cols + 3) / 4);
  return (((size_t)(row >> 7) * col_tiles + (size_t)(col >> 2)) << 9) + (size_t)((row & 31) << 4) +
         (size_t)(((row >> 5) & 3) << 2) + (size_t)(col & 3);
}
SL_QF_FN size_t sl_qf_scale_offset(int layout, int row, int col, int cols) {
  return layout == SL_QLAYOUT_SWIZZLED ? sl_qf_swizzled_offset(row, col, cols) : (size_t)row * cols + col;
}
/* Number of scale entries (bytes for byte scales) the layout occupies. */
SL_QF_FN size_t sl_qf_scale_count(int layout, int rows, int cols) {
  if (layout == SL_QLAYOUT_SWIZZLED) return (size_t)sl_qf_round_up(rows, 128) * (size_t)sl_qf_round_up(cols, 4);
  return (size_t)rows * cols;
}

/* ---- A reproducible expf ------------------------------------------------------------------
 * The router's selection and weights must agree bit for bit between the CPU and the GPU, and
 * libm's expf and CUDA's expf differ in the last bit for some inputs. This one uses only
 * explicit fmaf (fused on both sides), exact scaling by 2^n and one final product, so both
 * backends compute the same bits. Accuracy: about 2 ulp on [-87, 88]; below -87 it returns
 * 0 (x < -87.3 underflows to subnormals we don't need), above 88.7 +Inf. */
SL_QF_FN float sl_qf_expf(float x) {
  if (!(x == x)) return x;
  if (x > 88.72f) return sl_qf_float(0x7f800000u);
  if (x < -87.0f) return 0.0f;
  float n = fmaf(x, 1.44269504f, 12582912.0f); /* round(x / ln2) via the 1.5*2^23 trick */
  n = n - 12582912.0f;
  float r = fmaf(n, -0.693145752f, x); /* Cody-Waite: ln2 = hi + lo */
  r = fmaf(n, -1.42860677e-6f, r);
  float p = 1.98756912e-4f; /* minimax for e^r on [-ln2/2, ln2/2] */
  p = fmaf(p, r, 1.39819994e-3f);
  p = fmaf(p, r, 8.33345205e-3f);
  p = fmaf(p, r, 4.16657962e-2f);
  p = fmaf(p, r, 1.66666672e-1f);
  p = fmaf(p, r, 5.0e-1f);
  float r2 = SL_QF_MUL(r, r);
  p = fmaf(p, r2, r);
  p = SL_QF_ADD(p, 1.0f);
  int ni = (int)n; /* -126..128 */
  if (ni > 127) return SL_QF_MUL(SL_QF_MUL(p, 2.0f), sl_qf_pow2(ni - 1));
  return SL_QF_MUL(p, sl_qf_pow2(ni));
}
/* 1 / (1 + e^-x), reproducible. */
SL_QF_FN float sl_qf_sigmoidf(float x) {
  return SL_QF_DIV(1.0f, SL_QF_ADD(1.0f, sl_qf_expf(-x)));
}

#endif
