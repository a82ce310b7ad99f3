/* GPU tests of sl_router: fresh random logits, poisoned outputs; ids identical to the CPU
 * backend and weights bit-identical (both NaN counts as equal: NaN payloads are not part of
 * the contract). Covers T = 1, 2, 16, odd T, more tokens than SMs x warps (prefill, grid
 * stride); logits with many exact ties, with -inf / +-huge / +-0 / +inf, with NaN; logits and
 * bias pointers not aligned for the vector loads (element-by-element path); expert counts
 * that leave lanes partly filled or empty (E = 8, 33, 60) and one expert per lane. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/router.h"
#include "sl_test.h"

static sl_device_t *dev;

enum { VALUES_NORMAL, VALUES_TIES, VALUES_EXTREME, VALUES_NAN };

static float draw(uint64_t *rng, int values, int token, int e) {
  float v = 2.0f * sl_test_rand_normal(rng);
  uint64_t u = sl_test_rand_u64(rng);
  switch (values) {
  case VALUES_NORMAL:
    if (u % 16 == 0) v = 1.5f; /* exact ties */
    break;
  case VALUES_TIES: v = 0.5f * (float)(u % 4); break; /* almost everything ties */
  case VALUES_EXTREME:
    switch (u % 9) {
    case 0: v = -INFINITY; break;
    case 1: v = 3.0e4f; break; /* huge, still finite in f16 */
    case 2: v = -3.0e4f; break;
    case 3: v = -0.0f; break;
    case 4: v = 0.0f; break;
    case 5:
      if ((u >> 8) % 8 == 0) v = INFINITY;
      break;
    default: break;
    }
    break;
  case VALUES_NAN:
    /* token 0: all NaN but expert 1; others: one in 8 */
    if (token == 0 ? e != 1 : u % 8 == 0) v = NAN;
    break;
  }
  return v;
}

static void run_case(uint64_t *rng, sl_router_kind_t kind, int E, int K, int G, int TG, bool renorm, float scaling,
                     sl_dtype_t dt, bool with_bias, int T, int values, bool misalign) {
  const size_t es = sl_dtype_bits(dt) / 8, lb = (size_t)T * E * es, pad = misalign ? es : 0, bpad = misalign ? 4 : 0;
  void *h_logits = malloc(lb);
  float *bias = malloc(sizeof(float) * E), *h_w = malloc(sizeof(float) * T * K), *r_w = malloc(sizeof(float) * T * K);
  int32_t *h_ids = malloc(sizeof(int32_t) * T * K), *r_ids = malloc(sizeof(int32_t) * T * K);
  assert_non_null(h_logits), assert_non_null(bias), assert_non_null(h_w), assert_non_null(r_w);
  assert_non_null(h_ids), assert_non_null(r_ids);
  for (int i = 0; i < T * E; i++)
    sl_store_f32(h_logits, dt, i, draw(rng, values, i / E, i % E));
  for (int e = 0; e < E; e++)
    bias[e] = values == VALUES_TIES ? 0.0f : sl_test_rand_uniform(rng, -0.05f, 0.05f);
  void *d_logits, *d_bias, *d_ids, *d_w;
  SL_ASSERT_OK(sl_device_malloc(dev, lb + 16, &d_logits));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(float) * E + 16, &d_bias));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(int32_t) * T * K, &d_ids));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(float) * T * K, &d_w));
  void *logits_at = (char *)d_logits + pad;
  float *bias_at = (float *)((char *)d_bias + bpad);
  SL_ASSERT_OK(sl_memcpy(dev, logits_at, h_logits, lb, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, bias_at, bias, sizeof(float) * E, NULL));
  sl_test_poison(dev, d_ids, sizeof(int32_t) * T * K);
  sl_test_poison(dev, d_w, sizeof(float) * T * K);
  sl_router_args_t a = {.kind = kind,
                        .num_tokens = T,
                        .num_experts = E,
                        .top_k = K,
                        .renormalize = renorm,
                        .num_groups = G,
                        .topk_groups = TG,
                        .routed_scaling = scaling,
                        .logits_dtype = dt,
                        .logits = logits_at,
                        .correction_bias = with_bias ? bias_at : NULL,
                        .topk_ids = d_ids,
                        .topk_weights = d_w};
  char what[160];
  snprintf(what, sizeof what, "router kind %d E=%d K=%d G=%d/%d renorm %d %s bias %d T=%d values %d misalign %d",
           (int)kind, E, K, G, TG, renorm, sl_dtype_name(dt), with_bias, T, values, misalign);
  sl_status_t s = sl_router(dev, &a, NULL);
  if (s != SL_OK) fail_msg("%s: %s: %s", what, sl_status_str(s), sl_last_error());
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, "router kernel"));
  SL_ASSERT_OK(sl_memcpy(dev, h_ids, d_ids, sizeof(int32_t) * T * K, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, h_w, d_w, sizeof(float) * T * K, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  a.logits = h_logits;
  a.correction_bias = with_bias ? bias : NULL;
  a.topk_ids = r_ids;
  a.topk_weights = r_w;
  SL_ASSERT_OK(sl_router_ref(&a));
  size_t bad = 0, nan_w = 0;
  for (int i = 0; i < T * K; i++) {
    bool both_nan = isnan(h_w[i]) && isnan(r_w[i]);
    bool same_w = both_nan || memcmp(&h_w[i], &r_w[i], sizeof(float)) == 0;
    nan_w += both_nan;
    if (h_ids[i] != r_ids[i] || !same_w) {
      if (bad++ < 5)
        fprintf(stderr, "  %s: token %d rank %d: gpu (%d, %.9g) cpu (%d, %.9g)\n", what, i / K, i % K, h_ids[i],
                (double)h_w[i], r_ids[i], (double)r_w[i]);
    }
  }
  if (bad) fail_msg("%s: %zu (id, weight) pairs differ from the CPU backend", what, bad);
  /* the cases are built so that the checks can fail: a NaN-free case has no NaN weight */
  if (values != VALUES_NAN && values != VALUES_EXTREME && nan_w) fail_msg("%s: %zu NaN weights", what, nan_w);
  sl_device_free(dev, d_logits), sl_device_free(dev, d_bias), sl_device_free(dev, d_ids), sl_device_free(dev, d_w);
  free(h_logits), free(bias), free(h_w), free(r_w), free(h_ids), free(r_ids);
}

static void test_router_softmax(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const int sms = sl_device_info(dev)->sm_count, Ts[] = {1, 2, 3, 16, 17, sms * 8 + 5};
  for (int d = 0; d < 3; d++)
    for (int renorm = 0; renorm < 2; renorm++) {
      for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, renorm, 1.0f, dts[d], false, Ts[i], VALUES_NORMAL, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 8, 2, 1, 1, renorm, 1.0f, dts[d], false, 300, VALUES_NORMAL, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 60, 4, 1, 1, renorm, 1.0f, dts[d], false, 300, VALUES_NORMAL, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 33, 5, 1, 1, renorm, 1.0f, dts[d], false, 77, VALUES_NORMAL, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 256, 8, 1, 1, renorm, 1.0f, dts[d], false, 40, VALUES_NORMAL, false);
    }
}

static void test_router_softmax_special(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const int sms = sl_device_info(dev)->sm_count;
  for (int d = 0; d < 3; d++)
    for (int values = VALUES_TIES; values <= VALUES_NAN; values++) {
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, true, 1.0f, dts[d], false, 1, values, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, false, 1.0f, dts[d], false, 16, values, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, true, 1.0f, dts[d], false, sms * 8 + 3, values, false);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 8, 2, 1, 1, true, 1.0f, dts[d], false, 65, values, false);
    }
  for (int d = 0; d < 3; d++) { /* logits not aligned for the vector loads */
    run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, true, 1.0f, dts[d], false, 1, VALUES_NORMAL, true);
    run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, false, 1.0f, dts[d], false, sms * 8 + 1, VALUES_TIES, true);
  }
}

static void test_router_deepseek(void **state) {
  uint64_t rng = sl_test_seed();
  const int sms = sl_device_info(dev)->sm_count, Ts[] = {1, 2, 16, 17, sms * 4 + 3};
  for (int renorm = 0; renorm < 2; renorm++)
    for (int bias = 0; bias < 2; bias++) {
      for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, renorm, 2.5f, SL_DTYPE_F32, bias, Ts[i], VALUES_NORMAL,
                 false);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, renorm, 2.5f, SL_DTYPE_BF16, bias, sms * 4 + 3,
               VALUES_NORMAL, false);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, renorm, 2.5f, SL_DTYPE_F16, bias, 5, VALUES_NORMAL,
               false);
    }
  run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 64, 6, 8, 3, true, 1.0f, SL_DTYPE_BF16, true, 200, VALUES_NORMAL, false);
  run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 32, 4, 4, 2, true, 1.0f, SL_DTYPE_F32, true, 50, VALUES_NORMAL, false);
}

static void test_router_deepseek_special(void **state) {
  uint64_t rng = sl_test_seed();
  const int sms = sl_device_info(dev)->sm_count;
  for (int values = VALUES_TIES; values <= VALUES_NAN; values++)
    for (int bias = 0; bias < 2; bias++) {
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, true, 2.5f, SL_DTYPE_F32, bias, 1, values, false);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, false, 2.5f, SL_DTYPE_BF16, bias, 16, values, false);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, true, 1.0f, SL_DTYPE_F32, bias, sms * 8 + 7, values,
               false);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 32, 4, 4, 2, true, 1.0f, SL_DTYPE_BF16, bias, 33, values, false);
    }
  /* logits and bias not aligned for the vector loads */
  run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, true, 2.5f, SL_DTYPE_F32, true, 1, VALUES_NORMAL, true);
  run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, true, 2.5f, SL_DTYPE_BF16, true, sms * 8 + 1, VALUES_NORMAL,
           true);
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_router_softmax),
      cmocka_unit_test(test_router_softmax_special),
      cmocka_unit_test(test_router_deepseek),
      cmocka_unit_test(test_router_deepseek_special),
  };
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
