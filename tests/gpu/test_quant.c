/* GPU tests of sl_quant / sl_dequant: fresh random inputs, poisoned outputs, every format,
 * rule, layout and input dtype on the decode and prefill paths; codes and scales (swizzle
 * padding included) must equal the CPU reference bit for bit, and so must dequantization. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kq_launch.h"
#include "kernels/quant.h"
#include "sl_test.h"

static sl_device_t *dev;

static const struct {
  sl_quant_format_t fmt;
  sl_quant_rule_t rule;
  sl_quant_layout_t layout;
} cfgs[] = {
    {SL_QUANT_FP8_GROUP, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_FP8_GROUP, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_MXFP8, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_MXFP8, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_MXFP8, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_MXFP4, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_MXFP4, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_MXFP4, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_SWIZZLED},
    {SL_QUANT_NVFP4, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_LINEAR},
    {SL_QUANT_NVFP4, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_SWIZZLED},
};

/* Random rows with a wide spread of magnitudes (per-row and per-element exponents), exact
 * zeros, whole zero blocks and E4M3-subnormal-sized values. */
static void fill_input(uint64_t *rng, void *in, sl_dtype_t dt, int T, int H, long stride) {
  for (int t = 0; t < T; t++) {
    int row_exp = (int)(sl_test_rand_u64(rng) % 17) - 8;
    for (int i = 0; i < H; i++) {
      uint64_t r = sl_test_rand_u64(rng);
      float v = ldexpf(sl_test_rand_normal(rng), row_exp + (int)(r % 5) - 2);
      if (r % 97 == 0) v = 0.0f;
      if (r % 89 == 0) v = ldexpf(v, -12);
      if ((i / 64) % 23 == 7 && t % 3 == 0) v = 0.0f; /* whole zero blocks */
      sl_store_f32(in, dt, (size_t)t * stride + i, v);
    }
  }
}

/* Edge inputs for the fast paths (kernels/quant_dev.cuh): negative zeros, whole blocks of
 * tiny values (absmax below 2^-55: the FP8 IEEE slow path; f16 flushes them to +-0, another
 * zero block), and values on every E2M1 / E4M3 rounding boundary of a power-of-two block
 * scale, both signs, exactly and one ulp either side. */
static bool edge_mode;
static bool tiny_mode;    /* with edge_mode: also whole blocks below 2^-100 (bf16 subnormals included) */
static float gs_override; /* NVFP4 tensor scale for this case when > 0 */

static void fill_edges(uint64_t *rng, void *in, sl_dtype_t dt, int T, int H, long stride) {
  static const float b[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 1.0f, 3.0f, 4.0f, 448.0f, 240.0f};
  for (int t = 0; t < T; t++) {
    int row_exp = (int)(sl_test_rand_u64(rng) % 9) - 4;
    for (int i = 0; i < H; i++) {
      uint64_t r = sl_test_rand_u64(rng);
      float v = ldexpf(sl_test_rand_normal(rng), row_exp);
      switch (r % 8) {
      case 0: v = -0.0f; break;
      case 1: case 2: {
        v = ldexpf(b[(r >> 8) % 14], row_exp);
        uint32_t u;
        memcpy(&u, &v, 4);
        u += (uint32_t)((r >> 16) % 3) - 1u; /* one fp32 ulp either side (rounded again to dt) */
        memcpy(&v, &u, 4);
        if ((r >> 20) & 1) v = -v;
        break;
      }
      default: break;
      }
      if ((i / 128) % 11 == 3 && t % 2 == 0) v = ldexpf(v, -70); /* whole tiny blocks */
      if (tiny_mode && (i / 128) % 11 == 5 && t % 3 == 1) /* absmax < 2^-100: the exponent's reference path */
        v = ldexpf(v, -118 - (int)((r >> 24) % 14));
      sl_store_f32(in, dt, (size_t)t * stride + i, v);
    }
  }
}

/* Exact ties of the FP8 IEEE rule (the cases quant_formats.h's sl_qf_div16_fast rests on its exhaustive test
 * for): each 128-element block gets an absmax A (a random dtype mantissa: powers of two and multiples of 7 often) at a
 * random element, and elements x = M A / 448 for random E4M3 rounding midpoints M (normal and subnormal ones), rounded
 * to the dtype -- exact where representable, the nearest value otherwise -- or one dtype ulp either side, either
 * sign. */
static bool tie_mode;
static void fill_ties(uint64_t *rng, void *in, sl_dtype_t dt, int T, int H, long stride) {
  const int mbits = dt == SL_DTYPE_F16 ? 10 : 7;
  for (int t = 0; t < T; t++)
    for (int b = 0; b < H / 128; b++) {
      uint64_t r = sl_test_rand_u64(rng);
      int m = (int)(r % (1u << mbits));
      const int m7 = (7 - (1 << mbits) % 7) % 7; /* the first m with 2^mbits + m a multiple of 7 */
      if (r & (1u << 16)) m = m7 + 7 * (int)((r >> 17) % (uint64_t)(((1 << mbits) - m7 + 6) / 7)); /* 7 | mantissa */
      if ((r >> 30) % 4 == 0) m = 0;                                      /* a power of two */
      const int e = dt == SL_DTYPE_F16 ? (int)((r >> 32) % 20) - 8 : (int)((r >> 32) % 40) - 20;
      const double A = ldexp(1.0 + ldexp(m, -mbits), e);
      const int at = (int)((r >> 40) % 128);
      for (int i = 0; i < 128; i++) {
        uint64_t q = sl_test_rand_u64(rng);
        double v = A;
        if (i != at) {
          /* midpoints: (k + 1/2) 2^-9 below 2^-6 (k < 8, the subnormals), (1 + (j + 1/2) / 8) 2^u above */
          const int u = (int)(q % 16) - 6, j = (int)((q >> 8) % 8), k = (int)((q >> 12) % 8);
          const double M = u < -6 || (q >> 16) % 5 == 0 ? (k + 0.5) * 0x1p-9 : ldexp(1.0 + (j + 0.5) / 8.0, u);
          v = M <= 448.0 ? M * A / 448.0 : 0.0;
        }
        uint16_t h = dt == SL_DTYPE_F16 ? sl_f32_to_f16((float)v) : sl_f32_to_bf16((float)v);
        if (i != at && h && (q >> 20) % 4 == 1) h++; /* the next larger magnitude (x stays below A) */
        if (i != at && h && (q >> 20) % 4 == 2) h--;
        if ((q >> 24) & 1) h |= 0x8000u;
        ((uint16_t *)in)[(size_t)t * stride + (size_t)b * 128 + (size_t)i] = h;
      }
    }
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, bytes ? bytes : 16, &p));
  return p;
}

static void run_case(uint64_t *rng, int ci, sl_dtype_t dt, int T, int H, long stride, bool inject_nan) {
  size_t eb = sl_dtype_bits(dt) / 8, in_bytes = (size_t)T * stride * eb;
  size_t cb = sl_quant_codes_bytes(cfgs[ci].fmt, T, H), sb = sl_quant_scales_bytes(cfgs[ci].fmt, cfgs[ci].layout, T, H);
  void *h_in = malloc(in_bytes), *h_codes = malloc(cb), *h_scales = malloc(sb), *r_codes = malloc(cb),
       *r_scales = malloc(sb), *h_back = malloc(in_bytes), *r_back = malloc(in_bytes);
  assert_non_null(h_in);
  memset(h_in, 0, in_bytes);
  if (tie_mode)
    fill_ties(rng, h_in, dt, T, H, stride);
  else if (edge_mode)
    fill_edges(rng, h_in, dt, T, H, stride);
  else
    fill_input(rng, h_in, dt, T, H, stride);
  int nan_t = T / 2, nan_i = H / 3;
  if (inject_nan) sl_store_f32(h_in, dt, (size_t)nan_t * stride + nan_i, NAN);
  void *d_in = dev_alloc(in_bytes), *d_codes = dev_alloc(cb), *d_scales = dev_alloc(sb), *d_back = dev_alloc(in_bytes);
  SL_ASSERT_OK(sl_memcpy(dev, d_in, h_in, in_bytes, NULL));
  sl_test_poison(dev, d_codes, cb);
  sl_test_poison(dev, d_scales, sb);
  sl_test_poison(dev, d_back, in_bytes);
  float gs = gs_override > 0.0f ? gs_override : 448.0f * 6.0f / ldexpf(4.0f, 8);
  sl_quant_args_t q = {.format = cfgs[ci].fmt,
                       .rule = cfgs[ci].rule,
                       .layout = cfgs[ci].layout,
                       .num_tokens = T,
                       .hidden = H,
                       .in_dtype = dt,
                       .in = d_in,
                       .in_stride = stride,
                       .codes = d_codes,
                       .scales = d_scales,
                       .global_scale = gs,
                       .check_nan = inject_nan};
  char what[160];
  snprintf(what, sizeof what, "format %d rule %d layout %d %s T=%d H=%d stride=%ld", (int)cfgs[ci].fmt,
           (int)cfgs[ci].rule, (int)cfgs[ci].layout, sl_dtype_name(dt), T, H, stride);
  sl_status_t s = sl_quant(dev, &q, NULL);
  if (inject_nan) {
    if (s != SL_ERR_NUMERIC) fail_msg("%s: NaN input gave %s, want SL_ERR_NUMERIC", what, sl_status_str(s));
    char want[64];
    snprintf(want, sizeof want, "token %d, block %d", nan_t, nan_i / sl_qfmt_block((int)cfgs[ci].fmt));
    if (!strstr(sl_last_error(), want)) fail_msg("%s: error '%s' does not name '%s'", what, sl_last_error(), want);
  } else if (s != SL_OK) {
    fail_msg("%s: sl_quant -> %s: %s", what, sl_status_str(s), sl_last_error());
  }
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, "quant kernel"));
  SL_ASSERT_OK(sl_memcpy(dev, h_codes, d_codes, cb, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, h_scales, d_scales, sb, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  q.in = h_in;
  q.codes = r_codes;
  q.scales = r_scales;
  q.check_nan = false;
  memset(r_scales, 0x5a, sb);
  SL_ASSERT_OK(sl_quant_ref(&q));
  size_t bad = 0;
  for (size_t i = 0; i < cb; i++)
    if (((uint8_t *)h_codes)[i] != ((uint8_t *)r_codes)[i] && bad++ < 5)
      fprintf(stderr, "  %s: code byte %zu: gpu 0x%02x cpu 0x%02x\n", what, i, ((uint8_t *)h_codes)[i],
              ((uint8_t *)r_codes)[i]);
  for (size_t i = 0; i < sb; i++)
    if (((uint8_t *)h_scales)[i] != ((uint8_t *)r_scales)[i] && bad++ < 10)
      fprintf(stderr, "  %s: scale byte %zu: gpu 0x%02x cpu 0x%02x\n", what, i, ((uint8_t *)h_scales)[i],
              ((uint8_t *)r_scales)[i]);
  if (bad) fail_msg("%s: %zu bytes of codes/scales differ from the CPU reference", what, bad);

  /* dequantize the GPU's codes on both sides, into the input dtype with the same stride */
  sl_dequant_args_t d = {.format = cfgs[ci].fmt,
                         .layout = cfgs[ci].layout,
                         .num_tokens = T,
                         .hidden = H,
                         .codes = d_codes,
                         .scales = d_scales,
                         .global_scale = gs,
                         .out_dtype = dt,
                         .out = d_back,
                         .out_stride = stride};
  SL_ASSERT_OK(sl_dequant(dev, &d, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, "dequant kernel"));
  SL_ASSERT_OK(sl_memcpy(dev, h_back, d_back, in_bytes, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  memcpy(r_back, h_back, in_bytes); /* the gaps between strided rows are not written: compare rows only */
  d.codes = r_codes;
  d.scales = r_scales;
  d.out = r_back;
  SL_ASSERT_OK(sl_dequant_ref(&d));
  for (int t = 0; t < T; t++)
    for (int i = 0; i < H; i++) {
      size_t k = (size_t)t * stride + i;
      uint32_t g = 0, w = 0;
      memcpy(&g, (char *)h_back + k * eb, eb);
      memcpy(&w, (char *)r_back + k * eb, eb);
      bool nan_block =
          inject_nan && t == nan_t && i / sl_qfmt_block((int)cfgs[ci].fmt) == nan_i / sl_qfmt_block((int)cfgs[ci].fmt);
      float gv = sl_load_f32(h_back, dt, k);
      if (nan_block ? !isnan(gv) : (g != w || isnan(gv)))
        fail_msg("%s: dequant t %d i %d: gpu %g cpu %g", what, t, i, (double)gv, (double)sl_load_f32(r_back, dt, k));
    }
  sl_device_free(dev, d_in), sl_device_free(dev, d_codes), sl_device_free(dev, d_scales), sl_device_free(dev, d_back);
  free(h_in), free(h_codes), free(h_scales), free(r_codes), free(r_scales), free(h_back), free(r_back);
}

static void test_all_formats(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  int sms = sl_device_info(dev)->sm_count;
  const int Ts[] = {3, sms + 77}; /* decode (rows < SMs) and prefill paths; not a multiple of 128 */
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    for (int d = 0; d < 3; d++)
      for (int ti = 0; ti < 2; ti++) /* 2944 = 11.5 bf16 warp chunks: the tail lanes idle */
        run_case(&rng, (int)ci, dts[d], Ts[ti], 2944, 2944, false);
}

static void test_wide_rows_strides(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
    run_case(&rng, (int)ci, SL_DTYPE_BF16, 1, 7168, 7168, false);
    run_case(&rng, (int)ci, SL_DTYPE_BF16, 1000, 7168, 7168 + 64, false);
    if (cfgs[ci].fmt != SL_QUANT_FP8_GROUP) /* 2080: a partial column tile (not a multiple of 128) */
      run_case(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2080, 2080, false);
  }
}

static void test_nan_reported(void **state) {
  uint64_t rng = sl_test_seed();
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    run_case(&rng, (int)ci, SL_DTYPE_BF16, 9, 2048, 2048, true);
}

static void test_edge_values(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  int sms = sl_device_info(dev)->sm_count;
  edge_mode = true;
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    for (int d = 0; d < 3; d++)
      run_case(&rng, (int)ci, dts[d], sms + 13, 2944, 2944, false);
  edge_mode = false;
}

/* NVFP4 with tensor scales outside the fast dequantization range [2^-60, 2^60] (the per-element
 * division path) and at its ends, and far outside (2^+-100, 2^+-101: the quantizer's encode
 * multipliers near the fp32 range ends). */
static void test_nvfp4_scale_range(void **state) {
  uint64_t rng = sl_test_seed();
  static const float gss[] = {0x1p-101f, 0x1p-100f, 0x1p-61f, 0x1p-60f, 0x1p60f, 0x1p61f, 0x1p100f, 0x1p101f};
  for (size_t g = 0; g < sizeof gss / sizeof gss[0]; g++) {
    gs_override = gss[g];
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
      if (cfgs[ci].fmt == SL_QUANT_NVFP4) {
        run_case(&rng, (int)ci, SL_DTYPE_BF16, 300, 2048, 2048, false);
        run_case(&rng, (int)ci, SL_DTYPE_F16, 300, 2048, 2048, false);
      }
  }
  gs_override = 0.0f;
}

/* The segment layout (kernels/kq_launch.h, SEG > 0: a warp walks consecutive chunks of a row
 * with running pointers), forced by the override on both the decode and prefill paths: every
 * format, rule and layout (swizzled included, T not a multiple of 128) at a segment length
 * that does not divide the row's 11.5 chunks and is odd against UNROLL 2 (3), at whole rows
 * (64), and at the registered point (8) with edge values, NaN blocks and NVFP4 tensor scales
 * outside the fast range; f16 / f32 on two formats; strided rows. Codes, scales and
 * dequantization (FP4 to 16-bit: the per-CTA table path) bit-exact as above. */
static void test_segment_layouts(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  static const int segs[] = {3, 64};
  for (size_t si = 0; si < sizeof segs / sizeof segs[0]; si++) {
    sl_kq_set_seg_override(segs[si]);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
      run_case(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2944, 2944, false);
      if (si == 0) run_case(&rng, (int)ci, SL_DTYPE_BF16, 3, 2944, 2944, false);
    }
  }
  sl_kq_set_seg_override(3);
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    if ((cfgs[ci].fmt == SL_QUANT_NVFP4 && cfgs[ci].layout == SL_QUANT_LAYOUT_SWIZZLED) ||
        (cfgs[ci].fmt == SL_QUANT_FP8_GROUP && cfgs[ci].rule == SL_QUANT_RULE_IEEE)) {
      run_case(&rng, (int)ci, SL_DTYPE_F16, sms + 77, 2944, 2944, false);
      run_case(&rng, (int)ci, SL_DTYPE_F32, sms + 77, 2944, 2944, false);
      run_case(&rng, (int)ci, SL_DTYPE_BF16, 1000, 7168, 7168 + 64, false);
    }
  sl_kq_set_seg_override(SL_KQ_SEG_POINT);
  edge_mode = true;
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    run_case(&rng, (int)ci, SL_DTYPE_BF16, sms + 13, 2944, 2944, false);
  edge_mode = false;
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    run_case(&rng, (int)ci, SL_DTYPE_BF16, 9, 2048, 2048, true); /* NaN reported by token and block */
  /* FP4 dequantization by the per-CTA table (kernels/quant.cu DEQ_TABLE) at tensor scales in
   * and outside the fast range and near the ends of fp32 */
  static const float gss[] = {0x1p-101f, 0x1p-100f, 0x1p-61f, 0x1p-60f, 0x1p60f, 0x1p61f, 0x1p100f, 0x1p101f};
  for (size_t g = 0; g < sizeof gss / sizeof gss[0]; g++) {
    gs_override = gss[g];
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
      if (cfgs[ci].fmt == SL_QUANT_NVFP4) {
        run_case(&rng, (int)ci, SL_DTYPE_BF16, 300, 2048, 2048, false);
        run_case(&rng, (int)ci, SL_DTYPE_F16, 300, 2048, 2048, false);
      }
  }
  gs_override = 0.0f;
  sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
}

/* Staged swizzled scales (kernels/kq_launch.h sl_kq_swz_stage, quant.cu SWZ_STAGE: a CTA's 8
 * warps take rows {2k, 2k+1} x the four 32-row groups of one tile row, stage their scales in
 * shared memory and store whole sectors; the padding rows' warps write the zero scales), forced
 * on or off (staged_forced) whatever the table says. run_case poisons every output, so every
 * scale byte, the padding included, must be written and equal the CPU reference. Checks first
 * that the launch takes the forced spec (prefill shapes) or the unstaged one (decode). */
/* run_case after checking that the launch's spec carries `want` (a JIT constant and its value). */
/* The description of the spec sl_quant launches for cfgs[ci] on T rows of H elements of dt (stride `stride`). */
static void spec_desc(int ci, sl_dtype_t dt, int T, int H, long stride, char *desc, size_t n) {
  const sl_device_info_t *info = sl_device_info(dev);
  sl_quant_args_t q = {.format = cfgs[ci].fmt,
                       .rule = cfgs[ci].rule,
                       .layout = cfgs[ci].layout,
                       .num_tokens = T,
                       .hidden = H,
                       .in_dtype = dt,
                       .in_stride = stride,
                       .global_scale = 1.0f};
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_quant_spec(&q, info->arch, info->sm_count, &spec));
  sl_jit_spec_describe(&spec, desc, n);
}

static void run_checked(uint64_t *rng, int ci, sl_dtype_t dt, int T, int H, long stride, bool inject_nan,
                        const char *want) {
  char desc[512];
  spec_desc(ci, dt, T, H, stride, desc, sizeof desc);
  if (!strstr(desc, want)) fail_msg("T=%d H=%d: spec %s, want %s", T, H, desc, want);
  run_case(rng, ci, dt, T, H, stride, inject_nan);
}

static int staged_forced = 1;
static void run_staged(uint64_t *rng, int ci, sl_dtype_t dt, int T, int H, long stride, bool inject_nan) {
  const sl_device_info_t *info = sl_device_info(dev);
  char want[16];
  snprintf(want, sizeof want, "SWZ_STAGE=%d",
           staged_forced && sl_kq_warps(info->arch, info->sm_count, T) == SL_KQ_SWZ_STAGE_WARPS);
  run_checked(rng, ci, dt, T, H, stride, inject_nan, want);
}

/* The staged variant on every swizzled format and rule: T not a multiple of 128 (the last tile
 * row partly padding rows; a last tile row of one row), T a multiple of 128, hidden 2048 / 7168
 * (whole segments), 2944 (ragged rows, a short last segment), 2080 (a partial column tile: 65
 * MX / 130 NVFP4 columns, the column padding inside the stage), strided rows, decode (not
 * staged), f16 / f32, segment lengths 3 and 64, edge values, NaN blocks reported, NVFP4 tensor
 * scales at the ends of the range. Then the first group of shapes forced unstaged, since the
 * table stages some formats (the other tests run the table's choice). */
static void test_swz_staged(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_device_info_t *info = sl_device_info(dev);
  int sms = info->sm_count, ru = (sms + 127) / 128 * 128;
  /* the table's segment length, or the registered point where the table has the item layout */
  int base_seg = sl_kq_arch_cfg(info->arch)->seg > 0 ? SL_KQ_SEG_TABLE : SL_KQ_SEG_POINT;
  sl_kq_set_seg_override(base_seg);
  for (staged_forced = 1; staged_forced >= 0; staged_forced--) {
    sl_kq_set_swz_stage_override(staged_forced);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
      if (cfgs[ci].layout != SL_QUANT_LAYOUT_SWIZZLED) continue;
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2944, 2944, false);
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, ru + 1, 2048, 2048, false);
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2080, 2080, false);
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 9, 2048, 2048, true);
    }
  }
  staged_forced = 1;
  sl_kq_set_swz_stage_override(1);
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
    if (cfgs[ci].layout != SL_QUANT_LAYOUT_SWIZZLED) continue;
    run_staged(&rng, (int)ci, SL_DTYPE_BF16, ru + 128, 7168, 7168, false);
    run_staged(&rng, (int)ci, SL_DTYPE_BF16, 1000, 7168, 7168 + 64, false);
    run_staged(&rng, (int)ci, SL_DTYPE_BF16, 3, 2048, 2048, false);
    if (cfgs[ci].rule != SL_QUANT_RULE_CEIL) { /* one rule per format for the other dtypes */
      run_staged(&rng, (int)ci, SL_DTYPE_F16, sms + 77, 2944, 2944, false);
      run_staged(&rng, (int)ci, SL_DTYPE_F32, sms + 77, 2944, 2944, false);
      run_staged(&rng, (int)ci, SL_DTYPE_F32, sms + 77, 2080, 2080, false);
    }
    edge_mode = true;
    run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 13, 2944, 2944, false);
    edge_mode = false;
  }
  static const int segs[] = {3, 64};
  for (size_t si = 0; si < sizeof segs / sizeof segs[0]; si++) {
    sl_kq_set_seg_override(segs[si]);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
      if (cfgs[ci].layout != SL_QUANT_LAYOUT_SWIZZLED) continue;
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2944, 2944, false);
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2080, 2080, false);
      run_staged(&rng, (int)ci, SL_DTYPE_BF16, ru + 1, 7168, 7168, false);
    }
  }
  sl_kq_set_seg_override(base_seg);
  static const float gss[] = {0x1p-101f, 0x1p-61f, 0x1p60f, 0x1p101f};
  for (size_t g = 0; g < sizeof gss / sizeof gss[0]; g++) {
    gs_override = gss[g];
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
      if (cfgs[ci].fmt == SL_QUANT_NVFP4 && cfgs[ci].layout == SL_QUANT_LAYOUT_SWIZZLED)
        run_staged(&rng, (int)ci, SL_DTYPE_BF16, 300, 2048, 2048, false);
  }
  gs_override = 0.0f;
  sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
  sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
}

/* The FP4 quantizers with half a block per lane (QPAIR 2, MXFP4), a whole block per lane (quant.cu
 * QPAIR 1: NVFP4 16 elements, MXFP4 32, both MX rules) and one packet forced, on both scale layouts
 * (swizzled with the table's staging; MXFP4's half block staged too): T not a multiple of 128,
 * h=2048 / 4096 / 7168, f16, strided rows, edge values (with blocks below 2^-100: the MXFP4
 * exponent's out-of-line reference), NaN blocks reported, NVFP4 tensor scales at the ends of the
 * range; codes, scales and the dequantized values bit-exact with the CPU (run_case). Checks that
 * the forced launch takes QPAIR=2, 1 or 0. */
static void run_pair(uint64_t *rng, int ci, sl_dtype_t dt, int T, int H, long stride, bool inject_nan, int want) {
  char w[16];
  snprintf(w, sizeof w, "QPAIR=%d", want);
  run_checked(rng, ci, dt, T, H, stride, inject_nan, w);
}

static void test_qpair(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_device_info_t *info = sl_device_info(dev);
  int sms = info->sm_count, ru = (sms + 127) / 128 * 128;
  if (sl_kq_arch_cfg(info->arch)->seg <= 0) sl_kq_set_seg_override(4); /* the item layout's table: segments */
  for (int on = 2; on >= 0; on--) { /* 2: MXFP4's half block per lane */
    sl_kq_set_qpair_override(on);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
      if (cfgs[ci].fmt != SL_QUANT_NVFP4 && cfgs[ci].fmt != SL_QUANT_MXFP4) continue;
      if (on == 2 && cfgs[ci].fmt != SL_QUANT_MXFP4) continue;
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2048, 2048, false, on);
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, ru + 1, 4096, 4096, false, on);
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 5, 7168, 7168, false, on);
      run_pair(&rng, (int)ci, SL_DTYPE_F16, sms + 77, 2048, 2048, false, on);
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, 1000, 7168, 7168 + 64, false, on);
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 9, 2048, 2048, true, on);
      edge_mode = true;
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 13, 2048, 2048, false, on);
      tiny_mode = true;
      run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 21, 4096, 4096, false, on);
      tiny_mode = edge_mode = false;
      if (on == 2 && cfgs[ci].layout == SL_QUANT_LAYOUT_SWIZZLED) { /* the half block's staged scales */
        sl_kq_set_swz_stage_override(1);
        run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 77, 2048, 2048, false, on);
        run_pair(&rng, (int)ci, SL_DTYPE_BF16, ru + 1, 4096, 4096, false, on);
        run_pair(&rng, (int)ci, SL_DTYPE_BF16, 1000, 7168, 7168 + 64, true, on);
        edge_mode = true;
        run_pair(&rng, (int)ci, SL_DTYPE_BF16, sms + 13, 2048, 2048, false, on);
        edge_mode = false;
        sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
      }
      if (cfgs[ci].fmt != SL_QUANT_NVFP4) continue; /* the tensor scale is NVFP4's */
      static const float gss[] = {0x1p-101f, 0x1p-61f, 0x1p60f, 0x1p101f};
      for (size_t g = 0; g < sizeof gss / sizeof gss[0]; g++) {
        gs_override = gss[g];
        run_pair(&rng, (int)ci, SL_DTYPE_BF16, 300, 2048, 2048, false, on);
      }
      gs_override = 0.0f;
    }
  }
  sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
  sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
}

/* kernels/quant_dev.cuh's reciprocals (the library's fast paths without their range checks: sl_kq_rcp_rn for the FP8
 * IEEE scale's divisions, sl_kq_rcp_rd for the 2-instruction rule of 16-bit inputs) against __frcp_rn / __frcp_rd at
 * every fp32 of their range [2^-125, 2^125): 250 exponents x 2^23 mantissas, on the GPU (kernels/quant_selftest.cu):
 * no mismatch, and the first-mismatch slot (0xffffffff) untouched. */
static void check_rcp(int rd) {
  unsigned *d = NULL, h[2] = {1u, 0u};
  SL_ASSERT_OK(sl_device_malloc(dev, 2 * sizeof(unsigned), (void **)&d));
  SL_ASSERT_OK(sl_memset(dev, d, 0, sizeof(unsigned), NULL));
  SL_ASSERT_OK(sl_memset(dev, d + 1, 0xff, sizeof(unsigned), NULL));
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/quant_selftest.cu", "sl_rcp_selftest");
  sl_kernel_t *k;
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &k));
  unsigned e_lo = 2, e_hi = 251; /* 2^-125 <= s < 2^125 */
  unsigned *mism = d, *first = d + 1;
  void *args[] = {&e_lo, &e_hi, &rd, &mism, &first};
  sl_launch_t l = {.grid = {(unsigned)sl_device_info(dev)->sm_count * 16, 1, 1}, .block = {256, 1, 1}};
  SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
  SL_ASSERT_OK(sl_device_check(dev, "rcp self-test"));
  SL_ASSERT_OK(sl_memcpy(dev, h, d, sizeof h, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  if (h[0] != 0)
    fail_msg("sl_kq_rcp_%s differs from __frcp_%s at %u values, the first s = 0x%08x", rd ? "rd" : "rn",
             rd ? "rd" : "rn", h[0], h[1]);
  assert_int_equal(h[1], 0xffffffffu);
  sl_device_free(dev, d);
}
static void test_rcp_rn(void **state) {
  (void)state;
  check_rcp(0);
}
static void test_rcp_rd(void **state) {
  (void)state;
  check_rcp(1);
}

/* The FP8 group quantizer's small prefill launch (kq_launch.h q8_small: from SMs rows below 256 warp items per SM,
 * 4 warps, one item per warp in the item layout, compiled for 16 blocks per SM), each rule and input dtype, ragged
 * (2944) and strided wide rows, edge values (the slow paths at 32 registers), NaN blocks reported; then rows past
 * the point, which keep the prefill launch (8 warps, segments). Each case checks the launch it takes. */
static void test_q8_small(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_device_info_t *info = sl_device_info(dev);
  const sl_kq_arch_cfg_t *ac = sl_kq_arch_cfg(info->arch);
  const int sms = info->sm_count;
  char small[24], prefill[16];
  snprintf(small, sizeof small, ac->q8_small ? "MIN_BLOCKS=%d" : "WARPS=%d",
           ac->q8_small ? 2048 / (ac->prefill_warps / 2 * 32) : ac->prefill_warps);
  snprintf(prefill, sizeof prefill, "WARPS=%d", ac->prefill_warps);
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int ci = 0; ci < 2; ci++) { /* cfgs[0..1]: the FP8 group format, IEEE and UE8M0 scales */
    assert_int_equal(cfgs[ci].fmt, SL_QUANT_FP8_GROUP);
    for (int d = 0; d < 3; d++) {
      run_checked(&rng, ci, dts[d], sms + 77, 2944, 2944, false, small); /* 12 / 23 chunks: 19 / 36 per SM */
      run_checked(&rng, ci, dts[d], 24 * sms + 7, 2944, 2944, false, prefill); /* >= 288 per SM */
    }
    run_checked(&rng, ci, SL_DTYPE_BF16, 1200 * sms / 132, 7168, 7168 + 64, false, small); /* 28 chunks: 255 */
    run_checked(&rng, ci, SL_DTYPE_BF16, sms + 9, 2048, 2048, true, small);
    edge_mode = true;
    run_checked(&rng, ci, SL_DTYPE_BF16, sms + 13, 2944, 2944, false, small);
    tiny_mode = true;
    run_checked(&rng, ci, SL_DTYPE_BF16, sms + 21, 4096, 4096, false, small);
    run_checked(&rng, ci, SL_DTYPE_F32, sms + 21, 4096, 4096, false, small);
    tiny_mode = edge_mode = false;
  }
}

/* Whether the spec sl_quant launches for cfgs[ci] on T dense rows of H elements of dt names `def`. */
static bool spec_names(int ci, sl_dtype_t dt, int T, int H, const char *def) {
  char desc[512];
  spec_desc(ci, dt, T, H, H, desc, sizeof desc);
  return strstr(desc, def) != NULL;
}

/* The FP8 IEEE group quantizer's straight-line decode path (quant.cu QLINE; kq_launch.h q8_line_rows): taken up to the
 * table's rows at hidden <= SL_KQ_Q8_LINE_MAX_HIDDEN and nowhere else, and bit for bit the CPU reference there --
 * random rows, rounding boundaries, tiny blocks (below 2^-55 and 2^-100: the exact path behind the warp vote), zero
 * blocks (f16 flushes the tiny ones) and a NaN block (reported, NaN scale and codes). */
static void test_q8_line(void **state) {
  uint64_t rng = sl_test_seed();
  const int rows = sl_kq_arch_cfg(sl_device_info(dev)->arch)->q8_line_rows;
  if (!rows) skip(); /* not in this arch's table */
  assert_true(cfgs[0].fmt == SL_QUANT_FP8_GROUP && cfgs[0].rule == SL_QUANT_RULE_IEEE);
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16};
  const int Ts[] = {1, 5, rows}, Hs[] = {2048, SL_KQ_Q8_LINE_MAX_HIDDEN};
  for (int d = 0; d < 2; d++)
    for (int h = 0; h < 2; h++)
      for (int t = 0; t < 3; t++) {
        run_checked(&rng, 0, dts[d], Ts[t], Hs[h], Hs[h], false, "QLINE=1");
        edge_mode = tiny_mode = true;
        run_checked(&rng, 0, dts[d], Ts[t], Hs[h], Hs[h], false, "QLINE=1");
        edge_mode = tiny_mode = false;
      }
  run_checked(&rng, 0, SL_DTYPE_BF16, 3, 2048, 2048, true, "QLINE=1");
  /* forced beyond the table's bounds (the benchmark's comparison rows): more rows, a wider row */
  sl_kq_set_q8_line_override(1);
  edge_mode = tiny_mode = true;
  run_checked(&rng, 0, SL_DTYPE_BF16, 40, 7168, 7168, false, "QLINE=1");
  run_checked(&rng, 0, SL_DTYPE_F16, 40, 7168, 7168, false, "QLINE=1");
  edge_mode = tiny_mode = false;
  sl_kq_set_q8_line_override(SL_KQ_Q8_LINE_TABLE);
  /* not taken: more rows, a wider row, f32 inputs, rows of a partial chunk, the UE8M0 rule */
  assert_false(spec_names(0, SL_DTYPE_BF16, rows + 1, 2048, "QLINE"));
  assert_false(spec_names(0, SL_DTYPE_BF16, 1, 7168, "QLINE"));
  assert_false(spec_names(0, SL_DTYPE_F32, 1, 2048, "QLINE"));
  assert_false(spec_names(0, SL_DTYPE_BF16, 1, 2944, "QLINE"));
  assert_false(spec_names(1, SL_DTYPE_BF16, 1, 2048, "QLINE"));
}

/* The FP8 IEEE group quantizer's 2-instruction quotient of 16-bit inputs (quant_formats.h sl_qf_div16_fast) on
 * blocks full of exact ties (fill_ties), bit for bit the CPU reference's IEEE division, in every launch the table
 * picks for it: the straight-line decode path (T=1), the decode launch (T=40, H=7168), the small prefill (T=1024)
 * and the prefill segment layout (T=4096), bf16 and f16, contiguous and strided rows. */
static void test_fp8_ties(void **state) {
  uint64_t rng = sl_test_seed();
  assert_true(cfgs[0].fmt == SL_QUANT_FP8_GROUP && cfgs[0].rule == SL_QUANT_RULE_IEEE);
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16};
  const struct {
    int T, H;
    long stride;
  } sh[] = {{1, 2048, 2048},    {40, 7168, 7168},   {1024, 2048, 2048},
            {1024, 7168, 7296}, {4096, 4096, 4096}, {4096, 2048, 2176}};
  tie_mode = true;
  for (int d = 0; d < 2; d++)
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
      run_case(&rng, 0, dts[d], sh[i].T, sh[i].H, sh[i].stride, false);
  tie_mode = false;
}

/* Dequantization of arbitrary codes and scale bytes (every value: negative and NaN NVFP4 scales,
 * E8M0 NaN, which the quantizer never writes) on both layouts (the FP4 16-bit outputs of the
 * segment layout go through the per-CTA table, at the table's segment length and the registered
 * point; NVFP4 also at tensor scales outside the fast quotient's range and where f16 overflows):
 * bit-exact with the CPU reference, NaN where it gives NaN. */
static void test_dequant_any_bytes(void **state) {
  uint64_t rng = sl_test_seed();
  const int T = 300, H = 2048;
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  static const int segs[] = {0, 4, SL_KQ_SEG_POINT};
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
    if (!sl_qfmt_is_fp4((int)cfgs[ci].fmt) || cfgs[ci].rule == SL_QUANT_RULE_CEIL) continue;
    size_t cb = sl_quant_codes_bytes(cfgs[ci].fmt, T, H), sb = sl_quant_scales_bytes(cfgs[ci].fmt, cfgs[ci].layout, T, H);
    uint8_t *codes = malloc(cb), *scales = malloc(sb);
    for (size_t i = 0; i < cb; i++)
      codes[i] = (uint8_t)sl_test_rand_u64(&rng);
    for (size_t i = 0; i < sb; i++)
      scales[i] = (uint8_t)(i < 256 ? i : sl_test_rand_u64(&rng)); /* every byte at least once */
    void *d_codes = dev_alloc(cb), *d_scales = dev_alloc(sb);
    SL_ASSERT_OK(sl_memcpy(dev, d_codes, codes, cb, NULL));
    SL_ASSERT_OK(sl_memcpy(dev, d_scales, scales, sb, NULL));
    /* 2^-10: in the fast quotient's range; f16 overflows at the larger scale bytes */
    static const float gss[] = {448.0f * 6.0f / 3.0f, 0x1p-10f, 0x1p-61f, 0x1p61f, 0x1p-100f};
    const int ngs = cfgs[ci].fmt == SL_QUANT_NVFP4 ? 5 : 1;
    for (int run = 0; run < 3 * 3 * ngs; run++) {
      const int d = run % 3, si = run / 3 % 3, gi = run / 9;
      /* the other tensor scales where the table is built: 16-bit outputs in the segment layout (2^-61 /
       * 2^61 and 2^-100: outside the fast quotient's range; 2^-10: f16 overflows, so refused entries,
       * negative bytes among them) */
      if (gi > 0 && (dts[d] == SL_DTYPE_F32 || segs[si] == 0)) continue;
      const int seg = segs[si];
      sl_kq_set_seg_override(seg);
      size_t eb = sl_dtype_bits(dts[d]) / 8, ob = (size_t)T * H * eb;
      void *d_out = dev_alloc(ob), *h_out = malloc(ob), *r_out = malloc(ob);
      sl_test_poison(dev, d_out, ob);
      sl_dequant_args_t a = {.format = cfgs[ci].fmt,
                             .layout = cfgs[ci].layout,
                             .num_tokens = T,
                             .hidden = H,
                             .codes = d_codes,
                             .scales = d_scales,
                             .global_scale = gss[gi],
                             .out_dtype = dts[d],
                             .out = d_out};
      SL_ASSERT_OK(sl_dequant(dev, &a, NULL));
      SL_ASSERT_OK(sl_device_sync(dev));
      SL_ASSERT_OK(sl_device_check(dev, "dequant kernel"));
      SL_ASSERT_OK(sl_memcpy(dev, h_out, d_out, ob, NULL));
      SL_ASSERT_OK(sl_device_sync(dev));
      a.codes = codes;
      a.scales = scales;
      a.out = r_out;
      SL_ASSERT_OK(sl_dequant_ref(&a));
      size_t bad = 0;
      for (size_t k = 0; k < (size_t)T * H; k++) {
        uint32_t g = 0, w = 0;
        memcpy(&g, (char *)h_out + k * eb, eb);
        memcpy(&w, (char *)r_out + k * eb, eb);
        float gv = sl_load_f32(h_out, dts[d], k), wv = sl_load_f32(r_out, dts[d], k);
        if ((isnan(wv) ? !isnan(gv) : g != w) && bad++ < 5)
          fprintf(stderr,
                  "  format %d layout %d %s seg %d gs %g: element %zu gpu %g (0x%x) cpu %g (0x%x)\n",
                  (int)cfgs[ci].fmt, (int)cfgs[ci].layout, sl_dtype_name(dts[d]), seg, (double)gss[gi], k,
                  (double)gv, g, (double)wv, w);
      }
      if (bad)
        fail_msg("format %d layout %d %s seg %d gs %g: %zu dequantized elements differ", (int)cfgs[ci].fmt,
                 (int)cfgs[ci].layout, sl_dtype_name(dts[d]), seg, (double)gss[gi], bad);
      sl_device_free(dev, d_out);
      free(h_out), free(r_out);
    }
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    sl_device_free(dev, d_codes), sl_device_free(dev, d_scales);
    free(codes), free(scales);
  }
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_formats),
      cmocka_unit_test(test_wide_rows_strides),
      cmocka_unit_test(test_nan_reported),
      cmocka_unit_test(test_edge_values),
      cmocka_unit_test(test_nvfp4_scale_range),
      cmocka_unit_test(test_segment_layouts),
      cmocka_unit_test(test_swz_staged),
      cmocka_unit_test(test_dequant_any_bytes),
      cmocka_unit_test(test_qpair),
      cmocka_unit_test(test_q8_small),
      cmocka_unit_test(test_q8_line),
      cmocka_unit_test(test_fp8_ties),
      cmocka_unit_test(test_rcp_rn),
      cmocka_unit_test(test_rcp_rd),
  };
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
