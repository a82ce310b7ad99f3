/* GPU tests of sl_act: fresh random inputs, poisoned outputs, both activations, every input
 * dtype, float outputs within 2 ulp of the CPU backend, fused FP8 outputs: scales equal up to
 * the fp32 rounding of the activations, codes within one E4M3 step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/act.h"
#include "kernels/kq_launch.h"
#include "kernels/quant.h"
#include "sl_test.h"

static sl_device_t *dev;

static double ulp_of(sl_dtype_t t, double v) {
  int e;
  frexp(fabs(v) > 1e-30 ? v : 1e-30, &e);
  int mant = t == SL_DTYPE_BF16 ? 8 : t == SL_DTYPE_F16 ? 11 : 24;
  double u = ldexp(1.0, e - mant);
  if (t == SL_DTYPE_F16 && u < ldexp(1.0, -24)) u = ldexp(1.0, -24);
  return u;
}

static void run_case(uint64_t *rng, sl_act_kind_t kind, sl_dtype_t in_t, sl_dtype_t out_t, bool ue8m0, int T, int I) {
  bool fp8 = out_t == SL_DTYPE_FP8_E4M3;
  size_t ib = sl_dtype_bits(in_t) / 8, ob = fp8 ? 1 : sl_dtype_bits(out_t) / 8;
  size_t in_bytes = (size_t)T * 2 * I * ib, out_bytes = (size_t)T * I * ob, sc_bytes = (size_t)T * (I / 128) * 4;
  void *h_in = malloc(in_bytes), *h_out = malloc(out_bytes), *r_out = malloc(out_bytes);
  float *h_sc = malloc(sc_bytes + 4), *r_sc = malloc(sc_bytes + 4);
  for (size_t i = 0; i < (size_t)T * 2 * I; i++)
    sl_store_f32(h_in, in_t, i, 3.0f * sl_test_rand_normal(rng));
  void *d_in, *d_out, *d_sc = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, in_bytes, &d_in));
  SL_ASSERT_OK(sl_device_malloc(dev, out_bytes, &d_out));
  if (fp8) SL_ASSERT_OK(sl_device_malloc(dev, sc_bytes, &d_sc));
  SL_ASSERT_OK(sl_memcpy(dev, d_in, h_in, in_bytes, NULL));
  sl_test_poison(dev, d_out, out_bytes);
  if (fp8) sl_test_poison(dev, d_sc, sc_bytes);
  sl_act_args_t a = {.kind = kind,
                     .num_tokens = T,
                     .inter = I,
                     .in_dtype = in_t,
                     .out_dtype = out_t,
                     .in = d_in,
                     .out = d_out,
                     .out_scales = d_sc,
                     .scale_ue8m0 = ue8m0};
  char what[128];
  snprintf(what, sizeof what, "act %d %s->%s%s T=%d I=%d", (int)kind, sl_dtype_name(in_t), sl_dtype_name(out_t),
           ue8m0 ? " ue8m0" : "", T, I);
  sl_status_t s = sl_act(dev, &a, NULL);
  if (s != SL_OK) fail_msg("%s: %s: %s", what, sl_status_str(s), sl_last_error());
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, "act kernel"));
  SL_ASSERT_OK(sl_memcpy(dev, h_out, d_out, out_bytes, NULL));
  if (fp8) SL_ASSERT_OK(sl_memcpy(dev, h_sc, d_sc, sc_bytes, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  a.in = h_in;
  a.out = r_out;
  a.out_scales = r_sc;
  SL_ASSERT_OK(sl_act_ref(&a));
  size_t bad = 0, code_diff = 0;
  /* IEEE scales of activations that differ by a few fp32 ulp (expf: CUDA's vs the C library's),
   * or with SiLU's e^-g by ex2.approx into FP8 (kernels/act.cu FASTEXP) by its ~2^-17 bound, GELU's
   * e^-2z by its ~2^-15.5 */
  const int arch = sl_device_info(dev)->arch;
  const bool gelu = kind == SL_ACT_GELU_TANH_MUL;
  const bool fast = fp8 && (gelu ? sl_kq_gelu_fast_exp(arch) : sl_kq_act8_fast_exp(arch));
  const double scale_rel = fast ? ldexp(1.0, gelu ? -15 : -17) : 1e-6;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < I; i++) {
      size_t k = (size_t)t * I + i;
      double g = sl_load_f32(h_in, in_t, (size_t)t * 2 * I + i), u = sl_load_f32(h_in, in_t, (size_t)t * 2 * I + I + i);
      double got, want, tol;
      if (fp8) {
        float gs = h_sc[t * (I / 128) + i / 128], ws = r_sc[t * (I / 128) + i / 128];
        uint8_t gc = ((uint8_t *)h_out)[k], wc = ((uint8_t *)r_out)[k];
        /* scales: the same rule on activations that differ by a few fp32 ulp */
        if (!(fabs(gs - ws) <= (ue8m0 ? 0.0 : scale_rel * ws)) && !(ue8m0 && (gs == 2 * ws || ws == 2 * gs))) {
          if (bad++ < 5) fprintf(stderr, "  %s: t %d group %d scale gpu %g cpu %g\n", what, t, i / 128, gs, ws);
          continue;
        }
        got = sl_e4m3_to_f32(gc) * (double)gs;
        want = sl_e4m3_to_f32(wc) * (double)ws;
        if (gc != wc) code_diff++;
        tol = fabs(want) * 0.13 + 2.0 * fmax(gs, ws) * ldexp(1.0, -9) + 1e-30; /* one E4M3 step */
        if (gc == 0x7f || (gc & 0x7f) == 0x7f) got = NAN;
      } else {
        got = sl_load_f32(h_out, out_t, k);
        want = sl_load_f32(r_out, out_t, k);
        tol = 2 * ulp_of(out_t, want) + 8 * ulp_of(SL_DTYPE_F32, want);
        if (kind == SL_ACT_GELU_TANH_MUL) tol += 4 * ldexp(1.0, -24) * 0.5 * fabs(g * u); /* 1 + tanh cancels */
      }
      if (!(fabs(got - want) <= tol) && bad++ < 5)
        fprintf(stderr, "  %s: t %d i %d: gpu %.9g cpu %.9g (g %g u %g)\n", what, t, i, got, want, g, u);
    }
  if (bad) fail_msg("%s: %zu elements differ from the CPU backend beyond tolerance", what, bad);
  if (fp8 && code_diff > (size_t)T * I / 100)
    fail_msg("%s: %zu of %zu FP8 codes differ (more than 1%%)", what, code_diff, (size_t)T * I);
  sl_device_free(dev, d_in), sl_device_free(dev, d_out), sl_device_free(dev, d_sc);
  free(h_in), free(h_out), free(r_out), free(h_sc), free(r_sc);
}

static void test_act_all(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  int sms = sl_device_info(dev)->sm_count;
  const int Ts[] = {2, sms + 45};
  for (int kind = 0; kind < 2; kind++)
    for (int d = 0; d < 3; d++)
      for (int ti = 0; ti < 2; ti++) {
        run_case(&rng, (sl_act_kind_t)kind, dts[d], dts[d], false, Ts[ti], 768);
        run_case(&rng, (sl_act_kind_t)kind, dts[d], SL_DTYPE_FP8_E4M3, false, Ts[ti], 768);
        run_case(&rng, (sl_act_kind_t)kind, dts[d], SL_DTYPE_FP8_E4M3, true, Ts[ti], 768);
      }
  /* 640 = 2.5 bf16 warp chunks: tail lanes idle, FP8 groups still whole */
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, 300, 640);
  run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_F16, SL_DTYPE_F16, false, 3, 640);
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_F32, false, 300, 2048);
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_F32, SL_DTYPE_BF16, false, 300, 2048);
  run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, SL_DTYPE_BF16, false, 1, 7168);
  /* fewer rows than SMs but >= 4 warp items per SM: the 16-bit outputs take the prefill warps
   * (kernels/kq_launch.h act16_wide_items), 2944 = 11.5 chunks (ragged); FP8 out keeps one warp */
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_BF16, false, sms - 5, 2944);
  run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_F16, SL_DTYPE_F32, false, sms - 5, 2944);
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, sms - 5, 2944);
  /* ... and below 8 items per SM half the prefill warps (SL_KQ_ACT16_HALF_ITEMS): 2048 = 8 chunks */
  run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_BF16, false, sms - 5, 2048);
  run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_F16, SL_DTYPE_F32, false, sms - 5, 2048);
}

/* The one-item decode kernel's lane width from and into 16-bit dtypes (kernels/act.cu PACK, kq_launch.h
 * act16_pack), each forced: 200 columns are ragged at every width (the tail lanes return early), 2048 / 7168 the
 * models'; one row, a few, and 16 (near the one-item bound at 4 bytes for 7168: 13.6 blocks per SM on the H200); bf16
 * and f16, and bf16 into f16. */
static void test_act_pack(void **state) {
  uint64_t rng = sl_test_seed();
  static const int packs[] = {16, 8, 4}, inters[] = {200, 2048, 7168}, Ts[] = {1, 3, 16};
  for (int p = 0; p < 3; p++) {
    sl_kq_set_act16_pack_override(packs[p]);
    for (int kind = 0; kind < 2; kind++)
      for (int i = 0; i < 3; i++)
        for (int t = 0; t < 3; t++) {
          const sl_dtype_t in = (i + t) % 2 ? SL_DTYPE_F16 : SL_DTYPE_BF16;
          run_case(&rng, (sl_act_kind_t)kind, in, in, false, Ts[t], inters[i]);
        }
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_F16, false, 2, 2048);
  }
  sl_kq_set_act16_pack_override(0);
}

/* The segment layout (kernels/kq_launch.h), forced by the override: 640 columns = 2.5 bf16
 * chunks (ragged; segment 3 holds the whole row, 1 splits it in 3 tasks of one chunk, odd
 * against UNROLL 2), 7168 = 28 chunks in segments of 8 (the last of 4), every output kind. */
static void test_act_segments(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  static const int segs[] = {1, 3, SL_KQ_SEG_POINT};
  for (size_t si = 0; si < sizeof segs / sizeof segs[0]; si++) {
    sl_kq_set_seg_override(segs[si]);
    for (int kind = 0; kind < 2; kind++) {
      run_case(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, SL_DTYPE_BF16, false, sms + 45, 640);
      run_case(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, sms + 45, 640);
      run_case(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, true, sms + 45, 640);
    }
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_F32, SL_DTYPE_FP8_E4M3, false, 300, 768);
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_F16, SL_DTYPE_F16, false, 2, 768);
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, 300, 7168);
  }
  sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
}

/* SiLU into FP8 with either exp forced (kq_launch.h act8_fast_exp): decode (one warp per block),
 * prefill in the segment layout and the item layout, both scale rules, every input dtype. */
static void test_act_fp8_exp(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int f = 0; f < 2; f++) {
    sl_kq_set_act8_fast_exp_override(f);
    for (int d = 0; d < 3; d++)
      for (int ue = 0; ue < 2; ue++) {
        run_case(&rng, SL_ACT_SILU_MUL, dts[d], SL_DTYPE_FP8_E4M3, ue, 3, 768);
        run_case(&rng, SL_ACT_SILU_MUL, dts[d], SL_DTYPE_FP8_E4M3, ue, sms + 45, 2048);
      }
    sl_kq_set_seg_override(0);
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, sms + 45, 640);
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    run_case(&rng, SL_ACT_SILU_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, 300, 7168);
  }
  sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
}

/* GELU(tanh) into 16-bit outputs at the inputs where its two forms part (kernels/act.cu FASTEXP: 2 / (1 +
 * e^-2z) for 1 + tanh(z)): zeros, tiny and huge magnitudes (g^3 overflows), the range where tanhf's 1 +
 * tanh cancels (g ~ -3 .. -10), +-Inf and NaN -- against the CPU backend: NaN where it has NaN, else
 * within the tolerance of run_case (the cancellation term included). One row per position of the
 * list in the gate half, up = 1.5, so every value meets every lane position of some row. */
static void gelu_edge_case(sl_dtype_t dt) {
  static const float gs[] = {0.0f,  -0.0f, 1e-30f, -1e-30f, 1e-4f,  -1e-4f, 0.5f,   -0.5f,  1.0f,    -1.0f,
                             3.0f,  -3.0f, 5.0f,   -5.0f,   7.5f,   -7.5f,  9.0f,   -9.0f,  20.0f,   -20.0f,
                             1e20f, -1e20f, 3e38f, -3e38f,  INFINITY, -INFINITY, NAN, -2.25f, 0.0625f, -6.5f};
  const int n = (int)(sizeof gs / sizeof gs[0]), I = 256, T = n;
  const size_t eb = sl_dtype_bits(dt) / 8;
  void *h_in = malloc((size_t)T * 2 * I * eb), *h_out = malloc((size_t)T * I * eb), *r_out = malloc((size_t)T * I * eb);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < I; i++) {
      sl_store_f32(h_in, dt, (size_t)t * 2 * I + i, gs[(t + i) % n]);
      sl_store_f32(h_in, dt, (size_t)t * 2 * I + I + i, 1.5f);
    }
  void *d_in, *d_out;
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)T * 2 * I * eb, &d_in));
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)T * I * eb, &d_out));
  SL_ASSERT_OK(sl_memcpy(dev, d_in, h_in, (size_t)T * 2 * I * eb, NULL));
  sl_test_poison(dev, d_out, (size_t)T * I * eb);
  sl_act_args_t a = {.kind = SL_ACT_GELU_TANH_MUL, .num_tokens = T, .inter = I, .in_dtype = dt, .out_dtype = dt};
  a.in = d_in, a.out = d_out;
  SL_ASSERT_OK(sl_act(dev, &a, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, "gelu edge"));
  SL_ASSERT_OK(sl_memcpy(dev, h_out, d_out, (size_t)T * I * eb, NULL));
  a.in = h_in, a.out = r_out;
  SL_ASSERT_OK(sl_act_ref(&a));
  size_t bad = 0;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < I; i++) {
      const size_t k = (size_t)t * I + i;
      const double g = sl_load_f32(h_in, dt, (size_t)t * 2 * I + i), u = 1.5;
      const double got = sl_load_f32(h_out, dt, k), want = sl_load_f32(r_out, dt, k);
      const double tol = 2 * ulp_of(dt, want) + 8 * ulp_of(SL_DTYPE_F32, want) + 4 * ldexp(1.0, -24) * 0.5 * fabs(g * u);
      /* NaN never passes as a number; infinities must match exactly (Inf - Inf is NaN) */
      const bool ok = isnan(want) ? isnan(got) : got == want || fabs(got - want) <= tol;
      if (!ok && bad++ < 5) fprintf(stderr, "  gelu edge %s: g %g: gpu %.9g cpu %.9g\n", sl_dtype_name(dt), g, got, want);
    }
  if (bad) fail_msg("gelu edge %s: %zu elements differ from the CPU backend", sl_dtype_name(dt), bad);
  sl_device_free(dev, d_in), sl_device_free(dev, d_out);
  free(h_in), free(h_out), free(r_out);
}

/* GELU(tanh) with either form of 1 + tanh(z) forced (kq_launch.h gelu_fast_exp): decode (the one-item
 * kernel), fewer rows than SMs (the 16-bit outputs' wide launch), prefill in the table's layout and the
 * item layout, ragged rows, every input dtype, 16-bit and FP8 outputs (both scale rules), and the edge
 * values. fp32 outputs keep tanhf whatever the override (test_act_all). */
static void test_act_gelu_tanh(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int f = 0; f < 2; f++) {
    sl_kq_set_gelu_fast_exp_override(f);
    for (int d = 0; d < 3; d++) {
      const sl_dtype_t o16 = dts[d] == SL_DTYPE_F16 ? SL_DTYPE_F16 : SL_DTYPE_BF16;
      run_case(&rng, SL_ACT_GELU_TANH_MUL, dts[d], o16, false, 1, 2048);
      run_case(&rng, SL_ACT_GELU_TANH_MUL, dts[d], o16, false, sms - 5, 2944);
      run_case(&rng, SL_ACT_GELU_TANH_MUL, dts[d], o16, false, sms + 45, 7168);
      for (int ue = 0; ue < 2; ue++) {
        run_case(&rng, SL_ACT_GELU_TANH_MUL, dts[d], SL_DTYPE_FP8_E4M3, ue, 3, 768);
        run_case(&rng, SL_ACT_GELU_TANH_MUL, dts[d], SL_DTYPE_FP8_E4M3, ue, sms + 45, 2048);
      }
    }
    sl_kq_set_seg_override(0);
    run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, SL_DTYPE_BF16, false, sms + 45, 640);
    run_case(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, SL_DTYPE_FP8_E4M3, false, sms + 45, 640);
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    gelu_edge_case(SL_DTYPE_BF16);
    gelu_edge_case(SL_DTYPE_F16);
  }
  sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
}

/* A NaN in the input of the FP8 variant is marked in the scales and reported by the check. */
static void fp8_nan_case(void) {
  const int T = 4, I = 256;
  uint16_t h_in[4 * 512];
  for (int i = 0; i < T * 2 * I; i++)
    h_in[i] = sl_f32_to_bf16(0.25f);
  h_in[2 * 2 * I + I + 200] = 0x7fc0; /* token 2, up of element 200 (group 1) */
  void *d_in, *d_out, *d_sc;
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof h_in, &d_in));
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)T * I, &d_out));
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)T * 2 * 4, &d_sc));
  SL_ASSERT_OK(sl_memcpy(dev, d_in, h_in, sizeof h_in, NULL));
  sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = T,
                     .inter = I,
                     .in_dtype = SL_DTYPE_BF16,
                     .out_dtype = SL_DTYPE_FP8_E4M3,
                     .in = d_in,
                     .out = d_out,
                     .out_scales = d_sc};
  SL_ASSERT_OK(sl_act(dev, &a, NULL));
  sl_clear_error();
  assert_int_equal(sl_quant_check_scales(dev, SL_QUANT_FP8_GROUP, SL_QUANT_LAYOUT_LINEAR, T, I, d_sc, NULL),
                   SL_ERR_NUMERIC);
  assert_non_null(strstr(sl_last_error(), "token 2, block 1"));
  sl_device_free(dev, d_in), sl_device_free(dev, d_out), sl_device_free(dev, d_sc);
}
static void test_act_fp8_nan(void **state) {
  for (int f = 0; f < 2; f++) { /* with either exp (kq_launch.h act8_fast_exp) */
    sl_kq_set_act8_fast_exp_override(f);
    fp8_nan_case();
  }
  sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
}

/* The FP8-out activation's small prefill launch (kq_launch.h q8_small: from SMs rows below 256 warp items per SM,
 * GELU below 192; 4 warps, one item per warp, the item layout, compiled for 16 blocks per SM): both kinds, every
 * input dtype, both scale rules; past each kind's point the prefill launch (GELU with IEEE scales compiled for
 * gelu8_blocks per SM, either tanh). Each case checks the launch first. */
static void run_launch(uint64_t *rng, sl_act_kind_t kind, sl_dtype_t in_t, bool ue8m0, int T, int I, bool small) {
  const sl_device_info_t *info = sl_device_info(dev);
  const sl_kq_arch_cfg_t *ac = sl_kq_arch_cfg(info->arch);
  sl_act_args_t a = {.kind = kind, .num_tokens = T, .inter = I, .in_dtype = in_t, .out_dtype = SL_DTYPE_FP8_E4M3,
                     .scale_ue8m0 = ue8m0};
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_act_spec(&a, info->arch, info->sm_count, &spec));
  char desc[512], want[24];
  sl_jit_spec_describe(&spec, desc, sizeof desc);
  if (small && ac->q8_small)
    snprintf(want, sizeof want, "MIN_BLOCKS=%d", 2048 / (ac->prefill_warps / 2 * 32));
  else if (kind == SL_ACT_GELU_TANH_MUL && !ue8m0 && ac->gelu8_blocks) /* kq_launch.h gelu8_blocks */
    snprintf(want, sizeof want, "MIN_BLOCKS=%d", ac->gelu8_blocks);
  else
    snprintf(want, sizeof want, "WARPS=%d", ac->prefill_warps);
  if (!strstr(desc, want)) fail_msg("T=%d I=%d: spec %s, want %s", T, I, desc, want);
  run_case(rng, kind, in_t, SL_DTYPE_FP8_E4M3, ue8m0, T, I);
}

static void test_act_q8_small(void **state) {
  uint64_t rng = sl_test_seed();
  const int sms = sl_device_info(dev)->sm_count;
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int kind = 0; kind < 2; kind++) {
    for (int d = 0; d < 3; d++)
      for (int ue = 0; ue < 2; ue++) /* 8 (16-bit) / 16 (fp32) chunks: 11 / 21 items per SM */
        run_launch(&rng, (sl_act_kind_t)kind, dts[d], ue, sms + 45, 2048, true);
    run_launch(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, false, sms + 45, 2944, true); /* ragged: 11.5 chunks */
    /* 28 chunks x 1000 rows per 132 SMs: 212 items per SM, SiLU's small launch, GELU's prefill one */
    run_launch(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, false, 1000 * sms / 132, 7168, kind == SL_ACT_SILU_MUL);
    run_launch(&rng, (sl_act_kind_t)kind, SL_DTYPE_BF16, true, 40 * sms, 2048, false); /* 320 per SM */
    for (int d = 0; d < 3; d++) /* the prefill launch with IEEE scales: GELU's at gelu8_blocks per SM */
      run_launch(&rng, (sl_act_kind_t)kind, dts[d], false, 40 * sms + 3, 2048, false);
  }
  for (int f = 0; f < 2; f++) { /* GELU's prefill launch with either form of 1 + tanh */
    sl_kq_set_gelu_fast_exp_override(f);
    run_launch(&rng, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, false, 40 * sms + 5, 2944, false);
  }
  sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_act_all),
      cmocka_unit_test(test_act_pack),
      cmocka_unit_test(test_act_fp8_nan),
      cmocka_unit_test(test_act_segments),
      cmocka_unit_test(test_act_fp8_exp),
      cmocka_unit_test(test_act_gelu_tanh),
      cmocka_unit_test(test_act_q8_small),
  };
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
