/* JIT spec building (the per-launch host path): the fast formatting paths of
 * sl_jit_spec_define and sl_jit_spec_describe produce exactly the text vsnprintf would (the
 * text is the kernel's cache key and its -D option), for edge values and random ones. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_jit.h"
#include "sl_test.h"

static void test_int_values_match_printf(void **state) {
  const int edge[] = {0, 1, -1, 9, 10, -10, 99, 100, 12345, -98765, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1};
  srand((unsigned)sl_test_seed());
  for (int i = 0; i < 2000; i++) {
    int v = i < (int)(sizeof edge / sizeof edge[0]) ? edge[i] : (int)((unsigned)rand() * 2654435761u);
    sl_jit_spec_t spec;
    sl_jit_spec_init(&spec, "kernels/x.cu", "k");
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "V", "%d", v));
    char want[32];
    snprintf(want, sizeof want, "%d", v);
    assert_string_equal(spec.defines[0].value, want);
  }
}

static void test_float_values_match_printf(void **state) {
  const float edge[] = {1e-6f, 1e-5f, 0.0f, -0.0f, 1.0f, 1.0f / 3.0f, 448.0f, 1e-30f, 3.4e38f, -2.5f};
  srand((unsigned)sl_test_seed());
  for (int i = 0; i < 3000; i++) { /* repeats exercise the memo, new values its replacement */
    float v = i < 10 ? edge[i] : (i % 3 == 0 ? edge[i % 10] : ldexpf((float)rand() / RAND_MAX, rand() % 60 - 30));
    sl_jit_spec_t spec;
    sl_jit_spec_init(&spec, "kernels/x.cu", "k");
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "EPS", "%.9ef", (double)v));
    SL_ASSERT_OK(sl_jit_spec_define_f32(&spec, "B", v));
    char want[64];
    snprintf(want, sizeof want, "%.9ef", (double)v);
    assert_string_equal(spec.defines[0].value, want);
    snprintf(want, sizeof want, "%af", (double)v);
    assert_string_equal(spec.defines[1].value, want);
  }
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/x.cu", "k");
  assert_int_equal(sl_jit_spec_define_f32(&spec, "B", NAN), SL_ERR_INVALID);
  assert_int_equal(sl_jit_spec_define_f32(&spec, "B", INFINITY), SL_ERR_INVALID);
}

static void test_other_formats_and_errors(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/x.cu", "k");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "A", "0x%x", 255u));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "S", "%s", "abc"));
  assert_string_equal(spec.defines[0].value, "0xff");
  assert_string_equal(spec.defines[1].value, "abc");
  char long_name[80];
  memset(long_name, 'N', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  assert_int_equal(sl_jit_spec_define(&spec, long_name, "%d", 1), SL_ERR_INVALID);
  char long_value[200];
  memset(long_value, 'v', sizeof long_value - 1);
  long_value[sizeof long_value - 1] = '\0';
  assert_int_equal(sl_jit_spec_define(&spec, "L", "%s", long_value), SL_ERR_INVALID);
  assert_int_equal(spec.num_defines, 2);
}

static void test_describe_matches_printf(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/x.cu", "sl_entry");
  char buf[1024], want[1024];
  sl_jit_spec_describe(&spec, buf, sizeof buf);
  assert_string_equal(buf, "sl_entry[]");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "HIDDEN", "%d", 2048));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "EPS", "%.9ef", 1e-6));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "W", "%d", -3));
  sl_jit_spec_describe(&spec, buf, sizeof buf);
  snprintf(want, sizeof want, "sl_entry[HIDDEN=2048 EPS=%.9ef W=-3]", 1e-6);
  assert_string_equal(buf, want);
  /* Truncation: always terminated, never past len. */
  for (size_t len = 1; len < strlen(want) + 3; len++) {
    memset(buf, 'Z', sizeof buf);
    sl_jit_spec_describe(&spec, buf, len);
    size_t n = strlen(buf);
    assert_true(n < len);
    assert_memory_equal(buf, want, n);
    assert_int_equal(buf[len], 'Z');
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int_values_match_printf),
      cmocka_unit_test(test_float_values_match_printf),
      cmocka_unit_test(test_other_formats_and_errors),
      cmocka_unit_test(test_describe_matches_printf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
