/* The process-wide configuration on first use from many threads at once (its own process, so
 * this is sl_config()'s first call): every caller sees the loaded values. The lazy load once had
 * no synchronization, and `sluice jit warm`'s compile threads read an empty cuda_home while the
 * first caller was still filling it in (NVRTC: "cannot open source file cuda_bf16.h"). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "sl_test.h"

enum { NTHREADS = 8 };
static pthread_barrier_t start;
static sl_config_t seen[NTHREADS];

static void *reader(void *arg) {
  const int i = (int)(intptr_t)arg;
  pthread_barrier_wait(&start);
  seen[i] = *sl_config();
  return NULL;
}

static void test_first_use_from_threads(void **state) {
  (void)state;
  sl_config_t want;
  SL_ASSERT_OK(sl_config_load(&want));
  assert_true(want.cuda_home[0] != '\0' && want.cache_dir[0] != '\0');
  pthread_t tid[NTHREADS];
  assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(pthread_create(&tid[i], NULL, reader, (void *)(intptr_t)i), 0);
  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(pthread_join(tid[i], NULL), 0);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < NTHREADS; i++) {
    assert_string_equal(seen[i].cuda_home, want.cuda_home);
    assert_string_equal(seen[i].cache_dir, want.cache_dir);
    assert_int_equal(seen[i].timeout_ms, want.timeout_ms);
  }
  assert_ptr_equal(sl_config(), sl_config()); /* one configuration, loaded once */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_first_use_from_threads)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
