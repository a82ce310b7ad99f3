/* The one-kernel decode layer's rank-ordered gate_up pairs (kernels/moe_layout.h,
 * sl_moe_decode_rank_pair): over all G blocks every (rank, row) pair exactly once, each block's
 * pairs in (rank, row) order, its count g1 - g0 (the plain balanced split), and ~I / G rows of
 * every rank in every block. */
#include <stdlib.h>

#include "unit/moe_test_util.h"

static void check_order(int nv, int inter, int grid) {
  const long P = (long)nv * inter;
  unsigned char *seen = calloc((size_t)P, 1);
  assert_non_null(seen);
  for (int b = 0; b < grid; b++) {
    const long g0 = (long)b * P / grid, g1 = (long)(b + 1) * P / grid;
    long prev = -1;
    for (long i = 0; i < g1 - g0; i++) {
      const long pq = sl_moe_decode_rank_pair(g0, g1, nv, inter, i);
      if (pq < 0 || pq >= P) fail_msg("nv %d I %d G %d: block %d pair %ld -> %ld out of range", nv, inter, grid, b, i, pq);
      if (pq <= prev) fail_msg("nv %d I %d G %d: block %d pair %ld -> %ld not after %ld", nv, inter, grid, b, i, pq, prev);
      const long s = pq / inter, j = pq % inter, g = j * nv + s;
      if (g < g0 || g >= g1)
        fail_msg("nv %d I %d G %d: block %d pair %ld is (%ld, %ld), outside [%ld, %ld)", nv, inter, grid, b, i, s, j, g0, g1);
      if (seen[pq]) fail_msg("nv %d I %d G %d: pair (%ld, %ld) twice", nv, inter, grid, s, j);
      seen[pq] = 1;
      prev = pq;
    }
    assert_int_equal(sl_moe_decode_rank_pair(g0, g1, nv, inter, g1 - g0), -1);
    /* every rank's share within one row of I / G (when the block holds at least one per rank) */
    if ((g1 - g0) >= nv)
      for (int s = 0; s < nv; s++) {
        const long ja = (g0 + nv - 1 - s) / nv, jb = (g1 + nv - 1 - s) / nv;
        const long lo = (long)inter / grid - 1, hi = ((long)inter + grid - 1) / grid + 1;
        if (jb - ja < lo || jb - ja > hi)
          fail_msg("nv %d I %d G %d: block %d has %ld rows of rank %d", nv, inter, grid, b, jb - ja, s);
      }
  }
  for (long pq = 0; pq < P; pq++)
    if (!seen[pq]) fail_msg("nv %d I %d G %d: pair %ld in no block", nv, inter, grid, pq);
  free(seen);
}

static void test_rank_order(void **s) {
  (void)s;
  check_order(8, 768, 132); /* Qwen3-30B-A3B on an H200 */
  check_order(6, 384, 132); /* the grouped-router test shape */
  check_order(3, 200, 132); /* fewer pairs than blocks: empty blocks */
  check_order(1, 768, 132);
  check_order(8, 768, 1);
  uint64_t rng = 12345;
  for (int t = 0; t < 200; t++) {
    const int nv = 1 + (int)(sl_test_rand_u64(&rng) % 16), inter = 8 * (1 + (int)(sl_test_rand_u64(&rng) % 200));
    const int grid = 1 + (int)(sl_test_rand_u64(&rng) % 200);
    check_order(nv, inter, grid);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rank_order)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
