/* Every registered JIT configuration point compiles with NVRTC for sm_90 and sm_100. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sl_jit_points.h"
#include "sl_test.h"

typedef struct {
  int arch, ok, failed;
} walk_t;

static sl_status_t compile_point(const sl_jit_spec_t *spec, void *user) {
  walk_t *w = user;
  void *cubin = NULL;
  size_t size = 0;
  if (sl_jit_compile(spec, w->arch, &cubin, &size, NULL) == SL_OK && size > 0) {
    w->ok++;
  } else {
    char desc[512];
    sl_jit_spec_describe(spec, desc, sizeof desc);
    fprintf(stderr, "  sm_%d %s FAILED: %s\n", w->arch, desc, sl_last_error());
    w->failed++;
  }
  free(cubin);
  return SL_OK;
}

static void walk_arch(int arch) {
  for (const sl_jit_module_t *m = sl_jit_modules(); m->module; m++) {
    walk_t w = {.arch = arch};
    SL_ASSERT_OK(sl_jit_points(m->module, arch, compile_point, &w));
    printf("  sm_%d %-16s %d point(s) compiled\n", arch, m->module, w.ok);
    assert_int_equal(w.failed, 0);
    assert_true(w.ok > 0);
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
