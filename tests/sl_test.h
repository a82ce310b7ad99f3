/* Shared helpers for Sluice tests: random inputs, poisoning, tolerant comparison. */
#ifndef SL_TEST_H
#define SL_TEST_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/sluice.h"
#include "runtime/sl_probe.h"
#include "kernels/sl_dtype.h"

/* Exit code ctest reads as "skipped". */
#define SL_TEST_SKIP 77

/* Assert a Sluice call returns SL_OK, printing the status and last error otherwise. */
#define SL_ASSERT_OK(call)                                                                   \
  do {                                                                                       \
    sl_status_t sl_t_s_ = (call);                                                            \
    if (sl_t_s_ != SL_OK)                                                                    \
      fail_msg("%s -> %s: %s", #call, sl_status_str(sl_t_s_), sl_last_error());              \
  } while (0)

/* Seeded per test run from the clock (printed, so a failure can be replayed with
 * SL_TEST_SEED=<n>); xorshift64*. */
uint64_t sl_test_seed(void);
uint64_t sl_test_rand_u64(uint64_t *state);
float sl_test_rand_uniform(uint64_t *state, float lo, float hi);
float sl_test_rand_normal(uint64_t *state);

/* Whether the cmocka test `name` runs: SL_TEST_FILTER unset or empty, or a glob (fnmatch(3),
 * e.g. "test_rmsnorm_pow2*") it matches -- to re-run part of a long GPU test on a lent machine. */
bool sl_test_selected(const char *name);

/* cmocka_run_group_tests over the tests of `tests` that SL_TEST_FILTER selects (sl_test_selected),
 * printing how many ran when a filter is set; a filter that selects none is a failure (1). */
int sl_test_run_selected(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                         CMFixtureFunction teardown);
#define SL_RUN_SELECTED(tests, setup, teardown)                                                                       \
  sl_test_run_selected(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

/* Open the CUDA device for a gpu test or exit(SL_TEST_SKIP) with a visible reason. */
sl_device_t *sl_test_open_gpu_or_skip(int local_rank);

/* Poison `bytes` at `ptr` (device or host) with 0xFF bytes: NaN for every float type. */
void sl_test_poison(sl_device_t *dev, void *ptr, size_t bytes);

/* Compare float arrays: |got-want| <= atol + rtol*|want|; NaN in got always fails.
 * Returns number of mismatches and prints the first few. */
size_t sl_test_compare_f32(const char *what, const float *got, const float *want, size_t n, float atol,
                           float rtol);

#endif
