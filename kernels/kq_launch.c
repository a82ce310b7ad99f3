/* Launch helper of the quant / act / router kernels: resident-grid sizing with a memoized
 * occupancy query. */
#include "kernels/kq_launch.h"

#include <pthread.h>
#include <stdint.h>

/* (kernel, threads) -> blocks per SM. A kernel lives until its device is closed; a later
 * kernel at a recycled address could inherit a stale entry, which only sizes the grid
 * (every kernel is grid-stride), never correctness. */
enum { MEMO_SIZE = 256 };
static struct {
  const sl_kernel_t *k;
  int threads, per_sm;
} memo[MEMO_SIZE];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static sl_status_t blocks_per_sm(sl_kernel_t *k, int threads, int *per_sm) {
  size_t h = (((uintptr_t)k >> 4) ^ (size_t)threads) % MEMO_SIZE;
  pthread_mutex_lock(&memo_lock);
  bool hit = memo[h].k == k && memo[h].threads == threads;
  if (hit) *per_sm = memo[h].per_sm;
  pthread_mutex_unlock(&memo_lock);
  if (hit) return SL_OK;
  SL_CHECK(sl_kernel_occupancy(k, threads, 0, per_sm));
  pthread_mutex_lock(&memo_lock);
  memo[h].k = k, memo[h].threads = threads, memo[h].per_sm = *per_sm;
  pthread_mutex_unlock(&memo_lock);
  return SL_OK;
}

sl_status_t sl_kq_launch(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, sl_stream_t *stream,
                         void **args) {
  int per_sm = 0;
  SL_CHECK(blocks_per_sm(k, warps * 32, &per_sm));
  if (per_sm < 1) per_sm = 1;
  long want = (items + (long)warps * unroll - 1) / ((long)warps * unroll);
  long resident = (long)per_sm * sl_device_info(dev)->sm_count;
  /* Up to a few waves the grid is capped at the resident blocks and strides; beyond that one
   * block per group of items (many short-lived blocks) streams better on the H200, as it did
   * for RMSNorm (+3-8 points of copy bandwidth at T >= 8192, kernels/NOTES.md). */
  long blocks = want <= SL_KQ_FULL_GRID_WAVES * resident ? (want < resident ? want : resident) : want;
  if (blocks < 1) blocks = 1;
  sl_launch_t l = {.grid = {(unsigned)blocks, 1, 1}, .block = {(unsigned)(warps * 32), 1, 1}, .stream = stream};
  return sl_kernel_launch(k, &l, args);
}
