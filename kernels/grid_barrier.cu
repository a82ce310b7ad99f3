// Grid barrier benchmark and self-check: every block runs `rounds` barriers. With `check`,
// between two barriers each block publishes the round it reached and checks its
// neighbour's; without, the loop is barriers only (the timed run: a store before each
// barrier would add its write-back wait to the release, which is the caller's cost).
#ifndef GB_THREADS
#error "GB_THREADS (threads per block) must be defined by the JIT"
#endif
#ifndef GB_VARIANT
#error "GB_VARIANT (0: relaxed polls + fence, 1: acquire polls, 2: cooperative_groups grid.sync) must be defined"
#endif
// Variant 2 is the ceiling the issue names, measured in the same run: cooperative_groups'
// grid.sync (unbounded: the launcher refuses an absent block for it).
#define SL_GRID_BARRIER_ACQUIRE_POLL (GB_VARIANT == 1)
#include "kernels/grid_barrier.cuh"
#if GB_VARIANT == 2
#include <cooperative_groups.h>
#endif

extern "C" __global__ void __launch_bounds__(GB_THREADS)
    sl_grid_barrier_bench(sl_grid_barrier_state_t *state, int *round_of_block, int rounds, int absent_block,
                          int check, unsigned long long timeout_ns) {
  if ((int)blockIdx.x == absent_block) return; // tests: the others must time out
  sl_grid_barrier_t bar;
  sl_grid_barrier_init(&bar, state);
  const unsigned n = gridDim.x;
  for (int r = 1; r <= rounds; r++) {
    if (check && threadIdx.x == 0) round_of_block[blockIdx.x] = r;
#if GB_VARIANT == 2
    cooperative_groups::this_grid().sync();
#else
    if (!sl_grid_barrier_sync(&bar, timeout_ns)) return;
#endif
    // After the barrier the neighbour's write of round r must be visible (it may already
    // have moved on to r + 1, never less than r).
    if (check && threadIdx.x == 0) {
      int seen = *(volatile int *)&round_of_block[(blockIdx.x + 1) % n];
      if (seen < r) sl_dev_error_record(&state->error, SL_DEV_ERR_RANGE, (int)blockIdx.x, seen, r);
    }
  }
}
