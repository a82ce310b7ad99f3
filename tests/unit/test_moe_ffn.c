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

/* The FFN kernels' work split (sl_moe_ffn_work, shared with kernels/moe_ffn_gemv.cu),
 * walked as the kernels walk it (units u = warp, warp + warps, ... < (end - begin) S):
 * every chunk of every tile is covered exactly once, parts of a tile are contiguous and in
 * part order, S > 1 only in the split variant, dividing the warps (a tile's parts in one
 * round: the kernels add them at a barrier) and each part has >= 2 chunks. Shapes: Qwen3 T=1 (768 gate_up / 1024 down
 * tiles on 132 blocks), T=2/5/8-like counts, tiny and odd ones, more blocks than tiles. */
static void check_work_split(long tiles, int grid, int warps, int nch, int split) {
  int *cover = calloc((size_t)(tiles > 0 ? tiles : 1) * nch, sizeof(int));
  assert_non_null(cover);
  for (int b = 0; b < grid; b++) {
    sl_moe_ffn_work_t w0 = sl_moe_ffn_work(tiles, grid, b, 0, nch, warps, split);
    const int units = (w0.end - w0.begin) * w0.S;
    if (!split) assert_int_equal(w0.S, 1);
    if (w0.S > 1) {
      assert_int_equal(warps % w0.S, 0); /* a tile's parts: neighbouring warps of one round */
      assert_true(nch / w0.S >= 2);
      assert_true(w0.end - w0.begin < warps);
    }
    for (int warp = 0; warp < warps; warp++) {
      sl_moe_ffn_work_t w = sl_moe_ffn_work(tiles, grid, b, warp, nch, warps, split);
      assert_int_equal(w.S, w0.S);
      for (int u = warp; u - warp < units; u += warps) {
        sl_moe_ffn_work_unit(&w, u, nch);
        if (u >= units) {
          assert_int_equal(w.tile, w.end); /* a warp without a unit this round */
          continue;
        }
        assert_true(w.tile >= w.begin && w.tile < w.end);
        assert_true(w.ch0 < w.ch1 && w.ch1 <= nch);
        if (w.part > 0) {
          assert_int_equal(u / warps, (u - w.part) / warps); /* its part-0 warp is in this round */
          sl_moe_ffn_work_t prev = w;
          sl_moe_ffn_work_unit(&prev, u - 1, nch);
          assert_int_equal(prev.tile, w.tile);
          assert_int_equal(prev.ch1, w.ch0);
        }
        for (int ch = w.ch0; ch < w.ch1; ch++) cover[(size_t)w.tile * nch + ch]++;
      }
    }
  }
  for (long i = 0; i < tiles * nch; i++) assert_int_equal(cover[i], 1);
  free(cover);
}

static void test_ffn_work_split(void **state) {
  (void)state;
  const int warps_split = SL_MOE_FFN_GEMV_SPLIT_THREADS / 32, warps_wide = SL_MOE_FFN_GEMV_THREADS / 32;
  const long tiles[] = {0, 1, 7, 96, 192, 480, 768, 1024, 4096, 6144};
  const int grids[] = {1, 3, 132, 148};
  const int nchs[] = {1, 2, 3, 6, 16};
  for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++)
    for (size_t j = 0; j < sizeof grids / sizeof *grids; j++)
      for (size_t k = 0; k < sizeof nchs / sizeof *nchs; k++) {
        const int grid = tiles[i] < grids[j] ? (tiles[i] > 0 ? (int)tiles[i] : 1) : grids[j]; /* host: min */
        check_work_split(tiles[i], grid, warps_split, nchs[k], 1);
        check_work_split(tiles[i], grid, warps_wide, nchs[k], 0);
      }
  /* Qwen3 T=1 at 12 warps: gate_up 768 tiles on 132 blocks (5-6 each), 16 chunks -> K over
   * 2 warps; down 1024 tiles (7-8 each), 6 chunks -> 3 warps (8 tiles: 2 full rounds). */
  if (warps_split == 12)
    for (int b = 0; b < 132; b++) {
      assert_int_equal(sl_moe_ffn_work(768, 132, b, 0, 16, warps_split, 1).S, 2);
      assert_int_equal(sl_moe_ffn_work(1024, 132, b, 0, 6, warps_split, 1).S, 3);
    }
  sl_moe_ffn_work_t w = sl_moe_ffn_work(1, 1, 0, 0, 16, warps_split, 1); /* one tile: largest S <= 8 */
  assert_int_equal(w.S, warps_split % 8 == 0 ? 8 : 6);
}

/* The streaming kernels' variant (kernels/moe_ffn.c, sl_moe_ffn_gemv_variant): split while
 * an expert holds at most 8 rows (min(capacity, T)), wide above; forced either way. */
static void test_ffn_gemv_variant_rule(void **state) {
  (void)state;
  sl_moe_ffn_args_t a = {.num_local_experts = 128, .capacity = 1, .hidden = 2048, .inter = 768, .num_tokens = 1,
                         .top_k = 8};
  const int small = SL_MOE_FFN_GEMV_SPLIT_AUTO ? SL_MOE_FFN_GEMV_SPLIT : SL_MOE_FFN_GEMV_WIDE;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS; /* T = 8: the switch point */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS + 1;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
  a.capacity = 200; /* large capacity, few tokens: at most T rows per expert */
  a.num_tokens = 5;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = 4; /* few rows by capacity */
  a.num_tokens = 100;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
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
      cmocka_unit_test(test_ffn_work_split),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
