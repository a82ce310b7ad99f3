/* Helpers for the jit tests of kernel modules: compile every registered point of a module
 * for one arch (through the cache), keep the specs so a test can check coverage. */
#ifndef SL_TEST_JIT_POINTS_H
#define SL_TEST_JIT_POINTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sl_jit_points.h"
#include "kernels/sl_dtype.h"
#include "sl_test.h"

static const int sl_test_archs[2] = {SL_ARCH_HOPPER, SL_ARCH_BLACKWELL};
static const sl_dtype_t sl_test_float_dtypes_jit[3] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};

typedef struct {
  int arch, count, failed;
  sl_jit_spec_t *specs;
  int cap;
} sl_test_points_t;

static inline void sl_test_skip_without_jit(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    exit(SL_TEST_SKIP);
  }
}

static inline sl_status_t sl_test_compile_point(const sl_jit_spec_t *spec, void *user) {
  sl_test_points_t *p = user;
  void *cubin = NULL;
  size_t size = 0;
  sl_jit_result_t r;
  char desc[512];
  sl_jit_spec_describe(spec, desc, sizeof desc);
  if (sl_jit_compile(spec, p->arch, &cubin, &size, &r) != SL_OK || size == 0) {
    fprintf(stderr, "  FAILED sm_%d %s: %s\n", p->arch, desc, sl_last_error());
    p->failed++;
  }
  free(cubin);
  if (p->count == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 64;
    p->specs = realloc(p->specs, (size_t)p->cap * sizeof *p->specs);
    if (!p->specs) fail_msg("out of memory");
  }
  p->specs[p->count++] = *spec;
  return SL_OK;
}

/* Compile every point of `module` for `arch`; fails the test on any compile error. */
static inline void sl_test_compile_module(const char *module, int arch, sl_test_points_t *p) {
  memset(p, 0, sizeof *p);
  p->arch = arch;
  SL_ASSERT_OK(sl_jit_points(module, arch, sl_test_compile_point, p));
  fprintf(stderr, "[jit] %s sm_%d: %d points, %d failed\n", module, arch, p->count, p->failed);
  assert_true(p->count > 0);
  assert_int_equal(p->failed, 0);
}

static inline const char *sl_test_spec_value(const sl_jit_spec_t *s, const char *name) {
  for (int i = 0; i < s->num_defines; i++)
    if (strcmp(s->defines[i].name, name) == 0) return s->defines[i].value;
  return NULL;
}

/* Is there a point whose constant `name` is `value` (and `name2` is `value2`)? */
static inline int sl_test_points_have2(const sl_test_points_t *p, const char *name, const char *value,
                                       const char *name2, const char *value2) {
  for (int i = 0; i < p->count; i++) {
    const char *v = sl_test_spec_value(&p->specs[i], name);
    const char *v2 = name2 ? sl_test_spec_value(&p->specs[i], name2) : "";
    if (v && v2 && strcmp(v, value) == 0 && (!name2 || strcmp(v2, value2) == 0)) return 1;
  }
  fprintf(stderr, "  no point with %s=%s%s%s%s\n", name, value, name2 ? " " : "", name2 ? name2 : "",
          name2 ? value2 : "");
  return 0;
}
static inline int sl_test_points_have(const sl_test_points_t *p, const char *name, const char *value) {
  return sl_test_points_have2(p, name, value, NULL, NULL);
}

static inline void sl_test_points_free(sl_test_points_t *p) {
  free(p->specs);
}

#endif
