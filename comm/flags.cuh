// Flags between ranks, device side: PTX acquire/release wrappers and a bounded wait.
// The protocol invariants are written once in comm/flags.h; this is their GPU twin
// (st.release.sys / ld.acquire.sys <-> C11 release store / acquire load).
#ifndef SL_COMM_FLAGS_CUH
#define SL_COMM_FLAGS_CUH

#include "comm/flags.h"

// ---- loads and stores with ordering ------------------------------------------------------
// .sys scope: the other side may be another process on another GPU (over NVLink) or the
// host; .gpu scope: all threads of this GPU (e.g. a grid barrier).
__device__ __forceinline__ unsigned long long sl_ld_acquire_sys(const sl_flag_t *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long sl_ld_acquire_gpu(const sl_flag_t *p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long sl_ld_relaxed_sys(const sl_flag_t *p) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void sl_st_release_sys(sl_flag_t *p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void sl_st_release_gpu(sl_flag_t *p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Release add (no return): counters such as "tokens arrived" that several writers bump.
__device__ __forceinline__ void sl_red_release_sys_add(sl_flag_t *p, unsigned long long v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void sl_red_release_gpu_add(sl_flag_t *p, unsigned long long v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Acquire-release fetch-add (returns the old value).
__device__ __forceinline__ unsigned long long sl_atom_acq_rel_gpu_add(sl_flag_t *p, unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ unsigned long long sl_atom_acq_rel_sys_add(sl_flag_t *p, unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ void sl_fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ __forceinline__ void sl_fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// Nanoseconds from the global timer (same clock on every SM).
__device__ __forceinline__ unsigned long long sl_globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- timeout record -----------------------------------------------------------------------
// Fill the record unless another waiter already claimed it (first waiter wins: claimed with a
// CAS on `claim`, a word in DEVICE memory initialised to 0 -- atomics on host-mapped memory
// are not portable over PCIe -- and published by writing timed_out last, after a .sys fence).
__device__ __forceinline__ void sl_flag_timeout_record_dev(sl_flag_timeout_t *rec, unsigned int *claim,
                                                           int waiter_rank, int peer, unsigned flag_index,
                                                           unsigned long long expected, unsigned long long observed,
                                                           unsigned long long waited_ns) {
  if (atomicCAS(claim, 0u, 1u) != 0u) return;
  rec->waiter_rank = waiter_rank;
  rec->peer = peer;
  rec->flag_index = flag_index;
  rec->expected = expected;
  rec->observed = observed;
  rec->waited_ns = waited_ns;
  sl_fence_acq_rel_sys();
  *(volatile unsigned int *)&rec->timed_out = 1u;
}

// Has a waiter of this rank already given up? Reads the claim word (device memory, cheap),
// never the host-mapped record: a read over PCIe costs about a microsecond and reads of one
// host address from many SMs are served one after another.
__device__ __forceinline__ bool sl_flag_timeout_claimed(const unsigned int *claim) {
  return *(volatile const unsigned int *)claim != 0u;
}

// ---- bounded wait --------------------------------------------------------------------------
// Spin (one thread) until *flag == expected, at most timeout_ns. On timeout fill the record
// (sl_flag_timeout_record_dev) and return false. Also gives up early, without writing, when
// another waiter already claimed the record, so a dead peer costs one timeout, not one per
// block. No __nanosleep: the waits on the fast path are a few microseconds.
__device__ __forceinline__ bool sl_flag_wait_eq_dev(const sl_flag_t *flag, unsigned long long expected,
                                                    unsigned long long timeout_ns, sl_flag_timeout_t *rec,
                                                    unsigned int *claim, int waiter_rank, int peer,
                                                    unsigned flag_index) {
  unsigned long long v = sl_ld_acquire_sys(flag);
  if (v == expected) return true;
  const unsigned long long start = sl_globaltimer_ns();
  for (unsigned spins = 0;; spins++) {
    v = sl_ld_acquire_sys(flag);
    if (v == expected) return true;
    if ((spins & 255u) == 255u) {
      const unsigned long long now = sl_globaltimer_ns();
      if (sl_flag_timeout_claimed(claim)) return false;
      if (now - start >= timeout_ns) {
        sl_flag_timeout_record_dev(rec, claim, waiter_rank, peer, flag_index, expected, v, now - start);
        return false;
      }
    }
  }
}

#endif
