/* JIT (no GPU): the comm kernels — one-shot, two-shot, fused all-reduce + RMSNorm, NVLS —
 * compile with NVRTC for sm_90 and sm_100 into cubins holding the kernel (every registered
 * point is compiled by test_jit_points; here one point per kernel and arch, plus the count
 * of registered points); the specs refuse bad
 * configurations with a clear error; a kernel compiled without its constants fails loudly,
 * naming the missing constant. */
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "comm/nvls.h"
#include "sl_test.h"

/* The cubin is an ELF holding the kernel's name in its string table. */
static bool cubin_has(const void *cubin, size_t size, const char *name) {
  size_t n = strlen(name);
  const char *p = cubin;
  for (size_t i = 0; i + n <= size; i++)
    if (memcmp(p + i, name, n) == 0) return true;
  return false;
}

typedef struct {
  int arch, compiled;
} walk_t;

static sl_status_t count_one(const sl_jit_spec_t *spec, void *user) {
  (*(int *)user)++;
  return SL_OK;
}

static sl_status_t compile_one(const sl_jit_spec_t *spec, void *user) {
  walk_t *w = user;
  void *cubin = NULL;
  size_t size = 0;
  sl_status_t s = sl_jit_compile(spec, w->arch, &cubin, &size, NULL);
  if (s != SL_OK) return s;
  bool ok = size > 4 &&
            memcmp(cubin,
                   "\x7f"
                   "ELF",
                   4) == 0 &&
            cubin_has(cubin, size, spec->entry);
  free(cubin);
  if (!ok) return SL_ERR(SL_ERR_INTERNAL, "%s: the cubin is not an ELF holding the kernel", spec->entry);
  w->compiled++;
  return SL_OK;
}

static void compile_all(int arch) {
  int points = 0, nvls_points = 0;
  SL_ASSERT_OK(sl_allreduce_jit_points(arch, count_one, &points));
  /* dtypes x kinds (oneshot, twoshot, oneshot-ll) x vector widths + fused + NVLS (sm_90 and later) */
  assert_int_equal(points, 3 * 3 * 2 + 2 * 3 + 3);
  SL_ASSERT_OK(sl_nvls_jit_points(arch, count_one, &nvls_points));
  assert_int_equal(nvls_points, 3);
  walk_t w = {.arch = arch};
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_allreduce_spec(&spec, SL_AR_ONESHOT, SL_DTYPE_BF16, 16));
  SL_ASSERT_OK(compile_one(&spec, &w));
  SL_ASSERT_OK(sl_allreduce_spec(&spec, SL_AR_TWOSHOT, SL_DTYPE_F16, 2)); /* unaligned: scalar */
  SL_ASSERT_OK(compile_one(&spec, &w));
  SL_ASSERT_OK(sl_allreduce_spec(&spec, SL_AR_ONESHOT_LL, SL_DTYPE_BF16, 16)); /* LL lines (v2.b64 .relaxed.sys) */
  SL_ASSERT_OK(compile_one(&spec, &w));
  SL_ASSERT_OK(sl_allreduce_spec(&spec, SL_AR_ONESHOT_LL, SL_DTYPE_F32, 4)); /* LL, scalar input */
  SL_ASSERT_OK(compile_one(&spec, &w));
  SL_ASSERT_OK(sl_allreduce_rmsnorm_spec(&spec, SL_DTYPE_BF16, 4096, 1e-6f, 1.0f));
  SL_ASSERT_OK(compile_one(&spec, &w));
  SL_ASSERT_OK(sl_nvls_spec(&spec, SL_DTYPE_BF16, 512));
  SL_ASSERT_OK(compile_one(&spec, &w));
  assert_int_equal(w.compiled, 6);
}

static void test_points_sm90(void **state) {
  compile_all(SL_ARCH_HOPPER);
}
static void test_points_sm100(void **state) {
  compile_all(SL_ARCH_BLACKWELL);
}

/* Every PTX wrapper of comm/flags.cuh assembles (ptxas only sees asm that a kernel uses). */
static void test_flag_wrappers_assemble(void **state) {
  for (int arch = SL_ARCH_HOPPER; arch <= SL_ARCH_BLACKWELL; arch += SL_ARCH_BLACKWELL - SL_ARCH_HOPPER) {
    sl_jit_spec_t spec;
    sl_jit_spec_init(&spec, "comm/flags_selftest.cu", "sl_flags_selftest");
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "FLAGS_ROUNDS", "%d", 100));
    walk_t w = {.arch = arch};
    SL_ASSERT_OK(compile_one(&spec, &w));
  }
}

static void test_spec_errors(void **state) {
  sl_jit_spec_t spec;
  assert_int_equal(sl_allreduce_spec(&spec, SL_AR_NCCL, SL_DTYPE_BF16, 16), SL_ERR_INVALID);
  assert_int_equal(sl_allreduce_spec(&spec, SL_AR_ONESHOT, SL_DTYPE_FP8_E4M3, 16), SL_ERR_INVALID);
  assert_int_equal(sl_allreduce_rmsnorm_spec(&spec, SL_DTYPE_BF16, 100, 1e-6f, 0.0f), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "hidden 100"));
  assert_int_equal(sl_nvls_spec(&spec, SL_DTYPE_I32, 512), SL_ERR_INVALID);
  /* the spec carries every constant the kernel needs */
  SL_ASSERT_OK(sl_allreduce_rmsnorm_spec(&spec, SL_DTYPE_BF16, 4096, 1e-5f, 1.0f));
  char desc[512];
  sl_jit_spec_describe(&spec, desc, sizeof desc);
  assert_non_null(strstr(desc, "ARN_HIDDEN=4096"));
  assert_non_null(strstr(desc, "AR_VEC=8"));
}

static void test_missing_constant_fails_loudly(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "comm/allreduce.cu", "sl_ar_oneshot");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "AR_THREADS", "%d", 512));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "AR_VEC", "%d", 8));
  void *cubin = NULL;
  size_t size = 0;
  assert_int_equal(sl_jit_compile(&spec, SL_ARCH_HOPPER, &cubin, &size, NULL), SL_ERR_JIT);
  assert_non_null(strstr(sl_last_error(), "AR_DTYPE"));
  free(cubin);
}

/* The NVLS path is refused, touching no driver object, unless SL_NVLS=1. */
static void test_nvls_off_by_default(void **state) {
  sl_config_t cfg;
  sl_config_defaults(&cfg);
  assert_false(cfg.nvls);
  sl_nvls_t *n = (sl_nvls_t *)&cfg; /* must be overwritten with NULL */
  assert_int_equal(sl_nvls_create(&cfg, NULL, MPI_COMM_NULL, 1 << 20, &n), SL_ERR_UNSUPPORTED);
  assert_null(n);
  assert_non_null(strstr(sl_last_error(), "SL_NVLS=0"));
}

int main(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    return SL_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_points_sm90),
      cmocka_unit_test(test_points_sm100),
      cmocka_unit_test(test_flag_wrappers_assemble),
      cmocka_unit_test(test_spec_errors),
      cmocka_unit_test(test_missing_constant_fails_loudly),
      cmocka_unit_test(test_nvls_off_by_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
