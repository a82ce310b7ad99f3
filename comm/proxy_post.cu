// Proxy test kernels: sl_proxy_post_pattern writes a pattern chunk per block into this rank's
// (host-mapped) window and posts a descriptor for it into the proxy's device ring;
// sl_proxy_check_pattern acquires a peer's flags on the GPU and checks the bytes that arrived.
#include "comm/proxy_pattern.h"
#include "comm/ring.cuh"

#ifndef PROXY_THREADS
#error "PROXY_THREADS (threads per block) must be defined by the JIT"
#endif

// Block b: bytes [local_base + b*chunk, +chunk) of the window get
// sl_proxy_pattern_byte(rank, b, epoch, i); then thread 0 posts a put of them to dst_rank's
// window at remote_base + b*chunk with flag flag_base + b = epoch. status[b] receives the
// ring's result (SL_RING_DEV_OK, or a negated sl_status_t the host reports).
extern "C" __global__ void __launch_bounds__(PROXY_THREADS)
    sl_proxy_post_pattern(sl_ring_dev_t ring, unsigned char *window, int rank, int dst_rank,
                          unsigned long long local_base, unsigned long long remote_base, unsigned long long chunk,
                          unsigned flag_base, unsigned long long epoch, int *status) {
  const unsigned b = blockIdx.x;
  unsigned char *mine = window + local_base + (unsigned long long)b * chunk;
  for (unsigned long long i = threadIdx.x; i < chunk; i += PROXY_THREADS)
    mine[i] = sl_proxy_pattern_byte((uint32_t)rank, b, epoch, i);
  __syncthreads();
  if (threadIdx.x == 0) {
    // Make the whole block's window writes visible system-wide before publishing.
    __threadfence_system();
    sl_ring_desc_t d;
    d.seq = 0;
    d.remote_offset = remote_base + (unsigned long long)b * chunk;
    d.local_offset = local_base + (unsigned long long)b * chunk;
    d.bytes = chunk;
    d.epoch = epoch;
    d.dst_rank = dst_rank;
    d.flag_index = flag_base + b;
    d.op = chunk ? SL_RING_OP_PUT : SL_RING_OP_FLAG_ONLY;
    uint64_t index = 0;
    status[b] = sl_ring_post(ring, d, &index);
  }
}

// Block b: thread 0 waits (bounded) until flags[flag_base + b] == epoch, with acquire at
// system scope; after the block barrier every thread compares bytes
// [recv_base + b*chunk, +chunk) of the window with sl_proxy_pattern_byte(src, b, epoch, i)
// and adds its mismatches to *mismatches. status[b]: SL_RING_DEV_OK or SL_RING_DEV_TIMEOUT.
extern "C" __global__ void __launch_bounds__(PROXY_THREADS)
    sl_proxy_check_pattern(const unsigned char *window, const uint64_t *flags, int src, unsigned long long recv_base,
                           unsigned long long chunk, unsigned flag_base, unsigned long long epoch,
                           unsigned long long timeout_ns, unsigned long long *mismatches, int *status) {
  __shared__ int flag_status;
  const unsigned b = blockIdx.x;
  if (threadIdx.x == 0) {
    flag_status = sl_ring_wait_flag(flags + flag_base + b, epoch, timeout_ns);
    status[b] = flag_status;
  }
  // The barrier extends thread 0's acquire to the block: the bytes put before the flag are
  // visible to every thread. They arrived after this kernel started: volatile loads, so no
  // cached copy can be read.
  __syncthreads();
  if (flag_status != SL_RING_DEV_OK) return;
  const volatile unsigned char *got = window + recv_base + (unsigned long long)b * chunk;
  unsigned long long bad = 0;
  for (unsigned long long i = threadIdx.x; i < chunk; i += PROXY_THREADS)
    bad += got[i] != sl_proxy_pattern_byte((uint32_t)src, b, epoch, i);
  if (bad) atomicAdd(mismatches, bad);
}
