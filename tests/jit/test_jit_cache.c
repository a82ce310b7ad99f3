/* JIT without a GPU: NVRTC compiles for sm_90 and sm_100, cache miss then hit, a corrupt
 * cache file is detected and rebuilt, compile errors name the kernel, constants and log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_test.h"

static sl_jit_spec_t probe(float shift) {
  sl_jit_spec_t spec;
  if (sl_probe_spec(&spec, shift) != SL_OK) fail_msg("probe spec");
  return spec;
}

static void compile_ok(const sl_jit_spec_t *spec, int arch, sl_jit_result_t *r) {
  void *cubin = NULL;
  size_t size = 0;
  SL_ASSERT_OK(sl_jit_compile(spec, arch, &cubin, &size, r));
  assert_non_null(cubin);
  assert_true(size > 64);
  /* A cubin is an ELF image. */
  assert_memory_equal(cubin, "\x7f" "ELF", 4);
  free(cubin);
}

static void test_miss_then_hit_both_archs(void **state) {
  int archs[] = {SL_ARCH_HOPPER, SL_ARCH_BLACKWELL};
  for (int i = 0; i < 2; i++) {
    sl_jit_spec_t spec = probe(0.125f + (float)i);
    sl_jit_result_t r;
    compile_ok(&spec, archs[i], &r);
    assert_false(r.cache_hit);
    assert_true(r.compile_ms > 0);
    assert_int_equal(access(r.cache_path, R_OK), 0);
    assert_non_null(strstr(r.cache_path, archs[i] == 90 ? "sm90" : "sm100"));
    compile_ok(&spec, archs[i], &r);
    assert_true(r.cache_hit);
    assert_false(r.cache_rebuilt);
  }
}

static void test_distinct_constants_distinct_entries(void **state) {
  sl_jit_spec_t a = probe(1.0f), b = probe(2.0f);
  sl_jit_result_t ra, rb;
  compile_ok(&a, 90, &ra);
  compile_ok(&b, 90, &rb);
  assert_string_not_equal(ra.cache_path, rb.cache_path);
}

static void corrupt_and_check(void (*damage)(const char *path)) {
  sl_jit_spec_t spec = probe(3.5f);
  sl_jit_result_t r;
  compile_ok(&spec, 90, &r);
  damage(r.cache_path);
  compile_ok(&spec, 90, &r);
  assert_false(r.cache_hit);
  assert_true(r.cache_rebuilt);
  compile_ok(&spec, 90, &r);
  assert_true(r.cache_hit);
}

static void flip_payload_byte(const char *path) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, -100, SEEK_END);
  int c = fgetc(f);
  fseek(f, -100, SEEK_END);
  fputc(c ^ 0x5a, f);
  fclose(f);
}
static void truncate_file(const char *path) { assert_int_equal(truncate(path, 100), 0); }
static void garbage_file(const char *path) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("not a cubin at all", f);
  fclose(f);
}
static void append_bytes(const char *path) {
  FILE *f = fopen(path, "ab");
  assert_non_null(f);
  fputs("trailing", f);
  fclose(f);
}

static void test_corrupt_payload_rebuilt(void **state) { corrupt_and_check(flip_payload_byte); }
static void test_truncated_rebuilt(void **state) { corrupt_and_check(truncate_file); }
static void test_garbage_rebuilt(void **state) { corrupt_and_check(garbage_file); }
static void test_trailing_rebuilt(void **state) { corrupt_and_check(append_bytes); }

static void test_compile_error_is_reported(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "runtime/probe.cu", "sl_probe_axpb");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "PROBE_THREADS", "%d", 128)); /* PROBE_SHIFT missing */
  void *cubin = NULL;
  size_t size;
  sl_jit_result_t r;
  assert_int_equal(sl_jit_compile(&spec, 90, &cubin, &size, &r), SL_ERR_JIT);
  assert_null(cubin);
  const char *msg = sl_last_error();
  assert_non_null(strstr(msg, "sl_probe_axpb"));
  assert_non_null(strstr(msg, "PROBE_THREADS=128"));
  assert_non_null(strstr(msg, "PROBE_SHIFT")); /* from NVRTC's log: the #error text */
}

static void test_missing_source(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/no_such_op.cu", "nothing");
  void *cubin;
  size_t size;
  assert_int_equal(sl_jit_compile(&spec, 90, &cubin, &size, NULL), SL_ERR_NOT_FOUND);
  assert_int_equal(sl_jit_compile(&spec, 7, &cubin, &size, NULL), SL_ERR_INVALID);
}

static void test_too_many_defines(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "runtime/probe.cu", "sl_probe_axpb");
  for (int i = 0; i < SL_JIT_MAX_DEFINES; i++) SL_ASSERT_OK(sl_jit_spec_define(&spec, "X", "%d", i));
  assert_int_equal(sl_jit_spec_define(&spec, "X", "1"), SL_ERR_CAPACITY);
}

typedef struct {
  sl_jit_spec_t spec;
  sl_status_t status;
} thread_arg_t;

static void *compile_thread(void *p) {
  thread_arg_t *a = p;
  void *cubin = NULL;
  size_t size;
  a->status = sl_jit_compile(&a->spec, 90, &cubin, &size, NULL);
  free(cubin);
  return NULL;
}

static void test_concurrent_writers(void **state) {
  /* Several compilers of one point race to write the same cache file: each write is a
   * temp file + rename, so the survivor is whole and the next read is a valid hit. */
  pthread_t t[4];
  thread_arg_t a[4];
  for (int i = 0; i < 4; i++) {
    a[i].spec = probe(7.25f);
    pthread_create(&t[i], NULL, compile_thread, &a[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(a[i].status, SL_OK);
  }
  sl_jit_result_t r;
  compile_ok(&a[0].spec, 90, &r);
  assert_true(r.cache_hit);
}

static bool count_entry(const sl_jit_cache_entry_t *e, void *user) {
  int *n = user;
  if (e->valid) (*n)++;
  return true;
}

static void test_list_and_clear(void **state) {
  int n = 0, removed = 0;
  SL_ASSERT_OK(sl_jit_cache_list(count_entry, &n));
  assert_true(n >= 3);
  SL_ASSERT_OK(sl_jit_cache_clear(&removed));
  assert_true(removed >= n);
  n = 0;
  SL_ASSERT_OK(sl_jit_cache_list(count_entry, &n));
  assert_int_equal(n, 0);
}

int main(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    return SL_TEST_SKIP;
  }
  char dir[] = "/tmp/sluice-jit-test-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("SL_CACHE_DIR", dir, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_miss_then_hit_both_archs),
      cmocka_unit_test(test_distinct_constants_distinct_entries),
      cmocka_unit_test(test_corrupt_payload_rebuilt),
      cmocka_unit_test(test_truncated_rebuilt),
      cmocka_unit_test(test_garbage_rebuilt),
      cmocka_unit_test(test_trailing_rebuilt),
      cmocka_unit_test(test_compile_error_is_reported),
      cmocka_unit_test(test_missing_source),
      cmocka_unit_test(test_too_many_defines),
      cmocka_unit_test(test_concurrent_writers),
      cmocka_unit_test(test_list_and_clear),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rmdir(dir);
  return rc;
}
