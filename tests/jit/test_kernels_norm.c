/* JIT: every registered RMSNorm point (each dtype in/out pair, size class, variant, warps)
 * compiles with NVRTC for sm_90 and sm_100. No GPU needed. */
#include "sl_test_jit_points.h"

static void test_rmsnorm_points_compile(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_test_points_t p;
    sl_test_compile_module("rmsnorm", sl_test_archs[a], &p);
    /* Coverage: all 9 dtype pairs, both variants, the edge and model size classes. */
    for (int i = 0; i < 3; i++)
      for (int o = 0; o < 3; o++) {
        char in[4], out[4];
        snprintf(in, sizeof in, "%d", (int)sl_test_float_dtypes_jit[i]);
        snprintf(out, sizeof out, "%d", (int)sl_test_float_dtypes_jit[o]);
        assert_true(sl_test_points_have2(&p, "DTYPE_IN", in, "DTYPE_OUT", out));
      }
    assert_true(sl_test_points_have(&p, "RESIDUAL", "0"));
    assert_true(sl_test_points_have(&p, "RESIDUAL", "1"));
    static const char *hiddens[] = {"512", "520", "2048", "4096", "7168", "8192", "16384"};
    for (int h = 0; h < 7; h++)
      assert_true(sl_test_points_have(&p, "HIDDEN", hiddens[h]));
    assert_true(sl_test_points_have(&p, "WEIGHT_BIAS", "1.000000000e+00f"));
    /* Every elements-per-thread layout (the --tune sweep's and the table's). */
    assert_true(sl_test_points_have(&p, "ELTS", "8"));
    assert_true(sl_test_points_have(&p, "ELTS", "16"));
    assert_true(sl_test_points_have(&p, "ELTS", "32"));
    sl_test_points_free(&p);
  }
}

int main(void) {
  sl_test_skip_without_jit();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rmsnorm_points_compile)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
