/* JIT: every registered QK-norm point (dtype, head_dim, with/without RoPE, warps) compiles
 * with NVRTC for sm_90 and sm_100. No GPU needed. */
#include "sl_test_jit_points.h"

static void test_qknorm_points_compile(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_test_points_t p;
    sl_test_compile_module("qknorm", sl_test_archs[a], &p);
    static const char *dims[] = {"64", "128", "256"};
    for (int d = 0; d < 3; d++)
      for (int t = 0; t < 3; t++) {
        char dt[4];
        snprintf(dt, sizeof dt, "%d", (int)sl_test_float_dtypes_jit[t]);
        assert_true(sl_test_points_have2(&p, "HEAD_DIM", dims[d], "DTYPE", dt));
        assert_true(sl_test_points_have2(&p, "HEAD_DIM", dims[d], "ROT_DIM", dims[d])); /* fused RoPE */
        assert_true(sl_test_points_have2(&p, "HEAD_DIM", dims[d], "ROT_DIM", "0"));
      }
    assert_true(sl_test_points_have2(&p, "HEAD_DIM", "128", "ROT_DIM", "64")); /* partial rotary */
    sl_test_points_free(&p);
  }
}

int main(void) {
  sl_test_skip_without_jit();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_qknorm_points_compile)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
