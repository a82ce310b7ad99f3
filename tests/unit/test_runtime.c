/* Unit tests of the runtime core: status, config parsing, CPU device layer. */
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"

static void test_status_names(void **state) {
  assert_string_equal(sl_status_str(SL_OK), "SL_OK");
  assert_string_equal(sl_status_str(SL_ERR_TIMEOUT), "SL_ERR_TIMEOUT");
  assert_string_equal(sl_status_str((sl_status_t)-999), "SL_ERR_UNKNOWN");
}

static sl_status_t inner(int fail) {
  if (fail) return SL_ERR(SL_ERR_RANGE, "id %d out of range", 7);
  return SL_OK;
}
static sl_status_t outer(int fail) {
  SL_CHECK(inner(fail));
  return SL_OK;
}
static sl_status_t with_cleanup(int fail, int *cleaned) {
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(inner(fail), s, out);
out:
  *cleaned = 1;
  return s;
}

static void test_check_propagates(void **state) {
  sl_clear_error();
  assert_int_equal(outer(0), SL_OK);
  assert_int_equal(outer(1), SL_ERR_RANGE);
  assert_string_equal(sl_last_error(), "id 7 out of range");
  int cleaned = 0;
  assert_int_equal(with_cleanup(1, &cleaned), SL_ERR_RANGE);
  assert_int_equal(cleaned, 1);
}

static void test_config_defaults_and_errors(void **state) {
  sl_config_t cfg;
  unsetenv("SL_DEVICE");
  unsetenv("SL_TIMEOUT_MS");
  SL_ASSERT_OK(sl_config_load(&cfg));
  assert_int_equal(cfg.device, SL_DEVICE_AUTO);
  assert_int_equal(cfg.timeout_ms, 10000);
  assert_false(cfg.nvls);

  setenv("SL_DEVICE", "gpu", 1);
  assert_int_equal(sl_config_load(&cfg), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "SL_DEVICE='gpu'"));
  assert_non_null(strstr(sl_last_error(), "auto|cpu|cuda"));
  setenv("SL_DEVICE", "cpu", 1);

  setenv("SL_TIMEOUT_MS", "12abc", 1);
  assert_int_equal(sl_config_load(&cfg), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "SL_TIMEOUT_MS"));
  setenv("SL_TIMEOUT_MS", "0", 1);
  assert_int_equal(sl_config_load(&cfg), SL_ERR_INVALID);
  setenv("SL_TIMEOUT_MS", "2500", 1);
  SL_ASSERT_OK(sl_config_load(&cfg));
  assert_int_equal(cfg.timeout_ms, 2500);
  assert_int_equal(cfg.device, SL_DEVICE_CPU);

  setenv("SL_NVLS", "yes", 1);
  assert_int_equal(sl_config_load(&cfg), SL_ERR_INVALID);
  unsetenv("SL_NVLS");
  unsetenv("SL_TIMEOUT_MS");
  unsetenv("SL_DEVICE");
}

static void test_config_table_documents_every_var(void **state) {
  int n = 0;
  for (const sl_config_var_t *v = sl_config_vars(); v->name; v++, n++) {
    assert_true(strncmp(v->name, "SL_", 3) == 0);
    assert_non_null(v->values);
    assert_non_null(v->meaning);
  }
  assert_true(n >= 10);
}

static void test_cpu_device_roundtrip(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  assert_int_equal(sl_device_backend(dev), SL_BACKEND_CPU);
  void *a, *b;
  SL_ASSERT_OK(sl_device_malloc(dev, 1000, &a));
  SL_ASSERT_OK(sl_device_malloc(dev, 1000, &b));
  assert_true(((uintptr_t)a & 255) == 0);
  SL_ASSERT_OK(sl_memset(dev, a, 0x5a, 1000, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, b, a, 1000, NULL));
  for (int i = 0; i < 1000; i++) assert_int_equal(((unsigned char *)b)[i], 0x5a);
  sl_stream_t *st;
  sl_event_t *e0, *e1;
  SL_ASSERT_OK(sl_stream_create(dev, &st));
  SL_ASSERT_OK(sl_event_create(dev, &e0));
  SL_ASSERT_OK(sl_event_create(dev, &e1));
  SL_ASSERT_OK(sl_event_record(dev, e0, st));
  SL_ASSERT_OK(sl_event_record(dev, e1, st));
  float ms = -1;
  SL_ASSERT_OK(sl_event_elapsed_ms(dev, e0, e1, &ms));
  assert_true(ms >= 0);
  assert_int_equal(sl_graph_begin_capture(dev, st), SL_ERR_UNSUPPORTED);
  void *h, *hd;
  SL_ASSERT_OK(sl_host_alloc_mapped(dev, 64, &h, &hd));
  assert_ptr_equal(h, hd);
  sl_host_free_mapped(dev, h);
  sl_event_destroy(dev, e0);
  sl_event_destroy(dev, e1);
  sl_stream_destroy(dev, st);
  /* a wrapper of the default stream works; a native handle on the CPU backend is refused */
  sl_stream_t *wr = NULL;
  SL_ASSERT_OK(sl_stream_wrap(dev, NULL, &wr));
  assert_null(sl_stream_native(wr));
  SL_ASSERT_OK(sl_memset(dev, a, 0x11, 1000, wr));
  SL_ASSERT_OK(sl_stream_sync(dev, wr));
  assert_int_equal(((unsigned char *)a)[999], 0x11);
  sl_stream_destroy(dev, wr);
  wr = NULL;
  assert_int_equal(sl_stream_wrap(dev, (void *)&wr, &wr), SL_ERR_INVALID);
  assert_null(wr);
  sl_device_free(dev, a);
  sl_device_free(dev, b);
  sl_device_close(dev);
}

static void test_cuda_request_fails_cleanly_or_works(void **state) {
  sl_device_t *dev = NULL;
  sl_status_t s = sl_device_open(SL_DEVICE_CUDA, 0, &dev);
  if (s == SL_OK) {
    assert_int_equal(sl_device_backend(dev), SL_BACKEND_CUDA);
    sl_device_close(dev);
  } else {
    assert_int_equal(s, SL_ERR_UNSUPPORTED);
    assert_true(strlen(sl_device_cuda_unavailable_reason()) > 0);
  }
  /* auto always yields a device */
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_AUTO, 0, &dev));
  sl_device_close(dev);
}

static void test_probe_on_cpu(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_probe_result_t r;
  SL_ASSERT_OK(sl_probe_run(dev, 1000, 2.0f, 0.5f, &r));
  assert_int_equal(r.mismatches, 0);
  assert_false(r.ran_on_gpu);
  assert_int_equal(sl_probe_run(dev, 0, 2.0f, 0.5f, &r), SL_ERR_INVALID);
  sl_device_close(dev);
}

static void test_topology_without_gpu(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_topo_t t;
  SL_ASSERT_OK(sl_topo_discover(sl_device_info(dev), &t));
  assert_int_equal(t.gpu, -1);
  assert_true(t.num_cores >= 1);
  assert_true(strlen(t.cpuset) > 0);
  char ucx[80];
  sl_topo_ucx_net_devices(&t, ucx, sizeof ucx);
  if (t.nic[0]) assert_non_null(strstr(ucx, t.nic));
  else assert_string_equal(ucx, "");
  sl_device_close(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_check_propagates),
      cmocka_unit_test(test_config_defaults_and_errors),
      cmocka_unit_test(test_config_table_documents_every_var),
      cmocka_unit_test(test_cpu_device_roundtrip),
      cmocka_unit_test(test_cuda_request_fails_cleanly_or_works),
      cmocka_unit_test(test_probe_on_cpu),
      cmocka_unit_test(test_topology_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
