/* Unit tests of the gated activations' CPU reference (kernels/act.c): against the definitions
 * in double precision, strides, and the fused FP8 output against act + quantizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/act.h"
#include "kernels/quant.h"
#include "sl_test.h"

static double act_def(sl_act_kind_t kind, double g) {
  if (kind == SL_ACT_SILU_MUL) return g / (1.0 + exp(-g));
  return 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

/* ulp of a value in a dtype, for the tolerance: 2 ulp of the result rounded to that dtype. */
static double ulp_of(sl_dtype_t t, double v) {
  int e;
  frexp(fabs(v) > 1e-30 ? v : 1e-30, &e);
  int mant = t == SL_DTYPE_BF16 ? 8 : t == SL_DTYPE_F16 ? 11 : 24;
  double u = ldexp(1.0, e - mant);
  if (t == SL_DTYPE_F16 && u < ldexp(1.0, -24)) u = ldexp(1.0, -24);
  return u;
}

static void test_act_matches_definition(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const int T = 7, I = 136;
  for (int kind = 0; kind < 2; kind++)
    for (int di = 0; di < 3; di++)
      for (int dout = 0; dout < 3; dout++) {
        sl_dtype_t in_t = dts[di], out_t = dts[dout];
        long is = 2 * I + 8, os = I + 16; /* strided rows */
        void *in = calloc((size_t)T * is, 4), *out = calloc((size_t)T * os, 4);
        for (long i = 0; i < T * is; i++)
          sl_store_f32(in, in_t, i, 4.0f * sl_test_rand_normal(&rng));
        sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                           .num_tokens = T,
                           .inter = I,
                           .in_dtype = in_t,
                           .out_dtype = out_t,
                           .in = in,
                           .out = out,
                           .in_stride = is,
                           .out_stride = os};
        SL_ASSERT_OK(sl_act_ref(&a));
        for (int t = 0; t < T; t++)
          for (int i = 0; i < I; i++) {
            double g = sl_load_f32(in, in_t, t * is + i), u = sl_load_f32(in, in_t, t * is + I + i);
            double want = act_def((sl_act_kind_t)kind, g) * u;
            double got = sl_load_f32(out, out_t, t * os + i);
            /* fp32 math (a few ulp of fp32) then one rounding to the output dtype */
            double tol = 2 * ulp_of(out_t, want) + 8 * ulp_of(SL_DTYPE_F32, want) + 1e-30;
            /* GELU: 1 + tanh(z) cancels for z << 0, so fp32 carries ~ulp(1) of 0.5*|g*u| there */
            if (kind == SL_ACT_GELU_TANH_MUL) tol += 4 * ldexp(1.0, -24) * 0.5 * fabs(g * u);
            if (!(fabs(got - want) <= tol))
              fail_msg("kind %d %s->%s t %d i %d: g %g u %g got %.9g want %.9g", kind, sl_dtype_name(in_t),
                       sl_dtype_name(out_t), t, i, g, u, got, want);
          }
        free(in), free(out);
      }
}

/* Hand-worked points: silu(0) = 0, silu(x)*1 -> x for large x, gelu(-large) -> 0. */
static void test_act_hand_values(void **state) {
  float in[2 * 8] = {0.0f, 20.0f, -20.0f, 1.0f, 0, 0, 0, 0, 3.0f, 1.0f, 1.0f, 2.0f, 0, 0, 0, 0};
  float out[8];
  sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = 1,
                     .inter = 8,
                     .in_dtype = SL_DTYPE_F32,
                     .out_dtype = SL_DTYPE_F32,
                     .in = in,
                     .out = out};
  SL_ASSERT_OK(sl_act_ref(&a));
  assert_true(out[0] == 0.0f);
  assert_true(fabsf(out[1] - 20.0f) < 1e-5f);
  assert_true(fabsf(out[2]) < 1e-6f);
  assert_true(fabsf(out[3] - 2.0f * 0.7310585786f) < 1e-6f);
  a.kind = SL_ACT_GELU_TANH_MUL;
  SL_ASSERT_OK(sl_act_ref(&a));
  assert_true(out[0] == 0.0f);
  assert_true(fabsf(out[1] - 20.0f) < 1e-5f);
  assert_true(fabsf(out[3] - 2.0f * 0.8411919906f) < 1e-6f); /* gelu_tanh(1) */
}

/* Fused FP8 == act to f32, then the FP8 group quantizer (same rule, bit for bit). */
static void test_act_fp8_matches_quantizer(void **state) {
  uint64_t rng = sl_test_seed();
  const int T = 5, I = 384;
  for (int kind = 0; kind < 2; kind++)
    for (int ue8m0 = 0; ue8m0 < 2; ue8m0++) {
      uint16_t *in = malloc(sizeof(uint16_t) * T * 2 * I);
      for (int i = 0; i < T * 2 * I; i++)
        in[i] = sl_f32_to_bf16(3.0f * sl_test_rand_normal(&rng));
      for (int i = 0; i < 2 * I; i++)
        in[2 * I + i] = 0; /* token 1: all-zero groups */
      float *y = malloc(sizeof(float) * T * I), s1[5 * 3], s2[5 * 3];
      uint8_t *c1 = malloc(T * I), *c2 = malloc(T * I);
      sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                         .num_tokens = T,
                         .inter = I,
                         .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_F32,
                         .in = in,
                         .out = y};
      SL_ASSERT_OK(sl_act_ref(&a));
      a.out_dtype = SL_DTYPE_FP8_E4M3;
      a.out = c1;
      a.out_scales = s1;
      a.scale_ue8m0 = ue8m0;
      SL_ASSERT_OK(sl_act_ref(&a));
      sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                           .rule = ue8m0 ? SL_QUANT_RULE_CEIL : SL_QUANT_RULE_IEEE,
                           .num_tokens = T,
                           .hidden = I,
                           .in_dtype = SL_DTYPE_F32,
                           .in = y,
                           .codes = c2,
                           .scales = s2};
      SL_ASSERT_OK(sl_quant_ref(&q));
      assert_memory_equal(c1, c2, (size_t)T * I);
      assert_memory_equal(s1, s2, sizeof s1);
      assert_true(s1[3] == (ue8m0 ? ldexpf(1.0f, -127) : 0.0f)); /* zero group */
      free(in), free(y), free(c1), free(c2);
    }
}

static void test_act_fp8_nan_marked(void **state) {
  const int I = 256;
  float in[2 * 256], s[2];
  uint8_t c[256];
  for (int i = 0; i < 2 * I; i++)
    in[i] = 0.5f;
  in[I + 130] = NAN; /* up of element 130: group 1 */
  sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = 1,
                     .inter = I,
                     .in_dtype = SL_DTYPE_F32,
                     .out_dtype = SL_DTYPE_FP8_E4M3,
                     .in = in,
                     .out = c,
                     .out_scales = s};
  SL_ASSERT_OK(sl_act_ref(&a));
  assert_false(isnan(s[0]));
  assert_true(isnan(s[1]));
  assert_int_equal(c[200], SL_E4M3_NAN);
  sl_clear_error();
  assert_int_equal(sl_quant_check_scales_host(SL_QUANT_FP8_GROUP, SL_QUANT_LAYOUT_LINEAR, 1, I, s), SL_ERR_NUMERIC);
  assert_non_null(strstr(sl_last_error(), "token 0, block 1"));
}

static void test_act_bad_arguments(void **state) {
  float in[64], out[64];
  sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = 1,
                     .inter = 12,
                     .in_dtype = SL_DTYPE_F32,
                     .out_dtype = SL_DTYPE_F32,
                     .in = in,
                     .out = out};
  assert_int_equal(sl_act_ref(&a), SL_ERR_INVALID); /* inter not a multiple of 8 */
  a.inter = 32;
  a.out_dtype = SL_DTYPE_FP8_E4M3;
  assert_int_equal(sl_act_ref(&a), SL_ERR_INVALID); /* FP8 needs a multiple of 128 and scales */
  a.out_dtype = SL_DTYPE_F32;
  a.kind = (sl_act_kind_t)7;
  assert_int_equal(sl_act_ref(&a), SL_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_act_matches_definition),    cmocka_unit_test(test_act_hand_values),
      cmocka_unit_test(test_act_fp8_matches_quantizer), cmocka_unit_test(test_act_fp8_nan_marked),
      cmocka_unit_test(test_act_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
