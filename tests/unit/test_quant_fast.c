/* Unit tests of the faster equivalents in kernels/quant_formats.h (the GPU quantizers' inner
 * loops): each must give exactly the reference's result. Exhaustive where the claim is made:
 * every bf16 and every f16 value, every fp32 mantissa at several exponents, plus random fp32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "sl_test.h"

static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Block exponent: every rule and max code, over all bf16 absmax, every mantissa at the
 * exponents where the fast path starts and ends and at a few inside, and random fp32. */
static void check_exp(float a, size_t *bad) {
  static const struct {
    int rule;
    float max_code;
    int emax;
  } r[] = {{SL_QRULE_CEIL, SL_E4M3_MAX, SL_E4M3_EMAX},
           {SL_QRULE_CEIL, SL_E2M1_MAX, SL_E2M1_EMAX},
           {SL_QRULE_FLOOR, SL_E4M3_MAX, SL_E4M3_EMAX},
           {SL_QRULE_FLOOR, SL_E2M1_MAX, SL_E2M1_EMAX}};
  for (int i = 0; i < 4; i++) {
    int want = sl_qf_block_exp(a, r[i].rule, r[i].max_code, r[i].emax);
    int got = sl_qf_block_exp_fast(a, r[i].rule, r[i].max_code, r[i].emax);
    if (got != want && (*bad)++ < 5)
      print_error("block exp rule %d max %g absmax %a (0x%08x): fast %d, reference %d\n", r[i].rule,
                  (double)r[i].max_code, (double)a, bits_of(a), got, want);
  }
}

static void test_block_exp_fast(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  for (uint32_t h = 0; h < 0x7f80u; h++, n++) /* every finite non-negative bf16 */
    check_exp(f32_of(h << 16), &bad);
  static const int exps[] = {-127, -101, -100, -99, -1, 0, 1, 9, 126, 127};
  for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++)
    for (uint32_t m = 0; m < (1u << 23); m += (exps[e] == 0 || exps[e] == -100 ? 1u : 7u), n++)
      check_exp(f32_of(((uint32_t)(exps[e] + 127) << 23) | m), &bad);
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 1000000; i++, n++)
    check_exp(f32_of((uint32_t)(sl_test_rand_u64(&rng) % 0x7f800000u)), &bad);
  check_exp(f32_of(0x7f7fffffu), &bad);
  check_exp(0.0f, &bad);
  if (bad) fail_msg("sl_qf_block_exp_fast differs from sl_qf_block_exp on %zu of %zu inputs", bad, n);
}

/* The FP8 IEEE element rule: for a scale s = RN(absmax / 448) >= SL_QF_DIV_FAST_MIN and every
 * x with |x| <= absmax, sl_qf_div_fast gives the division's quotient bit for bit wherever
 * |x / s| >= 2^-12, and the same E4M3 code everywhere. */
static size_t check_div(float absmax, const float *xs, size_t nx, size_t *n) {
  float s = absmax / SL_E4M3_MAX;
  if (!(s >= SL_QF_DIV_FAST_MIN)) return 0;
  float r = 1.0f / s;
  size_t bad = 0;
  for (size_t i = 0; i < nx; i++) {
    float x = xs[i];
    if (!(fabsf(x) <= absmax)) break; /* xs sorted by magnitude */
    for (int sg = 0; sg < 2; sg++, x = -x) {
      float want = x / s, got = sl_qf_div_fast(x, s, r);
      (*n)++;
      bool ok = fabsf(want) >= 0x1p-12f ? bits_of(got) == bits_of(want) : sl_f32_to_e4m3(got) == sl_f32_to_e4m3(want);
      /* the GPU's signed variant: its code with x's sign OR'ed in is the same code */
      uint8_t sgn = (uint8_t)((bits_of(x) >> 24) & 0x80u);
      ok = ok && (uint8_t)(sl_f32_to_e4m3(sl_qf_div_fast_signed(x, s, r)) | sgn) == sl_f32_to_e4m3(got);
      if (!ok && bad++ < 3)
        print_error("x %a / s %a (absmax %a): fast %a, division %a\n", (double)x, (double)s, (double)absmax,
                    (double)got, (double)want);
    }
  }
  return bad;
}

/* Every non-negative finite bf16 / f16 value as fp32, in increasing order (the bit patterns' order): xs[h] is the value
 * of pattern h. xs holds 0x8000 floats; returns the count. */
static size_t bf16_values(float *xs) {
  size_t n = 0;
  for (uint32_t h = 0; h < 0x7f80u; h++)
    xs[n++] = f32_of(h << 16);
  return n;
}
static size_t f16_values(float *xs) {
  size_t n = 0;
  for (uint32_t h = 0; h < 0x7c00u; h++)
    xs[n++] = (float)ldexp((h >> 10) ? 1.0 + (h & 1023) / 1024.0 : (h & 1023) / 1024.0,
                           (h >> 10) ? (int)(h >> 10) - 15 : -14);
  return n;
}

static void test_div_fast(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  /* bf16: every non-negative finite x (signs tried both) against every bf16 absmax whose
   * scale is in range, at the exponents of typical activations and at the range ends. */
  float *xs = malloc(sizeof(float) * 0x8000u);
  assert_non_null(xs);
  size_t nx = bf16_values(xs);
  for (uint32_t h = 0; h < 0x7f80u; h++) {
    int e = (int)(h >> 7) - 127;
    if (!((e >= -56 && e <= -50) || (e >= -8 && e <= 12) || e >= 120)) continue;
    bad += check_div(f32_of(h << 16), xs, nx, &n);
  }
  /* f16: every finite x against every f16 absmax (all are in range). */
  nx = f16_values(xs);
  for (uint32_t h = 0x0400u; h < 0x7c00u; h += ((h >> 10) >= 14 && (h >> 10) <= 16) ? 1u : 5u)
    bad += check_div(xs[h], xs, nx, &n);
  /* fp32: random absmax at every scale exponent, random x below it, and the exact top. */
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 4000000; i++) {
    int e = (int)(sl_test_rand_u64(&rng) % 183) - 64; /* scale exponents -64..118 */
    float absmax = ldexpf(1.0f + (float)(sl_test_rand_u64(&rng) % (1u << 23)) * 0x1p-23f, e + 9);
    float x[2] = {absmax * (float)((sl_test_rand_u64(&rng) >> 11) * 0x1p-53), absmax};
    if (fabsf(x[0]) > fabsf(x[1])) x[0] = x[1];
    if (sl_test_rand_u64(&rng) & 1) x[0] = ldexpf(x[0], -(int)(sl_test_rand_u64(&rng) % 40));
    bad += check_div(absmax, x, 2, &n);
  }
  free(xs);
  if (bad) fail_msg("sl_qf_div_fast differs from the division on %zu of %zu quotients", bad, n);
}

/* The 2-instruction FP8 IEEE element rule of 16-bit inputs (sl_qf_div16_fast): for s = RN(absmax / 448) of an absmax
 * >= SL_QF_DIV448_MIN (the GPU's hot branch), r = RD(1 / s) (the GPU's sl_kq_rcp_rd, which tests/gpu/test_quant.c
 * compares with __frcp_rd) and every x with |x| <= absmax, the E4M3 code is the division's, sign and zeros included
 * (r_lo >= 0: counted in *neg_lo, which must stay 0). xs: the dtype's non-negative finite values sorted by magnitude.
 * SL_TEST_EXHAUSTIVE=1: every absmax of both dtypes. */
static float rcp_rd(float s) {
  float r = 1.0f / s; /* RN, then one step down where it is above 1 / s (the residual, exact in the FMA, < 0) */
  return fmaf(-s, r, 1.0f) < 0.0f ? nextafterf(r, 0.0f) : r;
}
static size_t check_div16(float absmax, const float *xs, size_t nx, size_t *n, size_t *neg_lo) {
  if (!(absmax >= SL_QF_DIV448_MIN)) return 0;
  const float s = absmax / SL_E4M3_MAX, r = rcp_rd(s), r_lo = sl_qf_rcp_lo(s, r);
  if (r_lo < 0.0f) (*neg_lo)++;
  size_t bad = 0;
  for (size_t i = 0; i < nx && xs[i] <= absmax; i++) {
    float x = xs[i];
    for (int sg = 0; sg < 2; sg++, x = -x) {
      const uint8_t want = sl_f32_to_e4m3(x / s), got = sl_f32_to_e4m3(sl_qf_div16_fast(x, r, r_lo));
      (*n)++;
      if (got != want && bad++ < 3)
        print_error("x %a / s %a (absmax %a): code 0x%02x, division's 0x%02x\n", (double)x, (double)s, (double)absmax,
                    got, want);
    }
  }
  return bad;
}

static void test_div16_fast(void **state) {
  (void)state;
  size_t bad = 0, n = 0, neg_lo = 0;
  float *xs = malloc(sizeof(float) * 0x8000u);
  assert_non_null(xs);
  /* bf16: every x against every absmax mantissa at the exponents of typical activations, at the hot branch's lower
   * end and from 2^100 up (where r_lo leaves the normal range). */
  size_t nx = bf16_values(xs);
  const bool all = getenv("SL_TEST_EXHAUSTIVE") != NULL; /* every absmax of both dtypes (~2 G quotients, ~30 s) */
  for (uint32_t h = 0; h < 0x7f80u; h++) {
    const int e = (int)(h >> 7) - 127;
    if (all || (e >= -56 && e <= -50) || (e >= -8 && e <= 12) || e >= 100)
      bad += check_div16(xs[h], xs, nx, &n, &neg_lo);
  }
  /* f16: every x against every absmax (all are >= SL_QF_DIV448_MIN), all exponents */
  nx = f16_values(xs);
  for (uint32_t h = 0; h < 0x7c00u; h += all || ((h >> 10) >= 13 && (h >> 10) <= 17) || (h >> 10) >= 29 ? 1u : 3u)
    bad += check_div16(xs[h], xs, nx, &n, &neg_lo);
  free(xs);
  if (bad) fail_msg("sl_qf_div16_fast's code differs from the division's on %zu of %zu quotients", bad, n);
  assert_int_equal(neg_lo, 0);
}

/* E2M1: every fp32 with exponent in [-4, 3] (all rounding boundaries), random others, and
 * the specials. */
static void test_e2m1_fast(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  for (uint32_t e = 123; e <= 130; e++)
    for (uint32_t m = 0; m < (1u << 23); m++)
      for (uint32_t sg = 0; sg < 2; sg++, n++) {
        float f = f32_of((sg << 31) | (e << 23) | m);
        if (sl_f32_to_e2m1_fast(f) != sl_f32_to_e2m1(f) && bad++ < 5)
          print_error("e2m1 %a: fast %d, reference %d\n", (double)f, sl_f32_to_e2m1_fast(f), sl_f32_to_e2m1(f));
      }
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 4000000; i++, n++) {
    float f = f32_of((uint32_t)sl_test_rand_u64(&rng));
    if (sl_f32_to_e2m1_fast(f) != sl_f32_to_e2m1(f) && bad++ < 5)
      print_error("e2m1 %a: fast %d, reference %d\n", (double)f, sl_f32_to_e2m1_fast(f), sl_f32_to_e2m1(f));
  }
  static const uint32_t specials[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f7fffffu, 1u};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++, n++)
    if (sl_f32_to_e2m1_fast(f32_of(specials[i])) != sl_f32_to_e2m1(f32_of(specials[i]))) bad++;
  if (bad) fail_msg("sl_f32_to_e2m1_fast differs from sl_f32_to_e2m1 on %zu of %zu inputs", bad, n);
}

/* E2M1 of a scaled element: every finite bf16 x (both signs) against every power-of-two
 * multiplier an MX block can have and a spread of NVFP4-like multipliers, plus random fp32. */
static void check_e2m1_scaled(float x, float mul, size_t *bad) {
  uint32_t want = sl_f32_to_e2m1(x * mul), got = sl_qf_e2m1_scaled(x, mul);
  if (got != want && (*bad)++ < 5)
    print_error("e2m1(%a * %a): fast %u, reference %u\n", (double)x, (double)mul, got, want);
}

static void test_e2m1_scaled(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  uint64_t rng = sl_test_seed();
  for (int e = -127; e <= 127; e++) {
    float mul = ldexpf(1.0f, e);
    for (uint32_t h = 0; h < 0x10000u; h++, n++)
      if ((h & 0x7f80u) != 0x7f80u) check_e2m1_scaled(f32_of(h << 16), mul, &bad);
  }
  for (int i = 0; i < 64; i++) {
    float mul = f32_of(0x3f800000u + (uint32_t)(sl_test_rand_u64(&rng) % 0x800000u)) *
                ldexpf(1.0f, (int)(sl_test_rand_u64(&rng) % 40) - 20);
    for (uint32_t h = 0; h < 0x10000u; h++, n++)
      if ((h & 0x7f80u) != 0x7f80u) check_e2m1_scaled(f32_of(h << 16), mul, &bad);
  }
  for (int i = 0; i < 4000000; i++, n++) {
    float x = f32_of((uint32_t)sl_test_rand_u64(&rng) & 0xbfffffffu); /* |x| < 2 */
    float mul = ldexpf(1.0f + (float)(sl_test_rand_u64(&rng) % 8) * 0.125f, (int)(sl_test_rand_u64(&rng) % 125) - 4);
    check_e2m1_scaled(x, mul, &bad);
  }
  if (bad) fail_msg("sl_qf_e2m1_scaled differs from sl_f32_to_e2m1(x * mul) on %zu of %zu inputs", bad, n);
}

/* NVFP4 dequantization: every code x every E4M3 scale, divided by random tensor scales at
 * every exponent of the fast range and at its ends. */
static void test_deq_div_fast(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 12000; i++) {
    int e = (int)(sl_test_rand_u64(&rng) % 120) - 60;
    uint32_t m = (uint32_t)(sl_test_rand_u64(&rng) % 0x800000u);
    if (i < 8) m = (i & 1) ? 0x7fffffu : 0; /* the exact range ends */
    if (i < 8) e = (i & 2) ? 59 : -60;
    float gs = ldexpf(1.0f + (float)m * 0x1p-23f, e);
    assert_true(sl_qf_deq_fast_ok(gs));
    float r = 1.0f / gs;
    for (int c = 0; c < 16; c++)
      for (int sc = 0; sc < 0x7f; sc++, n++) {
        float p = sl_e2m1_to_f32((uint8_t)c) * sl_e4m3_to_f32((uint8_t)sc);
        float want = p / gs, got = sl_qf_div_fast(p, gs, r);
        if (bits_of(got) != bits_of(want) && bad++ < 5)
          print_error("%a / %a: fast %a, division %a\n", (double)p, (double)gs, (double)got, (double)want);
      }
  }
  assert_false(sl_qf_deq_fast_ok(0x1p-61f));
  assert_false(sl_qf_deq_fast_ok(0x1p61f));
  if (bad) fail_msg("sl_qf_div_fast (dequant) differs from the division on %zu of %zu quotients", bad, n);
}

/* The magic-add E2M1 encoder: every fp32 in [2^-5, 8] (every rounding boundary and the
 * saturation), every exponent below and above with a stride of mantissas and the ends,
 * +0 and +Inf; its low 22 bits must be the reference's code and bits 3..21 zero. */
static void check_e2m1_raw(float y, size_t *bad) {
  uint32_t raw = sl_qf_e2m1_mag_raw(y), want = sl_f32_to_e2m1(y);
  if ((raw & 0x3fffffu) != want && (*bad)++ < 5)
    print_error("e2m1 raw %a (0x%08x): got 0x%08x, reference %u\n", (double)y, bits_of(y), raw, want);
}

static void test_e2m1_mag_raw(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  for (uint32_t u = 0x3d000000u; u <= 0x41000000u; u++, n++) /* [2^-5, 8] */
    check_e2m1_raw(f32_of(u), &bad);
  for (uint32_t e = 0; e < 255; e++) {
    if (e >= 122 && e <= 129) continue;
    for (uint32_t m = 0; m < (1u << 23); m += 97u, n++)
      check_e2m1_raw(f32_of((e << 23) | m), &bad);
    check_e2m1_raw(f32_of((e << 23) | 0x7fffffu), &bad);
    check_e2m1_raw(f32_of((e << 23) | 1u), &bad);
    n += 2;
  }
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 2000000; i++, n++)
    check_e2m1_raw(f32_of((uint32_t)(sl_test_rand_u64(&rng) % 0x7f800001u)), &bad);
  check_e2m1_raw(0.0f, &bad);
  check_e2m1_raw(f32_of(0x7f800000u), &bad);
  check_e2m1_raw(f32_of(0x7f7fffffu), &bad);
  if (bad) fail_msg("sl_qf_e2m1_mag_raw differs from sl_f32_to_e2m1 on %zu of %zu inputs", bad, n);
}

/* The GPU's packet encoders (sl_qf_e2m1_pack16x8 / pack32x4: magnitudes, nibble packing and
 * signs by byte permutes) against the reference code by code: random bf16 and f16 packets
 * (both signs, zeros of both signs, values around every rounding boundary) under every MX
 * power-of-two multiplier and random NVFP4-like ones, and random fp32 packets. */
static uint32_t ref_nibbles(const float *x, int n, float mul) {
  uint32_t c = 0;
  for (int j = 0; j < n; j++)
    c |= (uint32_t)sl_f32_to_e2m1(x[j] * mul) << (4 * j);
  return c;
}

static void test_e2m1_pack(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 3000000; i++, n++) {
    float mul;
    if (i % 3 == 0)
      mul = ldexpf(1.0f, (int)(sl_test_rand_u64(&rng) % 60) - 30);
    else
      mul = f32_of(0x3f800000u + (uint32_t)(sl_test_rand_u64(&rng) % 0x800000u)) *
            ldexpf(1.0f, (int)(sl_test_rand_u64(&rng) % 40) - 20);
    int f16 = (i >> 1) & 1;
    uint32_t w[4];
    float x[8];
    for (int j = 0; j < 8; j++) {
      uint16_t h;
      uint64_t k = sl_test_rand_u64(&rng);
      if ((k & 7) == 0) { /* a rounding boundary 0.25 .. 5 (or 0, 6, 8) divided by mul, +-0..2 ulp */
        static const float b[] = {0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 8.0f};
        float t = b[(k >> 3) % 10] / mul;
        h = f16 ? sl_f32_to_f16(t) : sl_f32_to_bf16(t);
        h = (uint16_t)(h + (int)((k >> 8) % 5) - 2);
      } else {
        h = (uint16_t)(k >> 16);
      }
      if (f16 ? (h & 0x7c00u) == 0x7c00u : (h & 0x7f80u) == 0x7f80u) h &= 0x8000u; /* no NaN/Inf */
      x[j] = f16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
      if (j & 1)
        w[j / 2] |= (uint32_t)h << 16;
      else
        w[j / 2] = h;
    }
    uint32_t got = sl_qf_e2m1_pack16x8(x, w, mul), want = ref_nibbles(x, 8, mul);
    if (got != want && bad++ < 5)
      print_error("pack16x8 (%s, mul %a): got 0x%08x, reference 0x%08x (x0 %a)\n", f16 ? "f16" : "bf16", (double)mul,
                  got, want, (double)x[0]);
    float xf[4];
    uint32_t wf[4];
    for (int j = 0; j < 4; j++) {
      wf[j] = (uint32_t)sl_test_rand_u64(&rng);
      if ((wf[j] & 0x7f800000u) == 0x7f800000u) wf[j] &= 0x80000000u;
      if (j == 1) wf[j] = bits_of(1.25f / mul) ^ (wf[0] & 0x80000001u); /* a boundary, either sign */
      xf[j] = f32_of(wf[j]);
    }
    got = sl_qf_e2m1_pack32x4(xf, wf, mul);
    want = ref_nibbles(xf, 4, mul);
    if (got != want && bad++ < 5)
      print_error("pack32x4 (mul %a): got 0x%08x, reference 0x%08x\n", (double)mul, got, want);
  }
  if (bad) fail_msg("the E2M1 packet encoders differ from sl_f32_to_e2m1 on %zu of %zu packets", bad, n);
}

/* absmax / 448 by sl_qf_div448_fast: the constant is RN(1/448); every mantissa at the lowest
 * exponent of the fast range, the next, 0, and the two highest; random fp32 in the range. */
/* The packed bf16x2 MXFP4 encoder (sl_qf_e2m1_pack_bf16x2; host emulation of the bf16x2
 * instructions, whose rounding it states) against the reference: every bf16 pattern x (both
 * signs, zeros, subnormals; no NaN/Inf) under every MX exponent e in [-127, 126] for which
 * |x| 2^-e < 8 (the encoder's precondition, which the MX block exponents guarantee), 8 at a time
 * in both halves of a word. */
static void test_e2m1_pack_bf16x2(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  for (int e = -127; e <= 126; e++) {
    float mul = ldexpf(1.0f, -e);
    uint32_t m2 = (uint32_t)(127 - e) << 7;
    m2 |= m2 << 16;
    assert_int_equal(sl_qf_e2m1_m2(e), m2); /* the kernel's one multiply-add form */
    uint16_t xs[8];
    int k = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
      if ((h & 0x7f80u) == 0x7f80u) continue; /* NaN / Inf: blocks flagged before encoding */
      if (!(fabsf(sl_bf16_to_f32((uint16_t)h)) * mul < 8.0f)) continue;
      xs[k++] = (uint16_t)h;
      if (k < 8 && h != 0xffffu) continue;
      while (k < 8) xs[k++] = 0x8000u; /* -0 pads the last packet */
      k = 0;
      uint32_t w[4];
      float x[8];
      for (int rot = 0; rot < 2; rot++) { /* the same values in the other half of a word */
        for (int j = 0; j < 8; j++) {
          uint16_t v = xs[(j + rot) & 7];
          x[j] = sl_bf16_to_f32(v);
          if (j & 1)
            w[j / 2] |= (uint32_t)v << 16;
          else
            w[j / 2] = v;
        }
        uint32_t got = sl_qf_e2m1_pack_bf16x2(w, m2), want = ref_nibbles(x, 8, mul);
        n++;
        if (got != want && bad++ < 5)
          print_error("pack_bf16x2 (e %d): got 0x%08x, reference 0x%08x (x0 %a)\n", e, got, want, (double)x[0]);
      }
    }
  }
  if (bad) fail_msg("the bf16x2 E2M1 encoder differs from sl_f32_to_e2m1 on %zu of %zu packets", bad, n);
}

static void test_div448_fast(void **state) {
  (void)state;
  assert_true(bits_of(SL_QF_R448) == bits_of(1.0f / 448.0f));
  assert_true(bits_of(SL_QF_R6) == bits_of(1.0f / 6.0f));
  assert_true(bits_of(SL_QF_DIV448_MIN) == 0x24000000u);
  size_t bad = 0, n = 0;
  static const int exps[] = {-55, 0, 127};
  for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++)
    for (uint32_t m = 0; m < (1u << 23); m++, n++) {
      float a = f32_of(((uint32_t)(exps[e] + 127) << 23) | m);
      float want = a / SL_E4M3_MAX, got = sl_qf_div448_fast(a), want6 = a / SL_E2M1_MAX, got6 = sl_qf_div6_fast(a);
      if (bits_of(got) != bits_of(want) && bad++ < 5)
        print_error("%a / 448: fast %a, division %a\n", (double)a, (double)got, (double)want);
      if (bits_of(got6) != bits_of(want6) && bad++ < 5)
        print_error("%a / 6: fast %a, division %a\n", (double)a, (double)got6, (double)want6);
    }
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 1000000; i++, n++) {
    float a = f32_of(0x24000000u + (uint32_t)(sl_test_rand_u64(&rng) % (0x7f800000u - 0x24000000u)));
    if (bits_of(sl_qf_div448_fast(a)) != bits_of(a / SL_E4M3_MAX) && bad++ < 5)
      print_error("%a / 448: fast %a, division %a\n", (double)a, (double)sl_qf_div448_fast(a), (double)(a / 448.0f));
    if (bits_of(sl_qf_div6_fast(a)) != bits_of(a / SL_E2M1_MAX) && bad++ < 5)
      print_error("%a / 6: fast %a, division %a\n", (double)a, (double)sl_qf_div6_fast(a), (double)(a / 6.0f));
  }
  if (bad) fail_msg("sl_qf_div448_fast / sl_qf_div6_fast differ from the division on %zu of %zu inputs", bad, n);
}

/* The FP8 IEEE scale of tiny blocks without a division (sl_qf_div448_tiny, absmax < 2^-55): s = absmax / 448 bit
 * for bit, sx = s x1 x2 exactly, the CEIL exponent of sl_qf_block_exp_e4m3 the reference's, and the quotients of x x1 x2 by sx through sl_qf_div_fast equal x / s's wherever
 * |x / s| >= 2^-12 and give the same E4M3 code everywhere (check_div's test). Every fp32 subnormal absmax and every
 * mantissa at the exponents around s's normal boundary (448 * 2^-126) and at the top, for s; every bf16 absmax at
 * those exponents against every bf16 x up to it, and random fp32 pairs, for the quotients. */
static size_t check_tiny(float absmax, const float *xs, size_t nx, size_t *n) {
  float s, sx, x1, x2;
  const int nz = sl_qf_div448_tiny(absmax, &s, &sx, &x1, &x2);
  const float want_s = absmax / SL_E4M3_MAX;
  size_t bad = 0;
  (*n)++;
  const int e_ceil = sl_qf_block_exp_e4m3(absmax, SL_QRULE_CEIL), want_ceil = sl_qf_block_exp(absmax, SL_QRULE_CEIL,
                                                                                                SL_E4M3_MAX, SL_E4M3_EMAX);
  if (bits_of(s) != bits_of(want_s) || nz != (want_s != 0.0f) || (double)sx != (double)s * x1 * x2 ||
      e_ceil != want_ceil) {
    if (bad++ < 3) print_error("tiny absmax %a: s %a (division %a), sx %a, CEIL exponent %d (reference %d)\n",
                               (double)absmax, (double)s, (double)want_s, (double)sx, e_ceil, want_ceil);
    return bad;
  }
  if (!nz) return 0;
  const float r = 1.0f / sx;
  for (size_t i = 0; i < nx; i++) {
    float x = xs[i];
    if (!(fabsf(x) <= absmax)) break; /* xs sorted by magnitude */
    for (int sg = 0; sg < 2; sg++, x = -x) {
      const float want = x / s, got = sl_qf_div_fast(x * x1 * x2, sx, r);
      (*n)++;
      const bool ok =
          fabsf(want) >= 0x1p-12f ? bits_of(got) == bits_of(want) : sl_f32_to_e4m3(got) == sl_f32_to_e4m3(want);
      if (!ok && bad++ < 3)
        print_error("tiny x %a / s %a (absmax %a): fast %a, division %a\n", (double)x, (double)s, (double)absmax,
                    (double)got, (double)want);
    }
  }
  return bad;
}

static void test_div448_tiny(void **state) {
  (void)state;
  size_t bad = 0, n = 0;
  for (uint32_t m = 0; m < (1u << 23); m++) /* every subnormal absmax (and 0) */
    bad += check_tiny(f32_of(m), NULL, 0, &n);
  static const uint32_t exps[] = {1, 8, 9, 10, 71}; /* biased: 2^-126, 448 * 2^-126 = 1.75 * 2^-118 +- 1, 2^-56 */
  for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++)
    for (uint32_t m = 0; m < (1u << 23); m++)
      bad += check_tiny(f32_of((exps[e] << 23) | m), NULL, 0, &n);
  float *xs = malloc(sizeof(float) * 0x2400u);
  assert_non_null(xs);
  size_t nx = 0;
  for (uint32_t h = 0; h < 0x2400u; h++) /* every non-negative bf16 below 2^-55, ascending */
    xs[nx++] = f32_of(h << 16);
  for (uint32_t h = 0; h < 0x2400u; h++) {
    const int e = (int)(h >> 7); /* biased */
    if (e <= 1 || (e >= 8 && e <= 10) || e >= 70) bad += check_tiny(xs[h], xs, nx, &n);
  }
  free(xs);
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 2000000; i++) {
    const float absmax = f32_of((uint32_t)(sl_test_rand_u64(&rng) % 0x24000000u));
    float x[2] = {absmax * (float)((sl_test_rand_u64(&rng) >> 11) * 0x1p-53), absmax};
    if (fabsf(x[0]) > fabsf(x[1])) x[0] = x[1];
    bad += check_tiny(absmax, x, 2, &n);
  }
  if (bad) fail_msg("sl_qf_div448_tiny's scale or quotients differ from the divisions on %zu of %zu checks", bad, n);
}

/* The byte-permute E2M1 decoder against sl_e2m1_to_f32: every code in every position (all
 * 2^32 words would be slow; each nibble position sees all 16 codes with random neighbours). */
static void test_e2m1_decode8(void **state) {
  (void)state;
  uint64_t rng = sl_test_seed();
  size_t bad = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t c = (uint32_t)sl_test_rand_u64(&rng);
    if (i < 16) c = 0x11111111u * (uint32_t)i;
    uint32_t p[4], sg[4];
    sl_qf_e2m1_mag8_bf16(c, p);
    sl_qf_e2m1_sign8(c, sg);
    for (int j = 0; j < 8; j++) {
      uint8_t code = (uint8_t)((c >> (4 * j)) & 0xfu);
      float want = sl_e2m1_to_f32(code);
      uint32_t half = (p[j / 2] >> (16 * (j & 1))) & 0xffffu;
      float got = f32_of(half << 16);
      uint32_t sbit = (sg[j / 2] >> (16 * (j & 1) + 15)) & 1u;
      if ((got != fabsf(want) || sbit != (bits_of(want) >> 31)) && bad++ < 5)
        print_error("e2m1 decode word 0x%08x element %d: |%g| sign %u, reference %g\n", c, j, (double)got, sbit,
                    (double)want);
    }
  }
  if (bad) fail_msg("the byte-permute E2M1 decoder differs from sl_e2m1_to_f32 on %zu elements", bad);
}

/* The FP4 dequantization table entry from two results (sl_qf_fp4_entry16, kernels/quant.cu
 * fp4_entry): where it accepts, every magnitude's 16-bit value must be the reference's
 * (sl_qf_decode rounded once to bf16 / f16), for every scale byte of MXFP4 and of NVFP4 over
 * random tensor scales in the fast quotient's range and its ends (negative NVFP4 bytes: the
 * magnitude's entry with the signs flipped, as the kernel builds it). It must also accept nearly
 * every byte -- the kernel's speed rests on it: all finite nonzero NVFP4 bytes in bf16. */
static uint16_t to16(float y, int f16) {
  return f16 ? sl_f32_to_f16(y) : sl_f32_to_bf16(y);
}
static void check_entry(int fmt, int s, float gs, int f16, size_t *bad, size_t *ok) {
  float q1, q3;
  uint32_t e[4] = {0, 0, 0, 0}, flip = 0;
  if (fmt == SL_QFMT_MXFP4) {
    q1 = sl_e8m0_to_f32((uint8_t)s);
    q3 = 3.0f * q1;
  } else {
    float d = sl_e4m3_to_f32((uint8_t)(s & 0x7f)), r = 1.0f / gs;
    if ((s & 0x7f) == 0) return; /* zeros: the kernel's own branch, checked below */
    q1 = sl_qf_div_fast_signed(d, gs, r);
    q3 = sl_qf_div_fast_signed(3.0f * d, gs, r);
    flip = (s & 0x80) ? 0x80808080u : 0u;
  }
  if (!sl_qf_fp4_entry16(to16(q1, f16), to16(q3, f16), f16, e)) return;
  (*ok)++;
  e[2] ^= flip;
  e[3] ^= flip;
  for (int m = 0; m < 8; m++) {
    uint32_t got = ((e[m >> 2] >> (8 * (m & 3))) & 0xffu) | (((e[2 + (m >> 2)] >> (8 * (m & 3))) & 0xffu) << 8);
    uint32_t want = to16(sl_qf_decode(fmt, (uint8_t)m, 0.0f, (uint8_t)s, gs), f16);
    if (got != want && (*bad)++ < 5)
      print_error("fmt %d scale byte 0x%02x gs %a %s magnitude %d: entry 0x%04x, reference 0x%04x\n", fmt, s,
                  (double)gs, f16 ? "f16" : "bf16", m, got, want);
  }
}
static void test_fp4_entry16(void **state) {
  (void)state;
  size_t bad = 0, ok[2] = {0, 0};
  for (int f16 = 0; f16 < 2; f16++)
    for (int s = 0; s < 256; s++)
      check_entry(SL_QFMT_MXFP4, s, 1.0f, f16, &bad, &ok[f16]);
  assert_int_equal(ok[0], 248); /* bf16: every exponent byte in [3, 250] */
  assert_int_equal(ok[1], 24);  /* f16: 2^-12 .. 2^11 */
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 1500; i++) {
    int e = (int)(sl_test_rand_u64(&rng) % 120) - 60;
    uint32_t m = (uint32_t)(sl_test_rand_u64(&rng) % 0x800000u);
    if (i < 8) m = (i & 1) ? 0x7fffffu : 0; /* the exact range ends */
    if (i < 8) e = (i & 2) ? 59 : -60;
    float gs = ldexpf(1.0f + (float)m * 0x1p-23f, e);
    for (int f16 = 0; f16 < 2; f16++) {
      size_t n = 0;
      for (int s = 0; s < 256; s++)
        check_entry(SL_QFMT_NVFP4, s, gs, f16, &bad, &n);
      if (!f16 && n != 252 && bad++ < 5) print_error("NVFP4 gs %a: %zu bf16 entries accepted, want 252\n", (double)gs, n);
    }
  }
  /* the zero bytes' entries (the kernel's branch): +0 / -0 for every magnitude */
  for (int m = 0; m < 8; m++) {
    assert_int_equal(sl_f32_to_bf16(sl_qf_decode(SL_QFMT_NVFP4, (uint8_t)m, 0.0f, 0x00, 0x1p-3f)), 0x0000);
    assert_int_equal(sl_f32_to_bf16(sl_qf_decode(SL_QFMT_NVFP4, (uint8_t)m, 0.0f, 0x80, 0x1p-3f)), 0x8000);
  }
  if (bad) fail_msg("the FP4 table entry differs from the reference decode (or refuses) in %zu cases", bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_block_exp_fast), cmocka_unit_test(test_div_fast),
      cmocka_unit_test(test_div16_fast),     cmocka_unit_test(test_e2m1_fast),
      cmocka_unit_test(test_e2m1_scaled),    cmocka_unit_test(test_deq_div_fast),
      cmocka_unit_test(test_e2m1_mag_raw),   cmocka_unit_test(test_e2m1_pack),
      cmocka_unit_test(test_div448_fast),    cmocka_unit_test(test_div448_tiny),
      cmocka_unit_test(test_e2m1_decode8),   cmocka_unit_test(test_e2m1_pack_bf16x2),
      cmocka_unit_test(test_fp4_entry16),
  };
  return SL_RUN_SELECTED(tests, NULL, NULL);
}
