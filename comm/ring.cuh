// Device-side producer of the proxy's descriptor ring (layout and protocol: comm/ring.h).
// A GPU thread reserves a number with a CAS on the ring's device-memory head, fills the
// slot in host-mapped memory and publishes it with st.release.sys, so the proxy thread,
// which loads seq with acquire, sees the descriptor and the window data written before it.
#ifndef SL_COMM_RING_CUH
#define SL_COMM_RING_CUH

#include "comm/ring.h"

// Status codes the device producer returns (values of sl_status_t on the host).
#define SL_RING_DEV_OK 0
#define SL_RING_DEV_TIMEOUT (-10) // SL_ERR_TIMEOUT: ring full for longer than the bound
#define SL_RING_DEV_PEER (-14)    // SL_ERR_PEER: the proxy reported a failure

// System-scope acquire/release on host-mapped memory. These few wrappers are local to the
// ring; the general flags library is comm/flags.cuh.
__device__ __forceinline__ uint64_t sl_ring_ld_acquire_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void sl_ring_st_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t sl_ring_globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// What a kernel needs to post: the ring header (device alias of the host-mapped ring) and
// the producers' head counter (device memory). Filled by sl_proxy_device_ring on the host.
struct sl_ring_dev_t {
  sl_ring_header_t *ring;
  unsigned long long *head;
  unsigned long long timeout_ns;
};

// Post one descriptor from one thread. Waits (bounded by r.timeout_ns) while the ring is
// full. Returns SL_RING_DEV_OK and the descriptor's number in *index, SL_RING_DEV_TIMEOUT
// when the ring stayed full, SL_RING_DEV_PEER when the proxy has failed.
// Data the calling thread (or, after a __syncthreads/grid barrier, its block) wrote into
// the window before this call is visible to the proxy: the publishing store is a
// release at system scope, and a __threadfence_system orders other threads' writes
// that the caller has synchronized with.
__device__ __forceinline__ int sl_ring_post(const sl_ring_dev_t &r, const sl_ring_desc_t &d, uint64_t *index) {
  sl_ring_header_t *ring = r.ring;
  const uint32_t capacity = ring->capacity;
  const uint64_t start = sl_ring_globaltimer_ns();
  unsigned long long h = *(volatile unsigned long long *)r.head;
  for (;;) {
    if (sl_ring_ld_acquire_sys(&ring->error) != 0) return SL_RING_DEV_PEER;
    const uint64_t tail = sl_ring_ld_acquire_sys(&ring->tail);
    if (sl_ring_has_room(h, tail, capacity)) {
      unsigned long long seen = atomicCAS(r.head, h, h + 1ull);
      if (seen == h) break;
      h = seen;
      continue;
    }
    if (sl_ring_globaltimer_ns() - start > r.timeout_ns) return SL_RING_DEV_TIMEOUT;
    __nanosleep(256);
    h = *(volatile unsigned long long *)r.head;
  }
  sl_ring_desc_t *slot = sl_ring_slot(ring, h);
  slot->remote_offset = d.remote_offset;
  slot->local_offset = d.local_offset;
  slot->bytes = d.bytes;
  slot->epoch = d.epoch;
  slot->dst_rank = d.dst_rank;
  slot->flag_index = d.flag_index;
  slot->op = d.op;
  __threadfence_system();
  sl_ring_st_release_sys(&slot->seq, sl_ring_seq_of(h));
  *index = h;
  return SL_RING_DEV_OK;
}

// Wait until descriptor number `index` has completed at its destination (the source bytes
// may then be overwritten). Bounded like sl_ring_post.
__device__ __forceinline__ int sl_ring_wait_done(const sl_ring_dev_t &r, uint64_t index) {
  const uint64_t start = sl_ring_globaltimer_ns();
  while (sl_ring_ld_acquire_sys(&r.ring->done) <= index) {
    if (sl_ring_ld_acquire_sys(&r.ring->error) != 0) return SL_RING_DEV_PEER;
    if (sl_ring_globaltimer_ns() - start > r.timeout_ns) return SL_RING_DEV_TIMEOUT;
    __nanosleep(256);
  }
  return SL_RING_DEV_OK;
}

// Wait until the flag word `flag` (device alias of a host-mapped flag slot) equals `epoch`
// (acquire: the data put before it is then visible). Bounded like sl_ring_post.
__device__ __forceinline__ int sl_ring_wait_flag(const uint64_t *flag, uint64_t epoch, unsigned long long timeout_ns) {
  const uint64_t start = sl_ring_globaltimer_ns();
  while (sl_ring_ld_acquire_sys(flag) != epoch) {
    if (sl_ring_globaltimer_ns() - start > timeout_ns) return SL_RING_DEV_TIMEOUT;
    __nanosleep(256);
  }
  return SL_RING_DEV_OK;
}

#endif
