/* GPU, one process: the PTX flag wrappers (comm/flags.cuh) between two blocks — release
 * stores publish the payload to acquire loads over 1000 epochs, red/atom counters add up —
 * and the bounded wait: a block whose peer never signals gives up after the timeout and
 * leaves {waiter, peer, flag, expected epoch, observed value} in host-mapped memory. */
#include <stdlib.h>
#include <string.h>

#include "comm/flags.h"
#include "sl_test.h"

static sl_device_t *dev;
enum { ROUNDS = 1000 };

typedef struct {
  sl_flag_t *flags;
  unsigned long long *data;
  unsigned int *errors, *claim;
  sl_flag_timeout_t *rec_host, *rec_dev;
} bufs_t;

static void setup(bufs_t *b) {
  SL_ASSERT_OK(sl_device_malloc(dev, 4 * sizeof(sl_flag_t), (void **)&b->flags));
  SL_ASSERT_OK(sl_device_malloc(dev, 2 * sizeof(unsigned long long), (void **)&b->data));
  SL_ASSERT_OK(sl_device_malloc(dev, 2 * sizeof(unsigned int), (void **)&b->errors));
  b->claim = b->errors + 1;
  SL_ASSERT_OK(sl_memset(dev, b->flags, 0, 4 * sizeof(sl_flag_t), NULL));
  SL_ASSERT_OK(sl_memset(dev, b->data, 0, 2 * sizeof(unsigned long long), NULL));
  SL_ASSERT_OK(sl_memset(dev, b->errors, 0, 2 * sizeof(unsigned int), NULL));
  SL_ASSERT_OK(sl_host_alloc_mapped(dev, sizeof(sl_flag_timeout_t), (void **)&b->rec_host, (void **)&b->rec_dev));
  memset(b->rec_host, 0, sizeof *b->rec_host);
  SL_ASSERT_OK(sl_device_sync(dev));
}

static void teardown(bufs_t *b) {
  sl_device_free(dev, b->flags);
  sl_device_free(dev, b->data);
  sl_device_free(dev, b->errors);
  sl_host_free_mapped(dev, b->rec_host);
}

static void launch(bufs_t *b, unsigned blocks, unsigned long long timeout_ns) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "comm/flags_selftest.cu", "sl_flags_selftest");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "FLAGS_ROUNDS", "%d", ROUNDS));
  sl_kernel_t *k;
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &k));
  sl_launch_t l = {.grid = {blocks, 1, 1}, .block = {32, 1, 1}};
  void *args[] = {&b->flags, &b->data, &b->errors, &b->rec_dev, &b->claim, &timeout_ns};
  SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
  SL_ASSERT_OK(sl_device_check(dev, "flags self-test"));
}

static void test_ping_pong(void **state) {
  bufs_t b;
  setup(&b);
  launch(&b, 2, 10ull * 1000000000ull);
  unsigned int errors = 1;
  sl_flag_t flags[3] = {0};
  SL_ASSERT_OK(sl_memcpy(dev, &errors, b.errors, sizeof errors, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, flags, b.flags, sizeof flags, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  assert_int_equal(b.rec_host->timed_out, 0);
  assert_int_equal(errors, 0);
  assert_int_equal(flags[0], ROUNDS);
  assert_int_equal(flags[1], ROUNDS);
  assert_int_equal(flags[2], 2ull * 4ull * ROUNDS); /* two blocks x four adds x rounds */
  teardown(&b);
}

static void test_wait_times_out(void **state) {
  bufs_t b;
  setup(&b);
  launch(&b, 1, 200ull * 1000000ull); /* block 1 never runs: block 0 waits in vain */
  const sl_flag_timeout_t *r = b.rec_host;
  assert_int_equal(r->timed_out, 1);
  assert_int_equal(r->waiter_rank, 0);
  assert_int_equal(r->peer, 1);
  assert_int_equal(r->flag_index, 1);
  assert_int_equal(r->expected, 1);
  assert_int_equal(r->observed, 0);
  assert_true(r->waited_ns >= 200ull * 1000000ull);
  assert_true(r->waited_ns < 5ull * 1000000000ull);
  teardown(&b);
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ping_pong),
      cmocka_unit_test(test_wait_times_out),
  };
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
