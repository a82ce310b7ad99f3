/* Logging: rank prefix, level gating, rank 0 speaks and others only warn/error. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_test.h"

/* Run fn with stderr captured into buf. */
static void capture(void (*fn)(void), char *buf, size_t len) {
  char path[] = "/tmp/sluice-log-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, len - 1);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
}

static void emit_all(void) {
  SL_LOG_ERROR("e-line %d", 1);
  SL_LOG_WARN("w-line");
  SL_LOG_INFO("i-line");
  SL_LOG_DEBUG("d-line");
}

static void test_prefix_and_levels(void **state) {
  char buf[4096];
  sl_log_set_identity(0, 8, 0);
  sl_log_set_level(SL_LOG_INFO);
  capture(emit_all, buf, sizeof buf);
  assert_non_null(strstr(buf, "[sluice 0/8 node0] error: e-line 1\n"));
  assert_non_null(strstr(buf, "[sluice 0/8 node0] warn: w-line\n"));
  assert_non_null(strstr(buf, "[sluice 0/8 node0] info: i-line\n"));
  assert_null(strstr(buf, "d-line"));
}

static void test_other_ranks_quiet(void **state) {
  char buf[4096];
  sl_log_set_identity(3, 8, 1);
  sl_log_set_level(SL_LOG_DEBUG);
  capture(emit_all, buf, sizeof buf);
  assert_non_null(strstr(buf, "[sluice 3/8 node1] error: e-line 1"));
  assert_non_null(strstr(buf, "[sluice 3/8 node1] warn: w-line"));
  assert_null(strstr(buf, "i-line"));
  assert_null(strstr(buf, "d-line"));
}

static void emit_error_chain(void) {
  sl_log_set_level(SL_LOG_DEBUG);
  sl_status_t s = SL_ERR(SL_ERR_CAPACITY, "expert %d: %d tokens > capacity %d", 5, 300, 256);
  sl_error_trace(s, "moe.c", 42, "dispatch(...)");
}

static void test_error_reads_like_backtrace(void **state) {
  char buf[4096];
  sl_log_set_identity(0, 2, 0);
  capture(emit_error_chain, buf, sizeof buf);
  assert_non_null(strstr(buf, "error: SL_ERR_CAPACITY: expert 5: 300 tokens > capacity 256 ("));
  assert_non_null(strstr(buf, "from moe.c:42: dispatch(...) -> SL_ERR_CAPACITY"));
  assert_string_equal(sl_last_error(), "expert 5: 300 tokens > capacity 256");
}

static void test_bind_to_numa_node(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_topo_t t;
  SL_ASSERT_OK(sl_topo_discover(sl_device_info(dev), &t));
  if (t.numa_node < 0) {
    sl_device_close(dev);
    skip();
  }
  SL_ASSERT_OK(sl_topo_bind(&t));
  assert_true(t.bound);
  assert_true(strlen(t.cpuset) > 0);
  sl_device_close(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefix_and_levels),
      cmocka_unit_test(test_other_ranks_quiet),
      cmocka_unit_test(test_error_reads_like_backtrace),
      cmocka_unit_test(test_bind_to_numa_node),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
