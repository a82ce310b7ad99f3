/* MoE expert FFN on the CPU backend against the direct double-precision formula
 * y = Wd (silu(Wg x) * (Wu x)), including empty experts and partially filled capacity. */
#include <math.h>
#include <stdlib.h>

#include "kernels/moe_ffn.h"
#include "unit/moe_test_util.h"

static double silu(double g) { return g / (1.0 + exp(-g)); }

static void test_ffn_matches_formula(void **state) {
  enum { E = 4, CAP = 5, H = 24, IN = 16 };
  const int32_t counts[E] = {3, 0, 5, 1};
  uint64_t rng = sl_test_seed() + 3;
  uint16_t *x = calloc((size_t)E * CAP * H, 2), *y = calloc((size_t)E * CAP * H, 2);
  uint16_t *wgu = calloc((size_t)E * 2 * IN * H, 2), *wd = calloc((size_t)E * H * IN, 2);
  assert_true(x && y && wgu && wd);
  moe_rand_bf16(&rng, (size_t)E * CAP * H, x);
  for (size_t i = 0; i < (size_t)E * 2 * IN * H; i++) wgu[i] = sl_f32_to_bf16(0.3f * sl_test_rand_normal(&rng));
  for (size_t i = 0; i < (size_t)E * H * IN; i++) wd[i] = sl_f32_to_bf16(0.3f * sl_test_rand_normal(&rng));
  for (size_t i = 0; i < (size_t)E * CAP * H; i++) y[i] = 0xFFFF;
  size_t ws_bytes = sl_moe_ffn_workspace_bytes(E, CAP, CAP, 2, H, IN);
  void *ws = malloc(ws_bytes);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_ffn_args_t a = {.num_local_experts = E, .capacity = CAP, .hidden = H, .inter = IN, .num_tokens = CAP,
                         .top_k = 2, .x = x, .expert_counts = counts, .w_gate_up = wgu, .w_down = wd, .y = y,
                         .workspace = ws, .workspace_bytes = ws_bytes};
  SL_ASSERT_OK(sl_moe_ffn(dev, &a, NULL));
  for (int e = 0; e < E; e++)
    for (int r = 0; r < CAP; r++) {
      const uint16_t *xr = x + ((size_t)e * CAP + r) * H;
      const uint16_t *yr = y + ((size_t)e * CAP + r) * H;
      if (r >= counts[e]) {
        for (int h = 0; h < H; h++) assert_int_equal(yr[h], 0xFFFF); /* padding rows untouched */
        continue;
      }
      double act[IN], want[H], scale = 0;
      for (int i = 0; i < IN; i++) {
        double g = 0, u = 0;
        for (int h = 0; h < H; h++) {
          g += sl_bf16_to_f32(wgu[((size_t)e * 2 * IN + i) * H + h]) * (double)sl_bf16_to_f32(xr[h]);
          u += sl_bf16_to_f32(wgu[((size_t)e * 2 * IN + IN + i) * H + h]) * (double)sl_bf16_to_f32(xr[h]);
        }
        act[i] = silu(g) * u;
      }
      for (int h = 0; h < H; h++) {
        want[h] = 0;
        for (int i = 0; i < IN; i++) want[h] += sl_bf16_to_f32(wd[((size_t)e * H + h) * IN + i]) * act[i];
        if (fabs(want[h]) > scale) scale = fabs(want[h]);
      }
      /* bf16 intermediates (gate_up, activation, output) give a few 2^-9 relative errors. */
      for (int h = 0; h < H; h++) {
        double got = sl_bf16_to_f32(yr[h]);
        if (!(fabs(got - want[h]) <= 0.02 * scale + 0.01 * fabs(want[h])))
          fail_msg("expert %d row %d col %d: got %.6g want %.6g (row scale %.3g)", e, r, h, got, want[h], scale);
      }
    }
  sl_device_close(dev);
  free(ws);
  free(x);
  free(y);
  free(wgu);
  free(wd);
}

static void test_ffn_bad_args(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  int32_t counts[1] = {1};
  char buf[64];
  sl_moe_ffn_args_t a = {.num_local_experts = 1, .capacity = 1, .hidden = 12, .inter = 8, .num_tokens = 1,
                         .top_k = 1, .x = buf, .expert_counts = counts, .w_gate_up = buf, .w_down = buf, .y = buf,
                         .workspace = buf, .workspace_bytes = sizeof buf};
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID); /* H not a multiple of 8 */
  a.hidden = 8;
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID); /* workspace too small */
  assert_non_null(strstr(sl_last_error(), "workspace"));
  a.gemv_variant = 3; /* not 0 automatic, 1 wide, 2 split */
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "gemv_variant"));
  sl_device_close(dev);
}

/* Which padded-mode runs take the weight-streaming kernels: rows per expert min(capacity,
 * T) <= 16, or on average T*K / E_local <= 16, unless forced either way; exact mode never. */
static void test_ffn_gemv_rule(void **state) {
  (void)state;
  sl_moe_ffn_args_t a = {.num_local_experts = 128, .capacity = 1, .hidden = 2048, .inter = 768, .num_tokens = 1,
                         .top_k = 8};
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_MAX_ROWS;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 128; /* Qwen3 decode at T=128: 8 rows per expert on average */
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 16 * 128 / 8; /* average exactly 16 */
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 16 * 128 / 8 + 1; /* average above 16 */
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.num_local_experts = 16; /* few local experts (EP): 8 tokens x 8 / 16 = 4 rows each, but up to 8 */
  a.capacity = a.num_tokens = 8;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 33; /* 33 x 8 / 16 = 16.5 on average, up to 33 */
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.capacity = 200; /* a large capacity but few tokens: at most T rows per expert */
  a.num_tokens = 8;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = 4; /* few rows by capacity */
  a.num_tokens = 100;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.small_rows = -1;
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.small_rows = 1;
  a.capacity = a.num_tokens = 1000;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.exact_rows = true;
  assert_false(sl_moe_ffn_uses_gemv(&a));
}

/* The streaming kernels' variant (kernels/moe_ffn.c, sl_moe_ffn_gemv_variant): split while
 * an expert holds at most 8 rows (min(capacity, T)), wide above; forced either way. */
static void test_ffn_gemv_variant_rule(void **state) {
  (void)state;
  sl_moe_ffn_args_t a = {.num_local_experts = 128, .capacity = 1, .hidden = 2048, .inter = 768, .num_tokens = 1,
                         .top_k = 8};
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS; /* T = 8: the switch point */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS + 1;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
  a.capacity = 200; /* large capacity, few tokens: at most T rows per expert */
  a.num_tokens = 5;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = 4; /* few rows by capacity */
  a.num_tokens = 100;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = a.num_tokens = 128;
  a.gemv_variant = SL_MOE_FFN_GEMV_SPLIT;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = a.num_tokens = 1;
  a.gemv_variant = SL_MOE_FFN_GEMV_WIDE;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ffn_matches_formula),
      cmocka_unit_test(test_ffn_bad_args),
      cmocka_unit_test(test_ffn_gemv_rule),
      cmocka_unit_test(test_ffn_gemv_variant_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
