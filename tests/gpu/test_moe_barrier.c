/* Grid barrier on the GPU: the benchmark kernel's own visibility check passes for one
 * block and for a full grid, an absent block makes the others time out with
 * SL_ERR_TIMEOUT (and the state is usable again), an oversized cooperative grid is refused. */
#include <stdio.h>
#include <string.h>

#include "kernels/grid_barrier.h"
#include "sl_test.h"

static sl_device_t *dev;
static sl_grid_barrier_state_t *state;

static int setup(void **s) {
  dev = sl_test_open_gpu_or_skip(0);
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof *state, (void **)&state));
  SL_ASSERT_OK(sl_memset(dev, state, 0, sizeof *state, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  return 0;
}
static int teardown(void **s) {
  sl_device_free(dev, state);
  sl_device_close(dev);
  return 0;
}

static void test_full_grid(void **s) {
  const int sms = sl_device_info(dev)->sm_count;
  double us = 0;
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, sms, 2000, -1, 0, NULL, &us));
  printf("  grid barrier, %d blocks: %.3f us per barrier\n", sms, us);
  assert_true(us > 0.0); /* speed is the benchmark's business (and racecheck slows it 100x) */
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, 1, 100, -1, 0, NULL, &us));
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, 2 * sms, 500, -1, 0, NULL, &us)); /* 2 per SM still fit */
}

/* The acquire-poll variant: the same visibility check, full and double grid, and timeout. */
static void test_acquire_poll_variant(void **s) {
  const int sms = sl_device_info(dev)->sm_count;
  double us = 0;
  SL_ASSERT_OK(sl_grid_barrier_bench_variant(dev, state, 1, sms, 2000, -1, 0, NULL, &us));
  printf("  grid barrier (acquire polls), %d blocks: %.3f us per barrier\n", sms, us);
  assert_true(us > 0.0); /* speed is the benchmark's business (and racecheck slows it 100x) */
  SL_ASSERT_OK(sl_grid_barrier_bench_variant(dev, state, 1, 2 * sms, 500, -1, 0, NULL, &us));
  assert_int_equal(sl_grid_barrier_bench_variant(dev, state, 1, sms, 10, 5, 100, NULL, &us), SL_ERR_TIMEOUT);
  SL_ASSERT_OK(sl_grid_barrier_bench_variant(dev, state, 1, sms, 100, -1, 0, NULL, &us));
  /* The relaxed-poll variant (0) on the same state word (same protocol, same epochs), with the
   * neighbour check, then the default again. */
  SL_ASSERT_OK(sl_grid_barrier_bench_variant(dev, state, 0, sms, 100, -1, 0, NULL, &us));
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, sms, 100, -1, 0, NULL, &us));
  /* cooperative_groups grid.sync (the benchmark's ceiling row) passes the same neighbour check; it
   * cannot time out, so an absent block is refused; variant 3 does not exist */
  SL_ASSERT_OK(sl_grid_barrier_bench_variant(dev, state, 2, sms, 100, -1, 0, NULL, &us));
  assert_int_equal(sl_grid_barrier_bench_variant(dev, state, 2, sms, 10, 5, 100, NULL, &us), SL_ERR_INVALID);
  assert_int_equal(sl_grid_barrier_bench_variant(dev, state, 3, sms, 10, -1, 0, NULL, &us), SL_ERR_INVALID);
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, sms, 100, -1, 0, NULL, &us));
}

static void test_absent_block_times_out(void **s) {
  const int sms = sl_device_info(dev)->sm_count;
  double us = 0;
  assert_int_equal(sl_grid_barrier_bench(dev, state, sms, 10, 3, 100, NULL, &us), SL_ERR_TIMEOUT);
  assert_non_null(strstr(sl_last_error(), "grid barrier timed out"));
  /* The state was reset: a normal run works again. */
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, sms, 100, -1, 0, NULL, &us));
}

static void test_oversized_grid_refused(void **s) {
  double us = 0;
  assert_int_equal(sl_grid_barrier_bench(dev, state, 1 << 20, 1, -1, 0, NULL, &us), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "co-resident"));
  SL_ASSERT_OK(sl_grid_barrier_bench(dev, state, 4, 10, -1, 0, NULL, &us));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_grid),
      cmocka_unit_test(test_absent_block_times_out),
      cmocka_unit_test(test_acquire_poll_variant),
      cmocka_unit_test(test_oversized_grid_refused),
  };
  return SL_RUN_SELECTED(tests, setup, teardown);
}
