/* The local MoE layer on the CPU backend against the direct double-precision formula
 * (router GEMM, softmax top-k, SiLU experts, weighted sum, residual), T = 0, 1, odd; skewed
 * routing given by the caller (every token on the same K experts, the others empty); a
 * fixed capacity that overflows is reported; the small-T fusion switch and the stage mask. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* The small-T fusion switch and the benchmark's stage mask on the CPU backend: fuse_small ON
 * runs the unfused layer there (fused_taken false) with the same output; an invalid value or
 * stage mask is refused; the five stages run one call each, in order, give the full call's
 * output bit for bit; the dispatch's route argument runs the router first (ids, weights, slots
 * equal sl_router_ref + sl_moe_dispatch_ref) and is refused when it does not match. */
static void test_layer_fuse_switch_and_stages(void **state) {
  uint64_t rng = sl_test_seed() + 91;
  weights_t w = make_weights(&rng);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_layer_config_t cfg = {.num_experts = E, .top_k = K, .hidden = H, .inter = IN, .expert_end = E,
                               .router_kind = SL_ROUTER_SOFTMAX_TOPK, .renormalize = true, .w_router = w.wr,
                               .w_gate_up = w.wgu, .w_down = w.wd};
  sl_moe_layer_t *layer;
  SL_ASSERT_OK(sl_moe_layer_create(dev, &cfg, TMAX, &layer));
  const int T = 5;
  uint16_t x[TMAX * H], res[TMAX * H], ref[TMAX * H], out[TMAX * H];
  moe_rand_bf16(&rng, (size_t)T * H, x);
  moe_rand_bf16(&rng, (size_t)T * H, res);
  sl_moe_layer_args_t a = {.num_tokens = T, .x = x, .residual = res, .out = ref, .fuse_small = SL_MOE_FUSE_OFF};
  SL_ASSERT_OK(sl_moe_layer_forward(layer, &a, NULL));
  bool fused = true;
  memset(out, 0xFF, sizeof out);
  a.out = out;
  a.fuse_small = SL_MOE_FUSE_ON;
  a.fused_taken = &fused;
  SL_ASSERT_OK(sl_moe_layer_forward(layer, &a, NULL));
  assert_false(fused);
  assert_memory_equal(out, ref, (size_t)T * H * 2);
  a.fuse_small = 3;
  assert_int_equal(sl_moe_layer_forward(layer, &a, NULL), SL_ERR_INVALID);
  a.fuse_small = SL_MOE_FUSE_AUTO;
  a.stages = 32;
  assert_int_equal(sl_moe_layer_forward(layer, &a, NULL), SL_ERR_INVALID);
  sl_clear_error();
  a.stages = 0;
  /* The one-kernel decode layer is GPU only: ON at T = 1 on the CPU runs the reference layer
   * (decode_taken false, the same output as OFF); bad decode arguments are refused. */
  {
    bool taken = true;
    uint16_t one_off[H], one_on[H];
    sl_moe_layer_args_t d = {.num_tokens = 1, .x = x, .out = one_off, .decode_kernel = SL_MOE_FUSE_OFF};
    SL_ASSERT_OK(sl_moe_layer_forward(layer, &d, NULL));
    d.out = one_on, d.decode_kernel = SL_MOE_FUSE_ON, d.decode_taken = &taken;
    SL_ASSERT_OK(sl_moe_layer_forward(layer, &d, NULL));
    assert_false(taken);
    assert_memory_equal(one_on, one_off, sizeof one_on);
    d.decode_kernel = 3;
    assert_int_equal(sl_moe_layer_forward(layer, &d, NULL), SL_ERR_INVALID);
    d.decode_kernel = SL_MOE_FUSE_ON, d.decode_variant = SL_MOE_DECODE_VARIANTS;
    assert_int_equal(sl_moe_layer_forward(layer, &d, NULL), SL_ERR_INVALID);
    d.decode_variant = -1;
    assert_int_equal(sl_moe_layer_forward(layer, &d, NULL), SL_ERR_INVALID);
    d.decode_variant = 0, d.decode_pdl = 3;
    assert_int_equal(sl_moe_layer_forward(layer, &d, NULL), SL_ERR_INVALID);
    d.decode_pdl = 0;
    sl_clear_error();
  }
  /* Stage by stage (on the layer's buffers): the same output as one full call. */
  memset(out, 0xFF, sizeof out);
  const unsigned order[] = {SL_MOE_STAGE_LOGITS, SL_MOE_STAGE_TOPK, SL_MOE_STAGE_DISPATCH, SL_MOE_STAGE_FFN,
                            SL_MOE_STAGE_COMBINE};
  for (int i = 0; i < 5; i++) {
    a.stages = order[i];
    SL_ASSERT_OK(sl_moe_layer_forward(layer, &a, NULL));
    if (i < 4) assert_int_equal(out[0], 0xFFFF); /* combine has not run yet */
  }
  assert_memory_equal(out, ref, (size_t)T * H * 2);
  /* The dispatch's route argument on the CPU: sl_router_ref, then the reference dispatch. */
  float logits[TMAX * E], wts[TMAX * K], wts_ref[TMAX * K];
  int32_t ids[TMAX * K], ids_ref[TMAX * K], slots[TMAX * K], slots_ref[TMAX * K], counts[E], counts_ref[E];
  uint16_t ex[E * TMAX * H], ex_ref[E * TMAX * H];
  for (int i = 0; i < T * E; i++) logits[i] = sl_test_rand_normal(&rng);
  sl_router_args_t r = {.kind = SL_ROUTER_SOFTMAX_TOPK, .num_tokens = T, .num_experts = E, .top_k = K,
                        .renormalize = true, .logits_dtype = SL_DTYPE_F32, .logits = logits, .topk_ids = ids_ref,
                        .topk_weights = wts_ref};
  SL_ASSERT_OK(sl_router_ref(&r));
  const size_t ws_bytes = sl_moe_dispatch_workspace_bytes(TMAX, K, E);
  void *ws = calloc(1, ws_bytes);
  assert_non_null(ws);
  memset(ex_ref, 0, sizeof ex_ref);
  memset(ex, 0, sizeof ex);
  sl_moe_dispatch_args_t d = {.num_tokens = T, .hidden = H, .top_k = K, .num_experts = E, .expert_end = E,
                              .capacity = T, .x = x, .topk_ids = ids_ref, .expert_x = ex_ref,
                              .expert_counts = counts_ref, .slots = slots_ref, .workspace = ws,
                              .workspace_bytes = ws_bytes};
  SL_ASSERT_OK(sl_moe_dispatch_ref(&d));
  r.topk_ids = ids;
  r.topk_weights = wts;
  d.topk_ids = ids;
  d.expert_x = ex;
  d.expert_counts = counts;
  d.slots = slots;
  d.route = &r;
  d.route_fused = &fused;
  fused = true;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &d, NULL));
  assert_false(fused);
  assert_memory_equal(ids, ids_ref, (size_t)T * K * 4);
  assert_memory_equal(wts, wts_ref, (size_t)T * K * 4);
  assert_memory_equal(slots, slots_ref, (size_t)T * K * 4);
  assert_memory_equal(counts, counts_ref, sizeof counts);
  assert_memory_equal(ex, ex_ref, sizeof ex);
  d.topk_ids = ids_ref; /* the route must write the ids the dispatch reads */
  assert_int_equal(sl_moe_dispatch(dev, &d, NULL), SL_ERR_INVALID);
  d.topk_ids = ids;
  r.num_tokens = T + 1;
  assert_int_equal(sl_moe_dispatch(dev, &d, NULL), SL_ERR_INVALID);
  sl_clear_error();
  free(ws);
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
      cmocka_unit_test(test_layer_fuse_switch_and_stages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
