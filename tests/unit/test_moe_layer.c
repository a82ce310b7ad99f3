/* The local MoE layer on the CPU backend against the direct double-precision formula
 * (router GEMM, softmax top-k, SiLU experts, weighted sum, residual), T = 0, 1, odd; skewed
 * routing given by the caller (every token on the same K experts, the others empty); a
 * fixed capacity that overflows is reported. */
#include <math.h>
#include <stdio.h>

#include "kernels/moe_layer.h"
#include "unit/moe_layer_ref.h"
#include "unit/moe_test_util.h"

enum { E = 8, K = 2, H = 64, IN = 32, TMAX = 13 };

typedef struct {
  uint16_t *wr, *wgu, *wd;
} weights_t;

static weights_t make_weights(uint64_t *rng) {
  weights_t w = {calloc((size_t)E * H, 2), calloc((size_t)E * 2 * IN * H, 2), calloc((size_t)E * H * IN, 2)};
  assert_true(w.wr && w.wgu && w.wd);
  for (size_t i = 0; i < (size_t)E * H; i++) w.wr[i] = sl_f32_to_bf16(0.2f * sl_test_rand_normal(rng));
  for (size_t i = 0; i < (size_t)E * 2 * IN * H; i++) w.wgu[i] = sl_f32_to_bf16(0.15f * sl_test_rand_normal(rng));
  for (size_t i = 0; i < (size_t)E * H * IN; i++) w.wd[i] = sl_f32_to_bf16(0.2f * sl_test_rand_normal(rng));
  return w;
}

static void run(int T, bool residual) {
  uint64_t rng = sl_test_seed() * 31 + (uint64_t)T;
  weights_t w = make_weights(&rng);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_layer_config_t cfg = {.num_experts = E, .top_k = K, .hidden = H, .inter = IN, .expert_begin = 0,
                               .expert_end = E, .router_kind = SL_ROUTER_SOFTMAX_TOPK, .renormalize = true,
                               .w_router = w.wr, .w_gate_up = w.wgu, .w_down = w.wd};
  sl_moe_layer_t *layer;
  SL_ASSERT_OK(sl_moe_layer_create(dev, &cfg, TMAX, &layer));
  uint16_t *x = calloc((size_t)TMAX * H, 2), *res = calloc((size_t)TMAX * H, 2), *out = calloc((size_t)TMAX * H, 2);
  moe_rand_bf16(&rng, (size_t)T * H, x);
  moe_rand_bf16(&rng, (size_t)T * H, res);
  for (size_t i = 0; i < (size_t)TMAX * H; i++) out[i] = 0xFFFF;
  sl_moe_layer_args_t a = {.num_tokens = T, .x = x, .residual = residual ? res : NULL, .out = out,
                           .allow_host_sync = true};
  SL_ASSERT_OK(sl_moe_layer_forward(layer, &a, NULL));
  SL_ASSERT_OK(sl_moe_layer_check(layer, NULL));
  int32_t ids[TMAX * K];
  double wts[TMAX * K], want[TMAX * H];
  moe_layer_direct(T, E, K, H, IN, true, x, w.wr, w.wgu, w.wd, residual ? res : NULL, ids, wts, want);
  const int32_t *got_ids;
  const float *got_w;
  sl_moe_layer_last_routing(layer, &got_ids, &got_w);
  for (int p = 0; p < T * K; p++) {
    assert_int_equal(got_ids[p], ids[p]);
    assert_true(fabs(got_w[p] - wts[p]) <= 1e-5);
  }
  for (int t = 0; t < T; t++) {
    double rms = 0;
    for (int h = 0; h < H; h++) rms += want[t * H + h] * want[t * H + h];
    rms = sqrt(rms / H);
    for (int h = 0; h < H; h++) {
      double g = sl_bf16_to_f32(out[t * H + h]), wv = want[t * H + h];
      if (!(fabs(g - wv) <= 0.03 * rms + 0.01 * fabs(wv)))
        fail_msg("T=%d token %d col %d: got %.6g want %.6g (row rms %.3g)", T, t, h, g, wv, rms);
    }
  }
  for (size_t i = (size_t)T * H; i < (size_t)TMAX * H; i++) assert_int_equal(out[i], 0xFFFF);
  sl_moe_layer_destroy(layer);
  sl_device_close(dev);
  free(x);
  free(res);
  free(out);
  free(w.wr);
  free(w.wgu);
  free(w.wd);
}

static void test_layer_matches_formula(void **state) {
  run(0, false);
  run(1, false);
  run(5, true);
  run(TMAX, true);
}

/* Caller-given routing: token t on experts (t + k) % K for k < K (all tokens on the same K
 * experts: TMAX rows each, the other E - K experts empty), uneven weights. */
static void test_layer_skewed_routing(void **state) {
  uint64_t rng = sl_test_seed() + 91;
  weights_t w = make_weights(&rng);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_layer_config_t cfg = {.num_experts = E, .top_k = K, .hidden = H, .inter = IN, .expert_end = E,
                               .router_kind = SL_ROUTER_SOFTMAX_TOPK, .w_router = w.wr, .w_gate_up = w.wgu,
                               .w_down = w.wd};
  sl_moe_layer_t *layer;
  SL_ASSERT_OK(sl_moe_layer_create(dev, &cfg, TMAX, &layer));
  uint16_t x[TMAX * H], out[TMAX * H];
  int32_t ids[TMAX * K];
  float wts[TMAX * K];
  moe_rand_bf16(&rng, (size_t)TMAX * H, x);
  for (int t = 0; t < TMAX; t++)
    for (int k = 0; k < K; k++) {
      ids[t * K + k] = (t + k) % K;
      wts[t * K + k] = k == 0 ? 0.7f : 0.3f / (K - 1);
    }
  for (int ffn = -1; ffn <= 1; ffn++) { /* the FFN choice only matters on the GPU; same result here */
    for (size_t i = 0; i < (size_t)TMAX * H; i++) out[i] = 0xFFFF;
    sl_moe_layer_args_t a = {.num_tokens = TMAX, .x = x, .out = out, .topk_ids = ids, .topk_weights = wts,
                             .ffn_small_rows = ffn};
    SL_ASSERT_OK(sl_moe_layer_forward(layer, &a, NULL));
    SL_ASSERT_OK(sl_moe_layer_check(layer, NULL));
    const int32_t *counts = sl_moe_layer_expert_counts(layer);
    for (int e = 0; e < E; e++) assert_int_equal(counts[e], e < K ? TMAX : 0);
    for (int t = 0; t < TMAX; t++) {
      double want[H], act[IN], rms = 0;
      for (int h = 0; h < H; h++) want[h] = 0;
      for (int k = 0; k < K; k++) {
        const int e = ids[t * K + k];
        for (int i = 0; i < IN; i++) {
          double g = 0, u = 0;
          for (int h = 0; h < H; h++) {
            const double xv = sl_bf16_to_f32(x[t * H + h]);
            g += sl_bf16_to_f32(w.wgu[((size_t)e * 2 * IN + i) * H + h]) * xv;
            u += sl_bf16_to_f32(w.wgu[((size_t)e * 2 * IN + IN + i) * H + h]) * xv;
          }
          act[i] = g / (1.0 + exp(-g)) * u;
        }
        for (int h = 0; h < H; h++) {
          double y = 0;
          for (int i = 0; i < IN; i++) y += sl_bf16_to_f32(w.wd[((size_t)e * H + h) * IN + i]) * act[i];
          want[h] += wts[t * K + k] * y;
        }
      }
      for (int h = 0; h < H; h++) rms += want[h] * want[h];
      rms = sqrt(rms / H);
      for (int h = 0; h < H; h++) {
        const double g = sl_bf16_to_f32(out[t * H + h]);
        if (!(fabs(g - want[h]) <= 0.03 * rms + 0.01 * fabs(want[h])))
          fail_msg("skewed: token %d col %d: got %.6g want %.6g (row rms %.3g)", t, h, g, want[h], rms);
      }
    }
  }
  sl_moe_layer_destroy(layer);
  sl_device_close(dev);
  free(w.wr);
  free(w.wgu);
  free(w.wd);
}

static void test_layer_capacity_overflow(void **state) {
  uint64_t rng = sl_test_seed() + 77;
  weights_t w = make_weights(&rng);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_layer_config_t cfg = {.num_experts = E, .top_k = K, .hidden = H, .inter = IN, .expert_end = E,
                               .router_kind = SL_ROUTER_SOFTMAX_TOPK, .w_router = w.wr, .w_gate_up = w.wgu,
                               .w_down = w.wd};
  sl_moe_layer_t *layer;
  SL_ASSERT_OK(sl_moe_layer_create(dev, &cfg, TMAX, &layer));
  uint16_t x[TMAX * H], out[TMAX * H];
  moe_rand_bf16(&rng, (size_t)TMAX * H, x);
  /* 13 tokens x 2 picks over 8 experts: some expert gets at least 4 > capacity 1. */
  sl_moe_layer_args_t a = {.num_tokens = TMAX, .x = x, .out = out, .capacity = 1};
  assert_int_equal(sl_moe_layer_forward(layer, &a, NULL), SL_ERR_CAPACITY);
  assert_non_null(strstr(sl_last_error(), "capacity is 1"));
  a.num_tokens = TMAX + 1;
  a.capacity = 0;
  assert_int_equal(sl_moe_layer_forward(layer, &a, NULL), SL_ERR_INVALID);
  sl_moe_layer_destroy(layer);
  sl_device_close(dev);
  free(w.wr);
  free(w.wgu);
  free(w.wd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_matches_formula),
      cmocka_unit_test(test_layer_skewed_routing),
      cmocka_unit_test(test_layer_capacity_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
