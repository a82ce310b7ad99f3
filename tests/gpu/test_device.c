/* GPU: device layer and JIT on a real device — memory, copies, mapped host memory, the probe
 * kernel against its CPU twin (miss then cache hit), graph capture, cooperative launch rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"

static sl_device_t *dev;

static void test_info(void **state) {
  const sl_device_info_t *d = sl_device_info(dev);
  assert_int_equal(d->backend, SL_BACKEND_CUDA);
  assert_true(d->arch >= 70);
  assert_true(d->sm_count > 0);
  assert_true(strlen(d->pci_bus_id) > 0);
  printf("  %s sm_%d, %d SMs, pci %s\n", d->name, d->arch, d->sm_count, d->pci_bus_id);
}

static void test_copies_roundtrip(void **state) {
  uint64_t seed = sl_test_seed();
  size_t n = (1 << 20) + 3;
  unsigned char *h = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) h[i] = (unsigned char)sl_test_rand_u64(&seed);
  void *a, *b;
  SL_ASSERT_OK(sl_device_malloc(dev, n, &a));
  SL_ASSERT_OK(sl_device_malloc(dev, n, &b));
  sl_test_poison(dev, b, n);
  SL_ASSERT_OK(sl_memcpy(dev, a, h, n, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, b, a, n, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, back, b, n, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  assert_memory_equal(h, back, n);
  SL_ASSERT_OK(sl_memset(dev, a, 0x3c, n, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, back, a, n, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  for (size_t i = 0; i < n; i++) assert_int_equal(back[i], 0x3c);
  sl_device_free(dev, a);
  sl_device_free(dev, b);
  free(h);
  free(back);
}

static void test_probe_miss_then_hit(void **state) {
  sl_probe_result_t r;
  SL_ASSERT_OK(sl_probe_run(dev, 1000003, 1.75f, -0.5f, &r));
  assert_true(r.ran_on_gpu);
  assert_int_equal(r.mismatches, 0);
  assert_false(r.cache_hit); /* fresh cache dir */
  SL_ASSERT_OK(sl_probe_run(dev, 77, 1.75f, -0.5f, &r));
  assert_true(r.cache_hit);
  assert_int_equal(r.mismatches, 0);
}

static sl_kernel_t *probe_kernel(float shift) {
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_probe_spec(&spec, shift));
  sl_kernel_t *k;
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &k));
  sl_kernel_t *again;
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &again));
  assert_ptr_equal(k, again); /* memoized */
  return k;
}

/* The probe kernel's output y = scale * x + 2 (probe_kernel(2.0f)) for every element. */
static void check_probe_output(const uint16_t *hx, const void *hy, int n, float scale) {
  for (int i = 0; i < n; i++) {
    float want = scale * sl_bf16_to_f32(hx[i]) + 2.0f;
    assert_true(fabsf(((const float *)hy)[i] - want) <= 1e-6f * fabsf(want) + 1e-7f);
  }
}

static void test_mapped_host_output_and_graph(void **state) {
  /* The kernel writes straight into host-mapped memory; then the same launch is captured in a
   * graph and replayed into a poisoned buffer. */
  sl_kernel_t *k = probe_kernel(2.0f);
  int n = 4096;
  uint16_t *hx = malloc((size_t)n * 2);
  uint64_t seed = sl_test_seed();
  for (int i = 0; i < n; i++) hx[i] = sl_f32_to_bf16(sl_test_rand_uniform(&seed, -4, 4));
  void *dx, *hy, *dy;
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)n * 2, &dx));
  SL_ASSERT_OK(sl_memcpy(dev, dx, hx, (size_t)n * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(dev)); /* the kernel runs on a non-blocking stream (not ordered after stream 0) */
  SL_ASSERT_OK(sl_host_alloc_mapped(dev, (size_t)n * 4, &hy, &dy));
  memset(hy, 0xff, (size_t)n * 4);
  float scale = 3.0f;
  void *args[] = {&dx, &dy, &scale, &n};
  sl_stream_t *st;
  SL_ASSERT_OK(sl_stream_create(dev, &st));
  sl_launch_t l = {.grid = {(unsigned)(n / 256)}, .block = {256}, .stream = st};
  SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
  SL_ASSERT_OK(sl_stream_sync(dev, st));
  check_probe_output(hx, hy, n, scale);
  memset(hy, 0xff, (size_t)n * 4);
  SL_ASSERT_OK(sl_graph_begin_capture(dev, st));
  SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
  sl_graph_t *g;
  SL_ASSERT_OK(sl_graph_end_capture(dev, st, &g));
  assert_true(isnan(((float *)hy)[0])); /* captured, not run */
  SL_ASSERT_OK(sl_graph_launch(dev, g, st));
  SL_ASSERT_OK(sl_stream_sync(dev, st));
  check_probe_output(hx, hy, n, scale);
  sl_graph_destroy(dev, g);
  /* The launch on a wrapper of st's native stream (sl_stream_wrap): it runs on that stream (a
   * sync of st sees it done), and destroying the wrapper leaves st alive. */
  memset(hy, 0xff, (size_t)n * 4);
  sl_stream_t *w;
  SL_ASSERT_OK(sl_stream_wrap(dev, sl_stream_native(st), &w));
  assert_ptr_equal(sl_stream_native(w), sl_stream_native(st));
  sl_launch_t lw = l;
  lw.stream = w;
  SL_ASSERT_OK(sl_kernel_launch(k, &lw, args));
  SL_ASSERT_OK(sl_stream_sync(dev, st));
  check_probe_output(hx, hy, n, scale);
  sl_stream_destroy(dev, w);
  memset(hy, 0xff, (size_t)n * 4);
  SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
  SL_ASSERT_OK(sl_stream_sync(dev, st));
  SL_ASSERT_OK(sl_device_check(dev, "launch after the wrapper's destroy"));
  check_probe_output(hx, hy, n, scale);
  sl_stream_destroy(dev, st);
  sl_host_free_mapped(dev, hy);
  sl_device_free(dev, dx);
  free(hx);
}

static void test_events_time_work(void **state) {
  sl_event_t *a, *b;
  SL_ASSERT_OK(sl_event_create(dev, &a));
  SL_ASSERT_OK(sl_event_create(dev, &b));
  void *buf;
  size_t n = 256 << 20;
  SL_ASSERT_OK(sl_device_malloc(dev, n, &buf));
  SL_ASSERT_OK(sl_event_record(dev, a, NULL));
  SL_ASSERT_OK(sl_memset(dev, buf, 0, n, NULL));
  SL_ASSERT_OK(sl_event_record(dev, b, NULL));
  SL_ASSERT_OK(sl_event_sync(dev, b));
  float ms = 0;
  SL_ASSERT_OK(sl_event_elapsed_ms(dev, a, b, &ms));
  assert_true(ms > 0 && ms < 1000);
  sl_device_free(dev, buf);
  sl_event_destroy(dev, a);
  sl_event_destroy(dev, b);
}

static void test_cooperative_grid_limits(void **state) {
  sl_kernel_t *k = probe_kernel(0.0f);
  int per_sm = 0;
  SL_ASSERT_OK(sl_kernel_occupancy(k, 256, 0, &per_sm));
  assert_true(per_sm >= 1);
  int sms = sl_device_info(dev)->sm_count;
  int n = 1 << 16;
  void *dx, *dy;
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)n * 2, &dx));
  SL_ASSERT_OK(sl_device_malloc(dev, (size_t)n * 4, &dy));
  SL_ASSERT_OK(sl_memset(dev, dx, 0, (size_t)n * 2, NULL));
  float scale = 1.0f;
  void *args[] = {&dx, &dy, &scale, &n};
  sl_launch_t ok = {.grid = {(unsigned)sms}, .block = {256}, .cooperative = true};
  SL_ASSERT_OK(sl_kernel_launch(k, &ok, args));
  sl_launch_t too_big = {.grid = {(unsigned)(per_sm * sms + 1)}, .block = {256}, .cooperative = true};
  assert_int_equal(sl_kernel_launch(k, &too_big, args), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "co-resident"));
  sl_launch_t bad = {.grid = {1}, .block = {2048}};
  assert_int_equal(sl_kernel_launch(k, &bad, args), SL_ERR_INVALID);
  SL_ASSERT_OK(sl_device_check(dev, "cooperative probe"));
  sl_device_free(dev, dx);
  sl_device_free(dev, dy);
}

int main(void) {
  char dir[] = "/tmp/sluice-gpu-jit-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("SL_CACHE_DIR", dir, 1);
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info),
      cmocka_unit_test(test_copies_roundtrip),
      cmocka_unit_test(test_probe_miss_then_hit),
      cmocka_unit_test(test_mapped_host_output_and_graph),
      cmocka_unit_test(test_events_time_work),
      cmocka_unit_test(test_cooperative_grid_limits),
  };
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
