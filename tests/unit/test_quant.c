/* Unit tests of the quantization formats (kernels/quant_formats.h) and the CPU reference of
 * sl_quant / sl_dequant: every rounding boundary, saturation, zeros, subnormals, NaN, the FP4
 * nibble order, the swizzled scale layout, and exact round trips. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "sl_test.h"

/* ---- independent definitions (double precision, brute force) ------------------------------ */

static double e4m3_value(int c) { /* from the OCP table: bias 7, subnormals m * 2^-9 */
  int s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
  double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
  return s ? -v : v;
}
static double e2m1_value(int c) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}
/* Nearest code by search over the finite codes of one sign; ties to the even code; beyond
 * the maximum saturates. */
static int nearest(double x, int ncodes, double (*value)(int), int sign_bit, int max_code) {
  double a = fabs(x);
  int best = 0;
  for (int c = 1; c <= max_code; c++) {
    double d = fabs(value(c) - a), db = fabs(value(best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  (void)ncodes;
  return (signbit(x) ? sign_bit : 0) | best;
}
static int e4m3_nearest(double x) {
  return nearest(x, 127, e4m3_value, 0x80, 0x7e);
}
static int e2m1_nearest(double x) {
  return nearest(x, 8, e2m1_value, 0x8, 7);
}

static void test_e4m3_decode_all_codes(void **state) {
  for (int c = 0; c < 256; c++) {
    float f = sl_e4m3_to_f32((uint8_t)c);
    if ((c & 0x7f) == 0x7f) {
      assert_true(isnan(f));
      continue;
    }
    assert_true((double)f == e4m3_value(c));
  }
  assert_true(sl_e4m3_to_f32(0x7e) == 448.0f);
  assert_true(sl_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
}

static void test_e4m3_rounding_boundaries(void **state) {
  /* Hand-worked: ties go to the even code. */
  assert_int_equal(sl_f32_to_e4m3(1.0625f), 0x38); /* between 1.0 (0x38) and 1.125 (0x39) */
  assert_int_equal(sl_f32_to_e4m3(1.1875f), 0x3a); /* between 1.125 and 1.25 (0x3a) */
  assert_int_equal(sl_f32_to_e4m3(nextafterf(1.0625f, 2.0f)), 0x39);
  assert_int_equal(sl_f32_to_e4m3(-1.0625f), 0xb8);
  assert_int_equal(sl_f32_to_e4m3(432.0f), 0x7e); /* between 416 and 448: even 448 */
  assert_int_equal(sl_f32_to_e4m3(448.0f), 0x7e);
  assert_int_equal(sl_f32_to_e4m3(464.0f), 0x7e); /* saturates, never NaN */
  assert_int_equal(sl_f32_to_e4m3(1e30f), 0x7e);
  assert_int_equal(sl_f32_to_e4m3(-INFINITY), 0xfe);
  assert_int_equal(sl_f32_to_e4m3(NAN) & 0x7f, 0x7f);
  assert_int_equal(sl_f32_to_e4m3(0.0f), 0x00);
  assert_int_equal(sl_f32_to_e4m3(-0.0f), 0x80);
  /* Subnormals: m * 2^-9. */
  assert_int_equal(sl_f32_to_e4m3(ldexpf(1.0f, -9)), 0x01);
  assert_int_equal(sl_f32_to_e4m3(ldexpf(1.5f, -9)), 0x02);  /* tie 1|2 -> 2 */
  assert_int_equal(sl_f32_to_e4m3(ldexpf(2.5f, -9)), 0x02);  /* tie 2|3 -> 2 */
  assert_int_equal(sl_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00); /* tie 0|1 -> 0 */
  assert_int_equal(sl_f32_to_e4m3(nextafterf(ldexpf(1.0f, -10), 1.0f)), 0x01);
  assert_int_equal(sl_f32_to_e4m3(ldexpf(7.5f, -9)), 0x08); /* tie 7|8: 8 = 2^-6, smallest normal */
  assert_int_equal(sl_f32_to_e4m3(ldexpf(1.0f, -6)), 0x08);
  assert_int_equal(sl_f32_to_e4m3(1e-30f), 0x00);
  /* Every midpoint between neighbouring codes, and one ulp either side, against the search. */
  for (int c = 0; c < 0x7e; c++) {
    float mid = (float)((e4m3_value(c) + e4m3_value(c + 1)) / 2);
    float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, 1000.0f)};
    for (int i = 0; i < 3; i++) {
      assert_int_equal(sl_f32_to_e4m3(probes[i]), e4m3_nearest(probes[i]));
      assert_int_equal(sl_f32_to_e4m3(-probes[i]), e4m3_nearest(-(double)probes[i]));
    }
    assert_int_equal(sl_f32_to_e4m3((float)e4m3_value(c)), c); /* exact values round-trip */
  }
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 20000; i++) {
    float x = ldexpf(sl_test_rand_uniform(&rng, -2.0f, 2.0f), (int)(sl_test_rand_u64(&rng) % 28) - 14);
    assert_int_equal(sl_f32_to_e4m3(x), e4m3_nearest(x));
  }
}

static void test_e2m1_rounding_boundaries(void **state) {
  static const struct {
    float x;
    int code;
  } cases[] = {
      {0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4},  {3.5f, 6},  {5.0f, 6},   {5.5f, 7},
      {6.0f, 7},  {7.0f, 7},  {1e9f, 7},  {0.0f, 0},  {-0.0f, 8}, {-0.3f, 9}, {-5.0f, 14}, {-INFINITY, 15},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (sl_f32_to_e2m1(cases[i].x) != cases[i].code)
      fail_msg("e2m1(%g) = %d, want %d", (double)cases[i].x, sl_f32_to_e2m1(cases[i].x), cases[i].code);
  }
  for (int c = 0; c < 16; c++)
    assert_true((double)sl_e2m1_to_f32((uint8_t)c) == e2m1_value(c));
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 20000; i++) {
    float x = ldexpf(sl_test_rand_uniform(&rng, -2.0f, 2.0f), (int)(sl_test_rand_u64(&rng) % 8) - 4);
    assert_int_equal(sl_f32_to_e2m1(x), e2m1_nearest(x));
  }
  assert_int_equal(sl_f32_to_e2m1(ldexpf(1.0f, -140)), 0);
  assert_int_equal(sl_f32_to_e2m1(3e38f), 7);
  assert_int_equal(sl_f32_to_e2m1(nextafterf(1.0f, 0.0f)), 2);
  assert_int_equal(sl_f32_to_e2m1(nextafterf(0.25f, 1.0f)), 1);
  for (int c = 0; c < 7; c++) {
    float mid = (float)((e2m1_value(c) + e2m1_value(c + 1)) / 2);
    float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, 100.0f)};
    for (int i = 0; i < 3; i++) {
      assert_int_equal(sl_f32_to_e2m1(probes[i]), e2m1_nearest(probes[i]));
      assert_int_equal(sl_f32_to_e2m1(-probes[i]), e2m1_nearest(-(double)probes[i]));
    }
  }
}

static void test_block_scale_rules(void **state) {
  /* E8M0 exponents, hand-worked. MXFP8 FLOOR: floor(log2 absmax) - 8. CEIL: ceil(log2(absmax/448)). */
  assert_int_equal(sl_qf_block_exp(448.0f, SL_QRULE_FLOOR, 448.0f, 8), 0);
  assert_int_equal(sl_qf_block_exp(511.0f, SL_QRULE_FLOOR, 448.0f, 8), 0);
  assert_int_equal(sl_qf_block_exp(1.0f, SL_QRULE_FLOOR, 448.0f, 8), -8);
  assert_int_equal(sl_qf_block_exp(448.0f, SL_QRULE_CEIL, 448.0f, 8), 0);
  assert_int_equal(sl_qf_block_exp(449.0f, SL_QRULE_CEIL, 448.0f, 8), 1);
  assert_int_equal(sl_qf_block_exp(1.0f, SL_QRULE_CEIL, 448.0f, 8), -8); /* 1/448 = 2^-8.8 */
  assert_int_equal(sl_qf_block_exp(6.0f, SL_QRULE_FLOOR, 6.0f, 2), 0);
  assert_int_equal(sl_qf_block_exp(7.0f, SL_QRULE_FLOOR, 6.0f, 2), 0); /* 7 then saturates to 6 */
  assert_int_equal(sl_qf_block_exp(7.0f, SL_QRULE_CEIL, 6.0f, 2), 1);
  assert_int_equal(sl_qf_block_exp(0.0f, SL_QRULE_CEIL, 6.0f, 2), -127);      /* zero block: code 0 */
  assert_int_equal(sl_qf_block_exp(1e-45f, SL_QRULE_FLOOR, 448.0f, 8), -127); /* clamped */
  assert_int_equal(sl_qf_block_exp(3e38f, SL_QRULE_FLOOR, 448.0f, 8), 127 - 8);
  /* floor/ceil log2 on subnormals against libm */
  for (int k = -149; k <= -127; k++) {
    float a = ldexpf(1.0f, k), b = ldexpf(1.5f, k);
    assert_int_equal(sl_qf_floor_log2(a), k);
    assert_int_equal(sl_qf_ceil_log2(a), k);
    if (k < -127 && k > -149) { /* 1.5 * 2^-149 is not representable */
      assert_int_equal(sl_qf_floor_log2(b), k);
      assert_int_equal(sl_qf_ceil_log2(b), k + 1);
    }
  }
  assert_true(sl_qf_pow2(-127) == ldexpf(1.0f, -127));
  assert_true(sl_qf_pow2(127) == ldexpf(1.0f, 127));
  assert_true(sl_e8m0_to_f32(127) == 1.0f);
  assert_true(sl_e8m0_to_f32(0) == ldexpf(1.0f, -127));
  assert_true(isnan(sl_e8m0_to_f32(255)));
  /* FP8 group IEEE scale and the UE8M0 variant. */
  sl_qf_scale_t s = sl_qf_block_scale(SL_QFMT_FP8_GROUP, SL_QRULE_IEEE, 1.0f, 0);
  assert_true(s.scale_f32 == 1.0f / 448.0f);
  s = sl_qf_block_scale(SL_QFMT_FP8_GROUP, SL_QRULE_CEIL, 1.0f, 0);
  assert_true(s.scale_f32 == ldexpf(1.0f, -8));
  s = sl_qf_block_scale(SL_QFMT_FP8_GROUP, SL_QRULE_IEEE, 0.0f, 0);
  assert_true(s.zero && s.scale_f32 == 0.0f);
  assert_int_equal(sl_qf_encode(SL_QFMT_FP8_GROUP, s, 0.0f), 0);
  /* MXFP4 CEIL, absmax 7: e = 1, so 7 -> 3.5 -> tie 3|4 -> 4 (code 6). */
  s = sl_qf_block_scale(SL_QFMT_MXFP4, SL_QRULE_CEIL, 7.0f, 0);
  assert_int_equal(s.scale_u8, 128);
  assert_int_equal(sl_qf_encode(SL_QFMT_MXFP4, s, 7.0f), 6);
  /* NVFP4: sf = e4m3(gs * absmax/6); enc = gs / sf. absmax 6, gs 1: sf = 1.0 (0x38). */
  s = sl_qf_block_scale(SL_QFMT_NVFP4, 0, 6.0f, 1.0f);
  assert_int_equal(s.scale_u8, 0x38);
  assert_true(s.mul == 1.0f);
  /* gs * absmax / 6 = 10 * 1 / 6 = 1.6667 -> e4m3 1.625 (0x3d); enc = 10 / 1.625. */
  s = sl_qf_block_scale(SL_QFMT_NVFP4, 0, 1.0f, 10.0f);
  assert_int_equal(s.scale_u8, 0x3d);
  assert_true(s.mul == 10.0f / 1.625f);
  /* huge block saturates the E4M3 scale at 448, never NaN */
  s = sl_qf_block_scale(SL_QFMT_NVFP4, 0, 1e30f, 1.0f);
  assert_int_equal(s.scale_u8, 0x7e);
}

/* ---- the CPU reference over whole tensors --------------------------------------------- */

typedef struct {
  sl_quant_format_t fmt;
  sl_quant_rule_t rule;
  sl_quant_layout_t layout;
} qcfg_t;
static const qcfg_t all_cfgs[] = {
    {SL_QUANT_FP8_GROUP, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_FP8_GROUP, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_MXFP8, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_MXFP8, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_MXFP4, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_MXFP4, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_NVFP4, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_NVFP4, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_SWIZZLED},
};

static uint8_t code_at(const uint8_t *codes, sl_quant_format_t fmt, size_t i) {
  return sl_qfmt_is_fp4((int)fmt) ? (uint8_t)((codes[i / 2] >> ((i & 1) * 4)) & 0xf) : codes[i];
}

/* dequant(quant(x)) == x when every block is made of representable values at a power-of-two
 * scale and holds its format's maximum (so every rule picks that scale). */
static void test_round_trip_exact(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const int T = 5, H = 256;
  for (size_t ci = 0; ci < sizeof all_cfgs / sizeof all_cfgs[0]; ci++)
    for (int di = 0; di < 3; di++) {
      qcfg_t c = all_cfgs[ci];
      int fp4 = sl_qfmt_is_fp4((int)c.fmt), block = sl_qfmt_block((int)c.fmt);
      float maxc = fp4 ? 6.0f : 448.0f, gs = c.fmt == SL_QUANT_NVFP4 ? 4.0f : 0.0f;
      float *x = malloc(sizeof(float) * T * H), *back = malloc(sizeof(float) * T * H);
      void *in = malloc(4 * T * H);
      uint8_t *codes = malloc(T * H), *scales = malloc(4 * 128 * H);
      for (int b = 0; b < T * H / block; b++) {
        /* NVFP4: block decode scale sf/gs with sf a power of two in E4M3 range */
        int e = (int)(sl_test_rand_u64(&rng) % 13) - 6;
        float scale = ldexpf(1.0f, e);
        if (c.fmt == SL_QUANT_NVFP4) scale = ldexpf(1.0f, (int)(sl_test_rand_u64(&rng) % 9) - 4) / gs;
        int maxpos = (int)(sl_test_rand_u64(&rng) % block);
        for (int j = 0; j < block; j++) {
          int code = (int)(sl_test_rand_u64(&rng) % (fp4 ? 16 : 256));
          if (!fp4 && (code & 0x7f) == 0x7f) code = 0;
          double v = fp4 ? e2m1_value(code) : e4m3_value(code);
          if (j == maxpos) v = (code & 1) ? -maxc : maxc;
          x[b * block + j] = (float)v * scale;
        }
      }
      for (int i = 0; i < T * H; i++)
        sl_store_f32(in, dtypes[di], i, x[i]);
      sl_quant_args_t q = {.format = c.fmt,
                           .rule = c.rule,
                           .layout = c.layout,
                           .num_tokens = T,
                           .hidden = H,
                           .in_dtype = dtypes[di],
                           .in = in,
                           .codes = codes,
                           .scales = scales,
                           .global_scale = gs,
                           .check_nan = true};
      SL_ASSERT_OK(sl_quant_ref(&q));
      sl_dequant_args_t d = {.format = c.fmt,
                             .layout = c.layout,
                             .num_tokens = T,
                             .hidden = H,
                             .codes = codes,
                             .scales = scales,
                             .global_scale = gs,
                             .out_dtype = SL_DTYPE_F32,
                             .out = back};
      SL_ASSERT_OK(sl_dequant_ref(&d));
      for (int i = 0; i < T * H; i++)
        if (!(back[i] == x[i] || (back[i] == 0 && x[i] == 0)))
          fail_msg("format %d rule %d dtype %s: element %d: %g -> %g", (int)c.fmt, (int)c.rule,
                   sl_dtype_name(dtypes[di]), i, (double)x[i], (double)back[i]);
      free(x), free(back), free(in), free(codes), free(scales);
    }
}

/* Random data: the reference equals a direct element-by-element definition, in double. */
static void test_quant_matches_definition(void **state) {
  uint64_t rng = sl_test_seed();
  const int T = 3, H = 384;
  float *x = malloc(sizeof(float) * T * H);
  uint8_t *codes = malloc(T * H), *scales = malloc(4 * 128 * H);
  for (size_t ci = 0; ci < sizeof all_cfgs / sizeof all_cfgs[0]; ci++) {
    qcfg_t c = all_cfgs[ci];
    int fmt = (int)c.fmt, fp4 = sl_qfmt_is_fp4(fmt), block = sl_qfmt_block(fmt), cols = H / block;
    for (int i = 0; i < T * H; i++)
      x[i] = sl_test_rand_normal(&rng) * ldexpf(1.0f, (i / block) % 7 - 3);
    for (int j = 0; j < block; j++)
      x[H + j] = 0.0f; /* a zero block */
    float gs = 448.0f * 6.0f / 20.0f;
    sl_quant_args_t q = {.format = c.fmt,
                         .rule = c.rule,
                         .layout = c.layout,
                         .num_tokens = T,
                         .hidden = H,
                         .in_dtype = SL_DTYPE_F32,
                         .in = x,
                         .codes = codes,
                         .scales = scales,
                         .global_scale = gs};
    SL_ASSERT_OK(sl_quant_ref(&q));
    for (int t = 0; t < T; t++)
      for (int g = 0; g < cols; g++) {
        double amax = 0;
        for (int j = 0; j < block; j++)
          amax = fmax(amax, fabs(x[t * H + g * block + j]));
        double dec; /* the decode scale by definition */
        if (fmt == SL_QFMT_FP8_GROUP && c.rule == SL_QUANT_RULE_IEEE) {
          dec = (float)(amax / 448.0); /* IEEE division of two floats: correctly rounded */
          assert_true(((float *)scales)[t * cols + g] == (float)dec);
        } else if (fmt == SL_QFMT_NVFP4) {
          int sc = e4m3_nearest((double)(float)(gs * (double)(float)(amax / 6.0)));
          assert_int_equal(scales[sl_qf_scale_offset((int)c.layout, t, g, cols)], sc);
          dec = e4m3_value(sc) / gs;
        } else {
          double mc = fp4 ? 6.0 : 448.0;
          int e = amax == 0                      ? -127
                  : c.rule == SL_QUANT_RULE_CEIL ? (int)ceil(log2((double)(float)(amax / mc)))
                                                 : (int)floor(log2(amax)) - (fp4 ? 2 : 8);
          dec = ldexp(1.0, e);
          if (fmt == SL_QFMT_FP8_GROUP)
            assert_true(((float *)scales)[t * cols + g] == (float)dec);
          else
            assert_int_equal(scales[sl_qf_scale_offset((int)c.layout, t, g, cols)], e + 127);
        }
        for (int j = 0; j < block; j++) {
          size_t i = (size_t)t * H + g * block + j;
          double xv = x[i];
          int want;
          if (dec == 0 || amax == 0)
            want = 0;
          else if (fmt == SL_QFMT_NVFP4) /* x * (gs / sf), two correctly rounded float ops */
            want = e2m1_nearest(
                (double)(x[i] * (float)(gs / e4m3_value(scales[sl_qf_scale_offset((int)c.layout, t, g, cols)]))));
          else if (fmt == SL_QFMT_FP8_GROUP && c.rule == SL_QUANT_RULE_IEEE)
            want = e4m3_nearest((double)(float)(xv / dec));
          else
            want = fp4 ? e2m1_nearest(xv / dec) : e4m3_nearest(xv / dec);
          if (code_at(codes, c.fmt, i) != want)
            fail_msg("format %d rule %d t %d block %d elt %d: x %g code %d want %d", fmt, (int)c.rule, t, g, j, xv,
                     code_at(codes, c.fmt, i), want);
        }
      }
  }
  free(x), free(codes), free(scales);
}

static void test_fp4_nibble_order(void **state) {
  float x[32] = {1.0f, 2.0f, -0.5f, 6.0f};
  uint8_t codes[16], scales[4];
  sl_quant_args_t q = {.format = SL_QUANT_MXFP4,
                       .rule = SL_QUANT_RULE_FLOOR,
                       .num_tokens = 1,
                       .hidden = 32,
                       .in_dtype = SL_DTYPE_F32,
                       .in = x,
                       .codes = codes,
                       .scales = scales};
  SL_ASSERT_OK(sl_quant_ref(&q));
  assert_int_equal(scales[0], 127); /* absmax 6: floor(log2 6) - 2 = 0 */
  assert_int_equal(codes[0], 0x42); /* element 0 (1.0 = code 2) low, element 1 (2.0 = 4) high */
  assert_int_equal(codes[1], 0x79); /* element 2 (-0.5 = 0x9) low, element 3 (6.0 = 7) high */
  assert_int_equal(codes[2], 0x00);
}

/* The swizzled offset against an independent construction: the padded [rows, cols] matrix
 * viewed as [rt, 4, 32, ct, 4] and permuted to [rt, ct, 32, 4, 4], enumerated in order. */
static void test_swizzle_layout(void **state) {
  const int shapes[][2] = {{1, 1}, {3, 2}, {128, 4}, {130, 7}, {300, 28}, {257, 112}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int rows = shapes[s][0], cols = shapes[s][1];
    int rt_n = (rows + 127) / 128, ct_n = (cols + 3) / 4;
    size_t n = sl_qf_scale_count(SL_QLAYOUT_SWIZZLED, rows, cols);
    assert_int_equal(n, (size_t)rt_n * 128 * ct_n * 4);
    size_t pos = 0;
    for (int rt = 0; rt < rt_n; rt++)
      for (int ct = 0; ct < ct_n; ct++)
        for (int r32 = 0; r32 < 32; r32++)
          for (int r4 = 0; r4 < 4; r4++)
            for (int c4 = 0; c4 < 4; c4++, pos++) {
              int row = rt * 128 + r4 * 32 + r32, col = ct * 4 + c4;
              assert_int_equal(sl_qf_swizzled_offset(row, col, cols), pos);
            }
    assert_int_equal(pos, n);
  }
  /* Padding is written as zero; real cells hold the scales. */
  const int T = 3, H = 64; /* MXFP8: 2 blocks per row, padded to 128 x 4 */
  float x[3 * 64];
  for (int i = 0; i < T * H; i++)
    x[i] = (float)(i % 37) - 18.0f;
  uint8_t codes[3 * 64], scales[512];
  memset(scales, 0xAB, sizeof scales);
  sl_quant_args_t q = {.format = SL_QUANT_MXFP8,
                       .rule = SL_QUANT_RULE_CEIL,
                       .layout = SL_QUANT_LAYOUT_SWIZZLED,
                       .num_tokens = T,
                       .hidden = H,
                       .in_dtype = SL_DTYPE_F32,
                       .in = x,
                       .codes = codes,
                       .scales = scales};
  assert_int_equal(sl_quant_scales_bytes(SL_QUANT_MXFP8, SL_QUANT_LAYOUT_SWIZZLED, T, H), 512);
  SL_ASSERT_OK(sl_quant_ref(&q));
  for (int r = 0; r < 128; r++)
    for (int c = 0; c < 4; c++) {
      uint8_t v = scales[sl_qf_swizzled_offset(r, c, 2)];
      if (r < T && c < 2)
        assert_int_not_equal(v, 0);
      else
        assert_int_equal(v, 0);
    }
}

static void test_nan_reported(void **state) {
  const int T = 3, H = 512;
  float *x = calloc(T * H, sizeof(float));
  uint8_t *codes = malloc(T * H), *scales = malloc(4 * 128 * 64);
  for (int i = 0; i < T * H; i++)
    x[i] = (float)(i % 11) - 5.0f;
  for (size_t ci = 0; ci < sizeof all_cfgs / sizeof all_cfgs[0]; ci++) {
    qcfg_t c = all_cfgs[ci];
    int block = sl_qfmt_block((int)c.fmt);
    x[1 * H + 2 * block + 3] = NAN;
    x[2 * H + 5] = INFINITY;
    sl_quant_args_t q = {.format = c.fmt,
                         .rule = c.rule,
                         .layout = c.layout,
                         .num_tokens = T,
                         .hidden = H,
                         .in_dtype = SL_DTYPE_F32,
                         .in = x,
                         .codes = codes,
                         .scales = scales,
                         .global_scale = 1.0f,
                         .check_nan = true};
    sl_clear_error();
    assert_int_equal(sl_quant_ref(&q), SL_ERR_NUMERIC);
    assert_non_null(strstr(sl_last_error(), "token 1, block 2"));
    assert_int_equal(sl_quant_check_scales_host(c.fmt, c.layout, T, H, scales), SL_ERR_NUMERIC);
    q.check_nan = false;
    SL_ASSERT_OK(sl_quant_ref(&q)); /* without the check the NaN marker is still written */
    float *back = malloc(sizeof(float) * T * H);
    sl_dequant_args_t d = {.format = c.fmt,
                           .layout = c.layout,
                           .num_tokens = T,
                           .hidden = H,
                           .codes = codes,
                           .scales = scales,
                           .global_scale = 1.0f,
                           .out_dtype = SL_DTYPE_F32,
                           .out = back};
    SL_ASSERT_OK(sl_dequant_ref(&d));
    for (int j = 0; j < block; j++)
      assert_true(isnan(back[1 * H + 2 * block + j]));
    assert_true(isnan(back[2 * H + 5]));
    assert_false(isnan(back[0]) || isnan(back[1 * H + 3 * block]));
    free(back);
    x[1 * H + 2 * block + 3] = 0.0f;
    x[2 * H + 5] = 0.0f;
    SL_ASSERT_OK(sl_quant_ref(&q));
    SL_ASSERT_OK(sl_quant_check_scales_host(c.fmt, c.layout, T, H, scales));
  }
  free(x), free(codes), free(scales);
}

static void test_bad_arguments(void **state) {
  float x[64];
  uint8_t codes[64], scales[64];
  sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                       .num_tokens = 1,
                       .hidden = 64,
                       .in_dtype = SL_DTYPE_F32,
                       .in = x,
                       .codes = codes,
                       .scales = scales};
  assert_int_equal(sl_quant_ref(&q), SL_ERR_INVALID); /* 64 is not a multiple of 128 */
  q.format = SL_QUANT_NVFP4;
  q.global_scale = 0.0f;
  assert_int_equal(sl_quant_ref(&q), SL_ERR_INVALID);
  q.format = SL_QUANT_MXFP8;
  q.rule = SL_QUANT_RULE_IEEE;
  assert_int_equal(sl_quant_ref(&q), SL_ERR_INVALID);
  q.rule = SL_QUANT_RULE_CEIL;
  q.in_dtype = SL_DTYPE_I32;
  assert_int_equal(sl_quant_ref(&q), SL_ERR_INVALID);
}

/* sl_quant on the CPU device is the reference (the entry both backends share). */
static void test_cpu_backend_entry(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  const int T = 2, H = 128;
  uint16_t in[2 * 128];
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < T * H; i++)
    in[i] = sl_f32_to_bf16(sl_test_rand_normal(&rng));
  uint8_t c1[256], c2[256];
  float s1[2], s2[2];
  sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                       .num_tokens = T,
                       .hidden = H,
                       .in_dtype = SL_DTYPE_BF16,
                       .in = in,
                       .codes = c1,
                       .scales = s1};
  SL_ASSERT_OK(sl_quant(dev, &q, NULL));
  q.codes = c2;
  q.scales = s2;
  SL_ASSERT_OK(sl_quant_ref(&q));
  assert_memory_equal(c1, c2, sizeof c1);
  assert_memory_equal(s1, s2, sizeof s1);
  sl_device_close(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_e4m3_decode_all_codes),
      cmocka_unit_test(test_e4m3_rounding_boundaries),
      cmocka_unit_test(test_e2m1_rounding_boundaries),
      cmocka_unit_test(test_block_scale_rules),
      cmocka_unit_test(test_round_trip_exact),
      cmocka_unit_test(test_quant_matches_definition),
      cmocka_unit_test(test_fp4_nibble_order),
      cmocka_unit_test(test_swizzle_layout),
      cmocka_unit_test(test_nan_reported),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_cpu_backend_entry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
