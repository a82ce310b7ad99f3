/* JIT test: the device side of the proxy ring (comm/ring.cuh, via the test kernels of
 * comm/proxy_post.cu: post and check) compiles with NVRTC for sm_90 and sm_100, which also checks the
 * descriptor layout against ring.h's static_asserts in device compilation. */
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "sl_test.h"

static void compile_for(int arch) {
  sl_status_t (*const specs[])(sl_jit_spec_t *, int) = {sl_proxy_post_kernel_spec, sl_proxy_check_kernel_spec};
  for (size_t i = 0; i < 2; i++) {
    sl_jit_spec_t spec;
    SL_ASSERT_OK(specs[i](&spec, 128));
    void *cubin = NULL;
    size_t size = 0;
    sl_jit_result_t res;
    SL_ASSERT_OK(sl_jit_compile(&spec, arch, &cubin, &size, &res));
    assert_non_null(cubin);
    assert_true(size > 1000);
    free(cubin);
  }
}

static void test_compiles_sm90(void **state) {
  if (!sl_jit_available()) skip();
  compile_for(SL_ARCH_HOPPER);
}

static void test_compiles_sm100(void **state) {
  if (!sl_jit_available()) skip();
  compile_for(SL_ARCH_BLACKWELL);
}

static void test_spec_rejects_bad_block(void **state) {
  sl_jit_spec_t spec;
  assert_int_equal(sl_proxy_post_kernel_spec(&spec, 100), SL_ERR_INVALID);
  assert_int_equal(sl_proxy_post_kernel_spec(&spec, 2048), SL_ERR_INVALID);
  assert_int_equal(sl_proxy_check_kernel_spec(&spec, 0), SL_ERR_INVALID);
  SL_ASSERT_OK(sl_proxy_post_kernel_spec(&spec, 256));
  char buf[256];
  sl_jit_spec_describe(&spec, buf, sizeof buf);
  assert_non_null(strstr(buf, "PROXY_THREADS=256"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compiles_sm90),
      cmocka_unit_test(test_compiles_sm100),
      cmocka_unit_test(test_spec_rejects_bad_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
