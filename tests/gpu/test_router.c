/* GPU tests of sl_router: fresh random logits (with ties: bf16 collisions and repeated
 * values), poisoned outputs; ids identical to the CPU backend, weights within 1e-6 relative
 * (the kernel repeats the reference's operations, so they are expected bit-identical). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/router.h"
#include "sl_test.h"

static sl_device_t *dev;

static void run_case(uint64_t *rng, sl_router_kind_t kind, int E, int K, int G, int TG, bool renorm, float scaling,
                     sl_dtype_t dt, bool with_bias, int T) {
  size_t lb = (size_t)T * E * (sl_dtype_bits(dt) / 8);
  void *h_logits = malloc(lb);
  float *bias = malloc(sizeof(float) * E), *h_w = malloc(sizeof(float) * T * K), *r_w = malloc(sizeof(float) * T * K);
  int32_t *h_ids = malloc(sizeof(int32_t) * T * K), *r_ids = malloc(sizeof(int32_t) * T * K);
  for (int i = 0; i < T * E; i++) {
    float v = 2.0f * sl_test_rand_normal(rng);
    if (sl_test_rand_u64(rng) % 16 == 0) v = 1.5f; /* exact ties */
    sl_store_f32(h_logits, dt, i, v);
  }
  for (int e = 0; e < E; e++)
    bias[e] = sl_test_rand_uniform(rng, -0.05f, 0.05f);
  void *d_logits, *d_bias, *d_ids, *d_w;
  SL_ASSERT_OK(sl_device_malloc(dev, lb, &d_logits));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(float) * E, &d_bias));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(int32_t) * T * K, &d_ids));
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(float) * T * K, &d_w));
  SL_ASSERT_OK(sl_memcpy(dev, d_logits, h_logits, lb, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, d_bias, bias, sizeof(float) * E, NULL));
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
                        .logits = d_logits,
                        .correction_bias = with_bias ? d_bias : NULL,
                        .topk_ids = d_ids,
                        .topk_weights = d_w};
  char what[128];
  snprintf(what, sizeof what, "router kind %d E=%d K=%d G=%d/%d renorm %d %s bias %d T=%d", (int)kind, E, K, G, TG,
           renorm, sl_dtype_name(dt), with_bias, T);
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
  size_t bad = 0, inexact = 0;
  for (int i = 0; i < T * K; i++) {
    if (h_ids[i] != r_ids[i] || !(fabsf(h_w[i] - r_w[i]) <= 1e-6f * fabsf(r_w[i]))) {
      if (bad++ < 5)
        fprintf(stderr, "  %s: token %d rank %d: gpu (%d, %.9g) cpu (%d, %.9g)\n", what, i / K, i % K, h_ids[i],
                (double)h_w[i], r_ids[i], (double)r_w[i]);
    } else if (h_w[i] != r_w[i]) {
      inexact++;
    }
  }
  if (inexact) fprintf(stderr, "  %s: note: %zu weights within tolerance but not bit-identical\n", what, inexact);
  if (bad) fail_msg("%s: %zu (id, weight) pairs differ from the CPU backend", what, bad);
  sl_device_free(dev, d_logits), sl_device_free(dev, d_bias), sl_device_free(dev, d_ids), sl_device_free(dev, d_w);
  free(h_logits), free(bias), free(h_w), free(r_w), free(h_ids), free(r_ids);
}

static void test_router_softmax(void **state) {
  uint64_t rng = sl_test_seed();
  const sl_dtype_t dts[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  int sms = sl_device_info(dev)->sm_count;
  for (int d = 0; d < 3; d++)
    for (int renorm = 0; renorm < 2; renorm++) {
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, renorm, 1.0f, dts[d], false, 3);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, renorm, 1.0f, dts[d], false, sms * 8 + 5);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 8, 2, 1, 1, renorm, 1.0f, dts[d], false, 300);
      run_case(&rng, SL_ROUTER_SOFTMAX_TOPK, 60, 4, 1, 1, renorm, 1.0f, dts[d], false, 300); /* E not /32 */
    }
}

static void test_router_deepseek(void **state) {
  uint64_t rng = sl_test_seed();
  int sms = sl_device_info(dev)->sm_count;
  for (int renorm = 0; renorm < 2; renorm++)
    for (int bias = 0; bias < 2; bias++) {
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, renorm, 2.5f, SL_DTYPE_F32, bias, 5);
      run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, renorm, 2.5f, SL_DTYPE_BF16, bias, sms * 4 + 3);
    }
  run_case(&rng, SL_ROUTER_SIGMOID_GROUPED, 64, 6, 8, 3, true, 1.0f, SL_DTYPE_BF16, true, 200);
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_router_softmax),
      cmocka_unit_test(test_router_deepseek),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
