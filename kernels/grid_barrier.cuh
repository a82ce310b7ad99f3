// Grid-wide barrier for cooperative launches: one arrival atomic per block, epoch in bit 31.
//
// Protocol (state: kernels/grid_barrier.h, one 32-bit word per barrier state):
//  - Every block's thread 0 arrives once with red.release.gpu: block 0 adds 2^31 - (n-1),
//    the others add 1. The n-th arrival, whichever block it is, therefore flips bit 31 (the
//    epoch) and returns the low bits to their old value: the last arriver bumps the epoch
//    inside its own atomic, with no second round trip.
//  - Thread 0 remembers the epoch it saw before arriving (the epoch cannot move before this
//    block arrives) and polls the word with ld.relaxed.gpu until bit 31 differs, then issues
//    one fence.acq_rel.gpu (strong read + fence = PTX acquire pattern).
//  - Ordering: __syncthreads orders the block's writes before thread 0's release; the
//    release/acquire pattern on the word (the adds form one release sequence) makes every
//    block's pre-barrier writes visible to every block after the barrier; the second
//    __syncthreads extends that to the block's other threads. No __threadfence needed.
//  - The wait is bounded: after timeout_ns (globaltimer, first read after 1024 polls) thread 0 records
//    SL_DEV_ERR_TIMEOUT in the error record and the whole block returns false. The state is
//    then inconsistent and must be zeroed by the host before the next launch.
//  - Polling variant (compile-time, SL_GRID_BARRIER_ACQUIRE_POLL, default 1 since the H200
//    measured 1.01 us per barrier for it against 1.06 us for 0, 132 blocks, 2026-11-29): 1 polls with
//    ld.acquire.gpu and needs no fence after the flip (the acquire load that sees the new
//    epoch completes the pattern). 0 (relaxed polls + one fence.acq_rel) is what
//    cooperative_groups does; 1 trades the exit fence (a MEMBAR.GPU on the critical path
//    of every block) for an L1 invalidation per poll. The barrier benchmark compiles both
//    (sl_grid_barrier_bench_variant) so one GPU run shows which is faster.
#ifndef SL_GRID_BARRIER_CUH
#define SL_GRID_BARRIER_CUH

#ifndef SL_GRID_BARRIER_ACQUIRE_POLL
#define SL_GRID_BARRIER_ACQUIRE_POLL 1
#endif

#include "kernels/grid_barrier.h"

// 32-bit PTX wrappers of the barrier (comm/flags.cuh has the 64-bit flag ones; the names
// differ so a kernel may include both).

__device__ __forceinline__ unsigned sl_grid_ld_acquire_u32(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned sl_grid_ld_relaxed_u32(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void sl_grid_red_release_add_u32(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void sl_grid_fence_acq_rel(void) { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ unsigned long long sl_grid_globaltimer_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Record an error once: the first writer wins; later ones are dropped.
__device__ __forceinline__ void sl_dev_error_record(sl_dev_error_t *e, int code, int a, int b, int c) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->a = a;
    e->b = b;
    e->c = c;
  }
}

// Per-thread handle; only thread 0's `epoch` is meaningful.
typedef struct {
  sl_grid_barrier_state_t *state;
  unsigned epoch;
} sl_grid_barrier_t;

// Call once at kernel start (before any block can have completed a barrier of this launch).
__device__ __forceinline__ void sl_grid_barrier_init(sl_grid_barrier_t *b, sl_grid_barrier_state_t *state) {
  b->state = state;
  b->epoch = 0;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    b->epoch = sl_grid_ld_relaxed_u32(&state->word) & SL_GRID_BARRIER_EPOCH_BIT;
}

// Split phases, for thread 0 of each block only (the caller orders the block's writes before
// the arrival itself, e.g. by a __syncthreads): arrive once, wait later, so the block can work
// between the two. Each block must arrive exactly once per barrier.
__device__ __forceinline__ void sl_grid_barrier_arrive(sl_grid_barrier_t *b) {
  const unsigned nblocks = gridDim.x * gridDim.y * gridDim.z;
  const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
  sl_grid_red_release_add_u32(&b->state->word, first ? SL_GRID_BARRIER_EPOCH_BIT - (nblocks - 1u) : 1u);
}
// Polls until every block has arrived (bounded: records SL_DEV_ERR_TIMEOUT and returns false
// after timeout_ns). Thread 0 only; the block's other threads learn the outcome from it.
__device__ __forceinline__ bool sl_grid_barrier_wait(sl_grid_barrier_t *b, unsigned long long timeout_ns) {
  const unsigned *word = &b->state->word;
  bool ok = true;
  // Spin with relaxed loads (no per-poll acquire: ld.acquire invalidates L1 after every
  // poll); one acquire fence once the epoch has flipped completes the acquire pattern
  // (strong read, then fence.acq_rel). The timer is only started after 1024 polls, so
  // a barrier that completes in time never reads %globaltimer.
#if SL_GRID_BARRIER_ACQUIRE_POLL
#define SL_GRID_BARRIER_POLL sl_grid_ld_acquire_u32
#else
#define SL_GRID_BARRIER_POLL sl_grid_ld_relaxed_u32
#endif
  unsigned v = SL_GRID_BARRIER_POLL(word);
  unsigned spins = 0;
  unsigned long long start = 0;
  while (((v ^ b->epoch) & SL_GRID_BARRIER_EPOCH_BIT) == 0) {
    v = SL_GRID_BARRIER_POLL(word);
    if ((++spins & 1023u) == 0) {
      const unsigned long long now = sl_grid_globaltimer_ns();
      if (start == 0) {
        start = now;
      } else if (now - start > timeout_ns) {
        sl_dev_error_record(&b->state->error, SL_DEV_ERR_TIMEOUT, (int)blockIdx.x,
                            (int)(v & ~SL_GRID_BARRIER_EPOCH_BIT), (int)(gridDim.x * gridDim.y * gridDim.z));
        ok = false;
        break;
      }
    }
  }
#undef SL_GRID_BARRIER_POLL
#if !SL_GRID_BARRIER_ACQUIRE_POLL
  sl_grid_fence_acq_rel();
#endif
  b->epoch ^= SL_GRID_BARRIER_EPOCH_BIT;
  return ok;
}

// Every thread of every block calls it. Returns false (in every thread of the block) on
// timeout, after recording it; the caller then returns from the kernel. Thread 0's outcome
// reaches the block through the closing barrier's OR reduction (bar.red.or): a shared-memory
// flag written before the barrier and read after it put a store and a load on every barrier's
// path (0.951 vs 1.01 us per barrier on the H200 with and without, session 15 call 3).
__device__ __forceinline__ bool sl_grid_barrier_sync(sl_grid_barrier_t *b, unsigned long long timeout_ns) {
  int failed = 0;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    sl_grid_barrier_arrive(b);
    failed = !sl_grid_barrier_wait(b, timeout_ns);
  }
  return __syncthreads_or(failed) == 0;
}

#endif
