/* The balanced replicated dispatch's host-side split math (kernels/moe_layout.h): every
 * (token, chunk) item in exactly one block, blocks contiguous and in order, sizes within one
 * item of each other, every block non-empty and touching at most `warps` tokens (the
 * kernel's window), the grid never larger than the plain one-item-per-warp grid; and the
 * argument checks of force_repl_balance. */
#include <stdlib.h>
#include <string.h>

#include "unit/moe_test_util.h"

/* Check the split of `items` into `grid` blocks. */
static void check_split(long items, long grid) {
  unsigned char *seen = calloc((size_t)items, 1);
  assert_non_null(seen);
  const long lo = items / grid, hi = (items + grid - 1) / grid;
  assert_int_equal(sl_moe_bal_begin(0, items, grid), 0);
  assert_int_equal(sl_moe_bal_begin(grid, items, grid), items);
  long min_len = items, max_len = 0;
  for (long b = 0; b < grid; b++) {
    const long i0 = sl_moe_bal_begin(b, items, grid), i1 = sl_moe_bal_begin(b + 1, items, grid);
    if (i1 < i0) fail_msg("items %ld grid %ld: block %ld ends at %ld before it starts at %ld", items, grid, b, i1, i0);
    const long len = i1 - i0;
    if (len != lo && len != hi)
      fail_msg("items %ld grid %ld: block %ld has %ld items, not %ld or %ld", items, grid, b, len, lo, hi);
    min_len = len < min_len ? len : min_len;
    max_len = len > max_len ? len : max_len;
    for (long i = i0; i < i1; i++) {
      if (seen[i]) fail_msg("items %ld grid %ld: item %ld in two blocks", items, grid, i);
      seen[i] = 1;
    }
  }
  for (long i = 0; i < items; i++)
    if (!seen[i]) fail_msg("items %ld grid %ld: item %ld in no block", items, grid, i);
  assert_true(max_len - min_len <= 1);
  free(seen);
}

static void test_split_covers_once_balanced(void **s) {
  (void)s;
  const long items[] = {1, 2, 7, 8, 9, 100, 1000, 1024, 3584, 3585, 28672};
  for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
    for (long g = 1; g <= items[i] && g <= 600; g += g < 20 ? 1 : 37) check_split(items[i], g);
  uint64_t rng = sl_test_seed();
  for (int r = 0; r < 300; r++) {
    const long n = 1 + (long)(sl_test_rand_u64(&rng) % 30000);
    const long g = 1 + (long)(sl_test_rand_u64(&rng) % (uint64_t)(n < 2000 ? n : 2000));
    check_split(n, g);
  }
}

/* The grid for (T tokens x chunks, warps per block, blocks per SM, SMs): within
 * [1, plain grid], the asked-for grid when the span allows, every block's exact token span
 * <= warps. */
static int check_grid(int T, int chunks, int warps, int per_sm, int sms) {
  const long items = (long)T * chunks, plain = (items + warps - 1) / warps;
  const int g = sl_moe_bal_grid(items, chunks, warps, per_sm, sms);
  if (g < 1 || g > plain)
    fail_msg("T %d chunks %d warps %d %dx%d SMs: grid %d outside [1, %ld]", T, chunks, warps, per_sm, sms, g, plain);
  const long asked = (long)per_sm * sms < plain ? (long)per_sm * sms : plain;
  if (g < asked) fail_msg("T %d chunks %d: grid %d below the asked %ld", T, chunks, g, asked);
  long worst = 0;
  for (long b = 0; b < g; b++) {
    const long i0 = sl_moe_bal_begin(b, items, g), i1 = sl_moe_bal_begin(b + 1, items, g);
    if (i1 <= i0) fail_msg("T %d chunks %d grid %d: block %ld is empty", T, chunks, g, b);
    const long span = (i1 - 1) / chunks - i0 / chunks + 1;
    if (span > sl_moe_bal_span_tokens(i1 - i0, chunks))
      fail_msg("T %d chunks %d grid %d: block %ld spans %ld tokens, above the bound %ld", T, chunks, g, b, span,
               sl_moe_bal_span_tokens(i1 - i0, chunks));
    worst = span > worst ? span : worst;
  }
  if (worst > warps) fail_msg("T %d chunks %d grid %d: a block spans %ld tokens > %d warps", T, chunks, g, worst, warps);
  /* Raised past the asked grid only when the asked one's ranges span too many tokens. */
  if (g > asked && sl_moe_bal_span_tokens((items + g - 2) / (g - 1), chunks) <= warps)
    fail_msg("T %d chunks %d: grid %d, but %d blocks already fit the window", T, chunks, g, g - 1);
  check_split(items, g);
  return g;
}

static void test_grid_choice(void **s) {
  (void)s;
  /* DeepSeek-V3 T=128 (28 chunks of 256 columns) on 132 SMs: exactly k x SMs blocks. */
  assert_int_equal(check_grid(128, 28, 8, 2, 132), 264);
  assert_int_equal(check_grid(128, 28, 8, 3, 132), 396);
  assert_int_equal(check_grid(128, 28, 16, 1, 132), 132);
  assert_int_equal(check_grid(128, 28, 16, 2, 132), 224); /* the plain 512-thread grid is smaller */
  /* Qwen3 T=128 (8 chunks): the plain grid (128 blocks of 8 warps) is already below 2 x SMs. */
  assert_int_equal(check_grid(128, 8, 8, 2, 132), 128);
  assert_int_equal(check_grid(1, 28, 8, 2, 132), 4);
  assert_int_equal(check_grid(1, 1, 16, 2, 132), 1);
  /* Few SMs, one chunk per token: the asked grid's ranges would span 125 tokens; raised. */
  assert_int_equal(check_grid(1000, 1, 8, 1, 4), 125);
  const int chunks[] = {1, 2, 3, 5, 8, 28};
  const int warps[] = {8, 16};
  const int sms[] = {1, 3, 16, 132, 148};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
    for (int T = 1; T <= 1024; T += T < 40 ? 1 : 97)
      for (size_t w = 0; w < 2; w++)
        for (size_t m = 0; m < sizeof sms / sizeof sms[0]; m++)
          for (int k = 1; k <= 3; k++) check_grid(T, chunks[c], warps[w], k, sms[m]);
  assert_int_equal(sl_moe_bal_grid(0, 28, 8, 2, 132), 0);
}

static void test_shapes_and_checks(void **s) {
  (void)s;
  int threads = 0, per_sm = 0;
  for (int b = 1; b <= SL_MOE_REPL_BAL_LAST; b++) {
    assert_true(sl_moe_repl_bal_shape(b, &threads, &per_sm));
    assert_true(threads == 256 || threads == 512);
    assert_true(per_sm >= 1 && per_sm <= 3);
    assert_string_not_equal(sl_moe_repl_bal_name(b), "?");
  }
  assert_false(sl_moe_repl_bal_shape(0, &threads, &per_sm));
  assert_false(sl_moe_repl_bal_shape(SL_MOE_REPL_BAL_LAST + 1, &threads, &per_sm));
  /* The CPU backend runs the reference (same result); the arguments are checked there too. */
  sl_device_t *cpu;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &cpu));
  uint64_t rng = sl_test_seed() + 3;
  moe_case_t c = {.T = 20, .H = 64, .K = 4, .E = 16, .begin = 0, .end = 16, .capacity = 20};
  moe_case_alloc(&c);
  moe_rand_bf16(&rng, (size_t)c.T * c.H, c.x);
  moe_rand_routing(&rng, c.T, c.K, c.E, c.ids, c.weights);
  const size_t ws_bytes = sl_moe_dispatch_workspace_bytes(c.T, c.K, c.E);
  void *ws = calloc(1, ws_bytes);
  assert_non_null(ws);
  sl_moe_dispatch_args_t a = {.num_tokens = c.T, .hidden = c.H, .top_k = c.K, .num_experts = c.E,
                              .expert_begin = 0, .expert_end = c.E, .capacity = c.capacity, .x = c.x,
                              .topk_ids = c.ids, .expert_x = c.expert_x, .expert_counts = c.counts,
                              .slots = c.slots, .workspace = ws, .workspace_bytes = ws_bytes,
                              .force_path = SL_MOE_PATH_REPLICATED, .force_repl_balance = SL_MOE_REPL_BAL_256X2};
  SL_ASSERT_OK(sl_moe_dispatch(cpu, &a, NULL));
  a.force_repl_rank = SL_MOE_REPL_RANK_HIST;
  SL_ASSERT_OK(sl_moe_dispatch(cpu, &a, NULL));
  a.force_repl_rank = SL_MOE_REPL_RANK_SCAN; /* the balanced kernel ranks with the histogram only */
  assert_int_equal(sl_moe_dispatch(cpu, &a, NULL), SL_ERR_INVALID);
  a.force_repl_rank = 0;
  a.force_repl_balance = SL_MOE_REPL_BAL_LAST + 1;
  assert_int_equal(sl_moe_dispatch(cpu, &a, NULL), SL_ERR_INVALID);
  a.force_repl_balance = -1;
  assert_int_equal(sl_moe_dispatch(cpu, &a, NULL), SL_ERR_INVALID);
  free(ws);
  moe_case_free(&c);
  sl_device_close(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_covers_once_balanced),
      cmocka_unit_test(test_grid_choice),
      cmocka_unit_test(test_shapes_and_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
