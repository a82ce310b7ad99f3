// Proxy test kernel: each block writes a pattern chunk into this rank's (host-mapped) window
// and posts one descriptor for it into the proxy's device ring (comm/ring.cuh).
#include "comm/ring.cuh"
#include "comm/proxy_pattern.h"

#ifndef PROXY_THREADS
#error "PROXY_THREADS (threads per block) must be defined by the JIT"
#endif

// Block b: bytes [local_base + b*chunk, +chunk) of the window get
// sl_proxy_pattern_byte(rank, b, epoch, i); then thread 0 posts a put of them to dst_rank's
// window at remote_base + b*chunk with flag flag_base + b = epoch. status[b] receives the
// ring's result (SL_RING_DEV_OK, or a negated sl_status_t the host reports).
extern "C" __global__ void __launch_bounds__(PROXY_THREADS)
    sl_proxy_post_pattern(sl_ring_dev_t ring, unsigned char *window, int rank, int dst_rank,
                          unsigned long long local_base, unsigned long long remote_base,
                          unsigned long long chunk, unsigned flag_base, unsigned long long epoch,
                          int *status) {
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
