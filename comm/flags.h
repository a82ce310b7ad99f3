/* Flags between ranks: epoch layout, timeout record, and the CPU (C11 atomics) implementation.
 * Plain C, included by host code and by device code (comm/flags.cuh has the PTX twin).
 *
 * Invariants (DESIGN.md "Memory and flags"), relied on by every user of these flags:
 *  - A flag is a 64-bit word holding an epoch. A sender's epoch grows by one per call and is
 *    never reset, so a waiter that is one call behind cannot mistake an old signal for a
 *    new one (no ABA). Epoch 0 is "never signalled" (buffers start zeroed).
 *  - Waiters compare for EQUALITY with the epoch they expect. Protocols must therefore make
 *    sure a writer cannot advance a flag past the value its reader still waits for (the
 *    all-reduce alternates two flag sets by epoch parity for that reason, see allreduce_layout.h).
 *  - A flag has exactly one writer (the peer named by its slot) and one reader (the rank
 *    whose memory holds it). The writer publishes data with: data stores, then a RELEASE
 *    store of the flag. The reader: ACQUIRE load of the flag until it equals the epoch, then
 *    data loads. CPU: atomic_store_explicit(release) / atomic_load_explicit(acquire);
 *    GPU: st.release.sys / ld.acquire.sys (flags.cuh).
 *  - Every wait is bounded by SL_TIMEOUT_MS. A waiter that times out fills an
 *    sl_flag_timeout_t (who it waited for, which flag, what it expected, what it saw) and
 *    gives up; the host turns the record into SL_ERR_TIMEOUT naming the peer.
 */
#ifndef SL_COMM_FLAGS_H
#define SL_COMM_FLAGS_H

#ifndef __CUDACC_RTC__
#include <stdbool.h>
#endif

/* Only built-in types here: NVRTC has no <stdint.h>. */

/* One flag: an epoch written by one peer, read by the rank whose memory holds it. */
typedef unsigned long long sl_flag_t;

/* What a waiter that gave up leaves behind. Lives in host-mapped memory on the GPU (the
 * device writes it, the host reads it after the stream work); in plain memory on the CPU.
 * `timed_out` is written last (after a fence), so a reader that sees it non-zero sees the
 * rest of the record. The first waiter to time out wins; later ones leave it alone. */
typedef struct {
  unsigned int timed_out;       /* 0 = no timeout; 1 = the record below is valid */
  int waiter_rank;              /* rank (in the communicator) that waited */
  int peer;                     /* rank it waited for */
  unsigned int flag_index;      /* index of the flag in the waiter's flag array */
  unsigned long long expected;  /* epoch it waited for */
  unsigned long long observed;  /* value it last read */
  unsigned long long waited_ns; /* how long it waited */
} sl_flag_timeout_t;

#ifndef __CUDACC_RTC__
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static inline unsigned long long sl_flag_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Acquire load: data the writer stored before its release store of this value is visible
 * to loads that follow. */
static inline unsigned long long sl_flag_load_acquire(const sl_flag_t *flag) {
  return atomic_load_explicit((_Atomic sl_flag_t *)flag, memory_order_acquire);
}
/* Release store: every store before it is visible to a reader that acquires this value. */
static inline void sl_flag_store_release(sl_flag_t *flag, unsigned long long epoch) {
  atomic_store_explicit((_Atomic sl_flag_t *)flag, epoch, memory_order_release);
}
/* Relaxed load, for polling a value whose data need not be ordered (e.g. counters). */
static inline unsigned long long sl_flag_load_relaxed(const sl_flag_t *flag) {
  return atomic_load_explicit((_Atomic sl_flag_t *)flag, memory_order_relaxed);
}

/* Spin until *flag == expected (acquire), at most timeout_ms. Spins briefly, then yields
 * the CPU between polls (ranks may outnumber cores). Returns true when the epoch arrived;
 * false on timeout, with *observed the last value read and *waited_ns the time spent. */
static inline bool sl_flag_wait_eq(const sl_flag_t *flag, unsigned long long expected, long timeout_ms,
                                   unsigned long long *observed, unsigned long long *waited_ns) {
  unsigned long long v = sl_flag_load_acquire(flag);
  if (v == expected) {
    if (waited_ns) *waited_ns = 0;
    return true;
  }
  unsigned long long start = sl_flag_now_ns(), limit = (unsigned long long)timeout_ms * 1000000ull, now = start;
  for (unsigned spins = 0;; spins++) {
    v = sl_flag_load_acquire(flag);
    if (v == expected) break;
    if ((spins & 63u) == 63u) {
      now = sl_flag_now_ns();
      if (now - start >= limit) {
        if (observed) *observed = v;
        if (waited_ns) *waited_ns = now - start;
        return false;
      }
      sched_yield();
    }
  }
  if (waited_ns) *waited_ns = sl_flag_now_ns() - start;
  return true;
}

/* Fill a timeout record unless one is already there (first waiter wins). */
static inline void sl_flag_timeout_record(sl_flag_timeout_t *rec, int waiter_rank, int peer, unsigned int flag_index,
                                          unsigned long long expected, unsigned long long observed,
                                          unsigned long long waited_ns) {
  if (atomic_load_explicit((_Atomic unsigned int *)&rec->timed_out, memory_order_acquire)) return;
  rec->waiter_rank = waiter_rank;
  rec->peer = peer;
  rec->flag_index = flag_index;
  rec->expected = expected;
  rec->observed = observed;
  rec->waited_ns = waited_ns;
  atomic_store_explicit((_Atomic unsigned int *)&rec->timed_out, 1u, memory_order_release);
}
#endif /* !__CUDACC_RTC__ */

#endif
