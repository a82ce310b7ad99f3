/* Unit tests of the router's CPU reference (kernels/router.c): ties by lower id, renormalize on
 * and off, softmax against the double-precision definition, DeepSeek-V3 grouped routing against
 * a direct sort-based implementation, a hand-worked grouped example, reproducible expf. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant_formats.h"
#include "kernels/router.h"
#include "kernels/router_order.h"
#include "sl_test.h"

static void test_expf_accuracy(void **state) {
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 200000; i++) {
    float x = sl_test_rand_uniform(&rng, -87.0f, 88.0f);
    double want = exp((double)x), got = sl_qf_expf(x);
    if (!(fabs(got - want) <= 3e-7 * want)) fail_msg("expf(%.9g) = %.9g want %.9g", (double)x, got, want);
  }
  assert_true(sl_qf_expf(0.0f) == 1.0f);
  assert_true(sl_qf_expf(-100.0f) == 0.0f);
  assert_true(isinf(sl_qf_expf(100.0f)));
  assert_true(fabsf(sl_qf_sigmoidf(0.0f) - 0.5f) == 0.0f);
}

static void test_ties_by_lower_id(void **state) {
  float logits[2][16];
  for (int e = 0; e < 16; e++)
    logits[0][e] = 1.0f, logits[1][e] = (float)(e % 4); /* 3 at ids 3,7,11,15 */
  int32_t ids[2][4];
  float w[2][4];
  sl_router_args_t a = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                        .num_tokens = 2,
                        .num_experts = 16,
                        .top_k = 4,
                        .renormalize = true,
                        .logits_dtype = SL_DTYPE_F32,
                        .logits = logits,
                        .topk_ids = &ids[0][0],
                        .topk_weights = &w[0][0]};
  SL_ASSERT_OK(sl_router_ref(&a));
  for (int r = 0; r < 4; r++) {
    assert_int_equal(ids[0][r], r);
    assert_true(fabsf(w[0][r] - 0.25f) < 1e-7f);
    assert_int_equal(ids[1][r], 3 + 4 * r);
  }
  /* grouped: equal scores everywhere -> groups 0,1 and experts 0,1 */
  a.kind = SL_ROUTER_SIGMOID_GROUPED;
  a.num_groups = 4;
  a.topk_groups = 2;
  a.top_k = 3;
  SL_ASSERT_OK(sl_router_ref(&a));
  assert_int_equal(ids[0][0], 0);
  assert_int_equal(ids[0][1], 1);
  assert_int_equal(ids[0][2], 2);
}

static void test_softmax_definition(void **state) {
  uint64_t rng = sl_test_seed();
  const int T = 33, E = 128, K = 8;
  uint16_t *logits = malloc(sizeof(uint16_t) * T * E);
  int32_t *ids = malloc(sizeof(int32_t) * T * K);
  float *w = malloc(sizeof(float) * T * K);
  for (int i = 0; i < T * E; i++)
    logits[i] = sl_f32_to_bf16(2.0f * sl_test_rand_normal(&rng));
  for (int renorm = 0; renorm < 2; renorm++) {
    sl_router_args_t a = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                          .num_tokens = T,
                          .num_experts = E,
                          .top_k = K,
                          .renormalize = renorm,
                          .logits_dtype = SL_DTYPE_BF16,
                          .logits = logits,
                          .topk_ids = ids,
                          .topk_weights = w};
    SL_ASSERT_OK(sl_router_ref(&a));
    for (int t = 0; t < T; t++) {
      double p[128], mx = -1e30, sum = 0, selsum = 0;
      for (int e = 0; e < E; e++)
        mx = fmax(mx, sl_bf16_to_f32(logits[t * E + e]));
      for (int e = 0; e < E; e++)
        sum += p[e] = exp(sl_bf16_to_f32(logits[t * E + e]) - mx);
      bool taken[128] = {false};
      for (int r = 0; r < K; r++) { /* direct: the largest probability, ties to the lower id */
        int best = -1;
        for (int e = 0; e < E; e++)
          if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
        taken[best] = true;
        assert_int_equal(ids[t * K + r], best);
        selsum += p[best];
      }
      for (int r = 0; r < K; r++) {
        double want = p[ids[t * K + r]] / (renorm ? selsum : sum);
        if (!(fabs(w[t * K + r] - want) <= 1e-6 * want))
          fail_msg("t %d r %d: weight %.9g want %.9g", t, r, (double)w[t * K + r], want);
      }
    }
  }
  free(logits), free(ids), free(w);
}

/* Direct implementation of DeepSeek-V3 routing (the published algorithm: sigmoid scores, bias
 * for choice only, group score = sum of the top-2 biased scores, top groups, top experts,
 * weights = unbiased scores renormalized times routed_scaling), by sorting. */
typedef struct {
  float v;
  int id;
} kv_t;
static int kv_desc(const void *a, const void *b) {
  const kv_t *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->id - y->id;
}

static void test_deepseek_grouped(void **state) {
  uint64_t rng = sl_test_seed();
  const int T = 64, E = 256, G = 8, TG = 4, K = 8;
  const float scaling = 2.5f;
  float *logits = malloc(sizeof(float) * T * E), bias[256];
  int32_t *ids = malloc(sizeof(int32_t) * T * K);
  float *w = malloc(sizeof(float) * T * K);
  for (int i = 0; i < T * E; i++)
    logits[i] = 1.5f * sl_test_rand_normal(&rng);
  for (int e = 0; e < E; e++)
    bias[e] = sl_test_rand_uniform(&rng, -0.1f, 0.1f);
  for (int renorm = 0; renorm < 2; renorm++) {
    sl_router_args_t a = {.kind = SL_ROUTER_SIGMOID_GROUPED,
                          .num_tokens = T,
                          .num_experts = E,
                          .top_k = K,
                          .renormalize = renorm,
                          .num_groups = G,
                          .topk_groups = TG,
                          .routed_scaling = scaling,
                          .logits_dtype = SL_DTYPE_F32,
                          .logits = logits,
                          .correction_bias = bias,
                          .topk_ids = ids,
                          .topk_weights = w};
    SL_ASSERT_OK(sl_router_ref(&a));
    for (int t = 0; t < T; t++) {
      float s[256], b[256];
      for (int e = 0; e < E; e++)
        s[e] = sl_qf_sigmoidf(logits[t * E + e]), b[e] = s[e] + bias[e];
      kv_t groups[8];
      for (int g = 0; g < G; g++) {
        kv_t m[32];
        for (int j = 0; j < 32; j++)
          m[j] = (kv_t){b[g * 32 + j], j};
        qsort(m, 32, sizeof m[0], kv_desc);
        groups[g] = (kv_t){m[0].v + m[1].v, g};
      }
      qsort(groups, G, sizeof groups[0], kv_desc);
      kv_t cand[128];
      int n = 0;
      for (int r = 0; r < TG; r++)
        for (int j = 0; j < 32; j++)
          cand[n] = (kv_t){b[groups[r].id * 32 + j], groups[r].id * 32 + j}, n++;
      qsort(cand, n, sizeof cand[0], kv_desc);
      double sum = 0;
      for (int r = 0; r < K; r++)
        sum += s[cand[r].id];
      for (int r = 0; r < K; r++) {
        assert_int_equal(ids[t * K + r], cand[r].id);
        double want = (renorm ? s[cand[r].id] / sum : s[cand[r].id]) * scaling;
        if (!(fabs(w[t * K + r] - want) <= 1e-6 * want))
          fail_msg("t %d r %d: weight %.9g want %.9g", t, r, (double)w[t * K + r], want);
      }
    }
  }
  free(logits), free(ids), free(w);
}

/* Hand-worked: biased scores g0 [0.9 0.1] (1.0), g1 [0.6 0.6] (1.2), g2 [0.55 0.5] (1.05),
 * g3 [0.2 0.2]; top 2 groups are g1, g2, so expert 0 (the best single score) is not chosen;
 * top 2 experts are 2 and 3 (equal scores: lower id first). */
static void test_grouped_hand_example(void **state) {
  const float b[8] = {0.9f, 0.1f, 0.6f, 0.6f, 0.55f, 0.5f, 0.2f, 0.2f};
  float logits[8];
  for (int e = 0; e < 8; e++)
    logits[e] = logf(b[e] / (1.0f - b[e]));
  int32_t ids[2];
  float w[2];
  sl_router_args_t a = {.kind = SL_ROUTER_SIGMOID_GROUPED,
                        .num_tokens = 1,
                        .num_experts = 8,
                        .top_k = 2,
                        .renormalize = true,
                        .num_groups = 4,
                        .topk_groups = 2,
                        .routed_scaling = 1.0f,
                        .logits_dtype = SL_DTYPE_F32,
                        .logits = logits,
                        .topk_ids = ids,
                        .topk_weights = w};
  SL_ASSERT_OK(sl_router_ref(&a));
  assert_int_equal(ids[0], 2);
  assert_int_equal(ids[1], 3);
  assert_true(fabsf(w[0] - 0.5f) < 1e-6f && fabsf(w[1] - 0.5f) < 1e-6f);
  a.renormalize = false;
  a.routed_scaling = 2.0f;
  SL_ASSERT_OK(sl_router_ref(&a));
  assert_true(fabsf(w[0] - 1.2f) < 1e-5f);
  /* with one group allowed, only g1 */
  a.topk_groups = 1;
  SL_ASSERT_OK(sl_router_ref(&a));
  assert_int_equal(ids[0], 2);
  assert_int_equal(ids[1], 3);
  /* all groups: expert 0 first */
  a.topk_groups = 4;
  SL_ASSERT_OK(sl_router_ref(&a));
  assert_int_equal(ids[0], 0);
  assert_int_equal(ids[1], 2);
}

static void test_router_bad_arguments(void **state) {
  float logits[16] = {0};
  int32_t ids[16];
  float w[16];
  sl_router_args_t a = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                        .num_tokens = 1,
                        .num_experts = 16,
                        .top_k = 17,
                        .logits_dtype = SL_DTYPE_F32,
                        .logits = logits,
                        .topk_ids = ids,
                        .topk_weights = w};
  assert_int_equal(sl_router_ref(&a), SL_ERR_INVALID);
  a.top_k = 4;
  a.kind = SL_ROUTER_SIGMOID_GROUPED;
  a.num_groups = 3; /* 16 % 3 */
  a.topk_groups = 1;
  assert_int_equal(sl_router_ref(&a), SL_ERR_INVALID);
  a.num_groups = 8;
  a.topk_groups = 1; /* one group of 2 can't hold 4 */
  assert_int_equal(sl_router_ref(&a), SL_ERR_INVALID);
}

/* The order keys: monotone with fp32 order, -0 ties +0, NaN below -inf, exact inverse. */
static void test_router_keys(void **state) {
  uint64_t rng = sl_test_seed();
  for (int i = 0; i < 200000; i++) {
    float a = sl_qf_float((uint32_t)sl_test_rand_u64(&rng)), b = sl_qf_float((uint32_t)sl_test_rand_u64(&rng));
    if (i % 3 == 0) b = -a;
    if (isnan(a) || isnan(b)) continue;
    uint32_t ka = sl_router_key(a), kb = sl_router_key(b);
    if ((a < b) != (ka < kb) || (a == b) != (ka == kb)) fail_msg("key order: %a %a -> %08x %08x", a, b, ka, kb);
    float back = sl_router_key_value(ka);
    if (!(back == a) || (a != 0.0f && sl_qf_bits(back) != sl_qf_bits(a))) fail_msg("key_value(key(%a)) = %a", a, back);
  }
  assert_true(sl_router_key(-0.0f) == sl_router_key(0.0f));
  assert_true(sl_router_key(NAN) == SL_ROUTER_KEY_NAN && sl_router_key(-NAN) == SL_ROUTER_KEY_NAN);
  assert_true(SL_ROUTER_KEY_NONE < SL_ROUTER_KEY_NAN && SL_ROUTER_KEY_NAN < sl_router_key(-INFINITY));
  assert_true(sl_router_key(INFINITY) > sl_router_key(3.0e38f));
  assert_true(isnan(sl_router_key_value(SL_ROUTER_KEY_NAN)));
}

/* Special logits: NaN ranks below -inf (chosen last, lower id first), -0 ties +0, -inf is
 * still an expert; every id valid and distinct even when most logits are NaN. */
static void test_router_special_values(void **state) {
  float logits[2][8] = {{NAN, -0.0f, 0.0f, -INFINITY, NAN, 1.0f, NAN, NAN}, {NAN, NAN, NAN, NAN, NAN, NAN, NAN, 2.0f}};
  int32_t ids[2][6];
  float w[2][6];
  sl_router_args_t a = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                        .num_tokens = 2,
                        .num_experts = 8,
                        .top_k = 6,
                        .logits_dtype = SL_DTYPE_F32,
                        .logits = logits,
                        .topk_ids = &ids[0][0],
                        .topk_weights = &w[0][0]};
  SL_ASSERT_OK(sl_router_ref(&a));
  const int want0[6] = {5, 1, 2, 3, 0, 4}, want1[6] = {7, 0, 1, 2, 3, 4};
  for (int r = 0; r < 6; r++) {
    assert_int_equal(ids[0][r], want0[r]);
    assert_int_equal(ids[1][r], want1[r]);
    assert_true(isnan(w[0][r])); /* a NaN logit makes the softmax denominator NaN */
  }
  /* grouped: a NaN expert is never chosen over a real one; the weights stay finite */
  float g[8] = {NAN, 0.5f, 0.25f, NAN, -1.0f, 1.0f, NAN, NAN};
  a.kind = SL_ROUTER_SIGMOID_GROUPED;
  a.num_tokens = 1;
  a.num_groups = 4;
  a.topk_groups = 2;
  a.top_k = 3;
  a.renormalize = true;
  a.logits = g;
  SL_ASSERT_OK(sl_router_ref(&a));
  /* group scores: g0 NaN (one real), g1 NaN, g2 s(-1)+s(1), g3 NaN -> g2 first, then g0 (NaN
   * groups tie, lower id): experts 0, 1, 4, 5 allowed */
  assert_int_equal(ids[0][0], 5);
  assert_int_equal(ids[0][1], 1); /* s(0.5) > s(-1); expert 0 (NaN) is left out */
  assert_int_equal(ids[0][2], 4);
  for (int r = 0; r < 3; r++)
    assert_true(isfinite(w[0][r]));
}

/* The branch-free expf of the kernel equals sl_qf_expf bit for bit: every 97th fp32 pattern
 * (all exponents and signs, NaN and infinities included) and a dense sweep of [-88, 89]. */
static void test_router_expf_same_bits(void **state) {
  size_t bad = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 97) {
    float x = sl_qf_float((uint32_t)u), a = sl_qf_expf(x), b = sl_router_expf(x);
    if (sl_qf_bits(a) != sl_qf_bits(b) && !(isnan(a) && isnan(b)) && bad++ < 5)
      fprintf(stderr, "expf(%a): %a vs %a\n", x, a, b);
  }
  for (float x = -88.0f; x < 89.0f; x = nextafterf(x, 100.0f) + 1e-5f) {
    float a = sl_qf_expf(x), b = sl_router_expf(x);
    if (sl_qf_bits(a) != sl_qf_bits(b) && bad++ < 5) fprintf(stderr, "expf(%a): %a vs %a\n", x, a, b);
  }
  const float special[] = {-87.0f, 88.72f, nextafterf(-87.0f, -100.0f), nextafterf(88.72f, 100.0f), 0.0f, -0.0f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    if (sl_qf_bits(sl_qf_expf(special[i])) != sl_qf_bits(sl_router_expf(special[i]))) bad++;
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expf_accuracy),        cmocka_unit_test(test_ties_by_lower_id),
      cmocka_unit_test(test_softmax_definition),   cmocka_unit_test(test_deepseek_grouped),
      cmocka_unit_test(test_grouped_hand_example), cmocka_unit_test(test_router_bad_arguments),
      cmocka_unit_test(test_router_keys),          cmocka_unit_test(test_router_special_values),
      cmocka_unit_test(test_router_expf_same_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
