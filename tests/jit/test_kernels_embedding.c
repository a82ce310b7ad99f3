/* JIT: every registered embedding point (dtype, hidden, warps) compiles with NVRTC for
 * sm_90 and sm_100. No GPU needed. */
#include "sl_test_jit_points.h"

static void test_embedding_points_compile(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_test_points_t p;
    sl_test_compile_module("embedding", sl_test_archs[a], &p);
    for (int t = 0; t < 3; t++) {
      char dt[4];
      snprintf(dt, sizeof dt, "%d", (int)sl_test_float_dtypes_jit[t]);
      assert_true(sl_test_points_have2(&p, "HIDDEN", "7168", "DTYPE", dt));
      assert_true(sl_test_points_have2(&p, "HIDDEN", "520", "DTYPE", dt));
    }
    assert_true(sl_test_points_have(&p, "WARPS", "1"));
    sl_test_points_free(&p);
  }
}

int main(void) {
  sl_test_skip_without_jit();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_embedding_points_compile)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
