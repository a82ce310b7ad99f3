/* Every registered JIT configuration point compiles with NVRTC for sm_90 and sm_100.
 * Points are collected first, then compiled by one thread per core (NVRTC is thread-safe),
 * so CI's cold cache costs minutes, not tens of minutes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sl_jit_points.h"
#include "sl_test.h"

typedef struct {
  sl_jit_spec_t *specs;
  int count, cap;
} point_list_t;

static sl_status_t collect(const sl_jit_spec_t *spec, void *user) {
  point_list_t *l = user;
  if (l->count == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->specs = realloc(l->specs, (size_t)l->cap * sizeof *l->specs);
    if (!l->specs) return SL_ERR(SL_ERR_NOMEM, "point list");
  }
  l->specs[l->count++] = *spec;
  return SL_OK;
}

typedef struct {
  const point_list_t *points;
  int arch, first, stride, failed;
} worker_t;

static void *compile_some(void *p) {
  worker_t *w = p;
  for (int i = w->first; i < w->points->count; i += w->stride) {
    void *cubin = NULL;
    size_t size = 0;
    const sl_jit_spec_t *spec = &w->points->specs[i];
    if (sl_jit_compile(spec, w->arch, &cubin, &size, NULL) != SL_OK || size == 0) {
      char desc[512];
      sl_jit_spec_describe(spec, desc, sizeof desc);
      fprintf(stderr, "  sm_%d %s FAILED: %s\n", w->arch, desc, sl_last_error());
      w->failed++;
    }
    free(cubin);
  }
  return NULL;
}

static void walk_arch(int arch) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = cores < 1 ? 1 : cores > 8 ? 8 : (int)cores;
  for (const sl_jit_module_t *m = sl_jit_modules(); m->module; m++) {
    point_list_t points = {0};
    SL_ASSERT_OK(sl_jit_points(m->module, arch, collect, &points));
    assert_true(points.count > 0);
    pthread_t tid[8];
    worker_t w[8];
    for (int t = 0; t < nthreads; t++) {
      w[t] = (worker_t){.points = &points, .arch = arch, .first = t, .stride = nthreads};
      pthread_create(&tid[t], NULL, compile_some, &w[t]);
    }
    int failed = 0;
    for (int t = 0; t < nthreads; t++) {
      pthread_join(tid[t], NULL);
      failed += w[t].failed;
    }
    printf("  sm_%d %-16s %d point(s) compiled, %d failed\n", arch, m->module, points.count - failed, failed);
    free(points.specs);
    assert_int_equal(failed, 0);
  }
}

static void test_every_point_sm90(void **state) { walk_arch(SL_ARCH_HOPPER); }
static void test_every_point_sm100(void **state) { walk_arch(SL_ARCH_BLACKWELL); }

int main(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    return SL_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_point_sm90),
      cmocka_unit_test(test_every_point_sm100),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
