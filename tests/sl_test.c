/* Shared helpers for Sluice tests. */
#include "sl_test.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t sl_test_seed(void) {
  static uint64_t seed;
  if (seed == 0) {
    const char *env = getenv("SL_TEST_SEED");
    if (env && *env) {
      seed = strtoull(env, NULL, 10);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    if (seed == 0) seed = 1;
    fprintf(stderr, "[test] SL_TEST_SEED=%llu\n", (unsigned long long)seed);
  }
  return seed;
}

uint64_t sl_test_rand_u64(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

float sl_test_rand_uniform(uint64_t *state, float lo, float hi) {
  double u = (double)(sl_test_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(lo + (hi - lo) * u);
}

float sl_test_rand_normal(uint64_t *state) {
  double u1 = ((double)(sl_test_rand_u64(state) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (double)(sl_test_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

sl_device_t *sl_test_open_gpu_or_skip(int local_rank) {
  sl_device_t *dev = NULL;
  if (sl_device_open(SL_DEVICE_CUDA, local_rank, &dev) != SL_OK) {
    printf("SKIPPED: no usable GPU (%s)\n", sl_device_cuda_unavailable_reason());
    fflush(stdout);
    exit(SL_TEST_SKIP);
  }
  return dev;
}

void sl_test_poison(sl_device_t *dev, void *ptr, size_t bytes) {
  sl_status_t s = sl_memset(dev, ptr, 0xFF, bytes, NULL);
  if (s == SL_OK) s = sl_device_sync(dev);
  if (s != SL_OK) fail_msg("poison failed: %s", sl_last_error());
}

size_t sl_test_compare_f32(const char *what, const float *got, const float *want, size_t n, float atol,
                           float rtol) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float g = got[i], w = want[i];
    int ok;
    if (isnan(w))
      ok = isnan(g);
    else if (isnan(g))
      ok = 0;
    else if (isinf(w))
      ok = g == w;
    else
      ok = fabsf(g - w) <= atol + rtol * fabsf(w);
    if (!ok) {
      if (bad < 8) fprintf(stderr, "  %s[%zu]: got %.9g want %.9g\n", what, i, (double)g, (double)w);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "  %s: %zu of %zu mismatched (atol %g rtol %g)\n", what, bad, n, (double)atol, (double)rtol);
  return bad;
}

bool sl_test_selected(const char *name) {
  const char *f = getenv("SL_TEST_FILTER");
  return !f || !*f || fnmatch(f, name, 0) == 0;
}

int sl_test_run_selected(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                         CMFixtureFunction teardown) {
  struct CMUnitTest *sel = malloc((n ? n : 1) * sizeof *sel);
  if (!sel) {
    fprintf(stderr, "%s: no memory for the test list\n", group);
    return 1;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (sl_test_selected(tests[i].name)) sel[m++] = tests[i];
  const char *f = getenv("SL_TEST_FILTER");
  if (f && *f) fprintf(stderr, "SL_TEST_FILTER='%s': %zu of %zu tests of %s\n", f, m, n, group);
  int rc = 1;
  if (m == 0)
    fprintf(stderr, "SL_TEST_FILTER='%s' matches no test of %s\n", f ? f : "", group);
  else
    rc = _cmocka_run_group_tests(group, sel, m, setup, teardown);
  free(sel);
  return rc;
}
