// Device helpers of the node-level MoE dispatch/combine (comm/moe_ep.cu, comm/moe_tp.cu):
// flag waits that name the peer, warp copies, the warp release pattern, the error record.
// The including file defines SL_EP_THREADS and SL_EP_WARPS first.
#ifndef SL_MOE_EP_DEV_CUH
#define SL_MOE_EP_DEV_CUH

#include <cuda_bf16.h>

#include "comm/flags.cuh"
#include "comm/moe_ep_layout.h"

typedef sl_moe_ep_params_t ep_params_t;
typedef sl_moe_ep_layout_t ep_layout_t;

// ---- helpers ----------------------------------------------------------------------------
__device__ __forceinline__ sl_flag_t *ep_flag(unsigned char *base, long long off) {
  return reinterpret_cast<sl_flag_t *>(base + off);
}
__device__ __forceinline__ int *ep_i32(unsigned char *base, long long off) {
  return reinterpret_cast<int *>(base + off);
}
__device__ __forceinline__ int ep_lane() {
  return threadIdx.x & 31;
}
__device__ __forceinline__ int ep_gwarp() {
  return blockIdx.x * SL_EP_WARPS + (threadIdx.x >> 5);
}
__device__ __forceinline__ int ep_nwarps() {
  return gridDim.x * SL_EP_WARPS;
}

// Bounded acquire wait on a flag; on timeout the record names `peer` (comm/flags.cuh).
__device__ __forceinline__ bool ep_wait(const ep_params_t &p, const sl_flag_t *f, unsigned long long expected, int peer,
                                        unsigned flag_index) {
  return sl_flag_wait_eq_dev(f, expected, p.timeout_ns, p.timeout_rec,
                             reinterpret_cast<unsigned *>(p.ws + p.l.ws_claim), p.l.rank, peer, flag_index);
}

// First error wins (workspace record: code, a, b, c).
__device__ __forceinline__ void ep_error(const ep_params_t &p, int code, int a, int b, int c) {
  int *e = ep_i32(p.ws, p.l.ws_err);
  if (atomicCAS(e, 0, code) == 0) {
    e[1] = a;
    e[2] = b;
    e[3] = c;
  }
}

// A warp copies `bytes` (a multiple of 16) with one 16-byte access per lane.
__device__ __forceinline__ void ep_warp_copy16(void *dst, const void *src, long long bytes) {
  const uint4 *s = reinterpret_cast<const uint4 *>(src);
  uint4 *d = reinterpret_cast<uint4 *>(dst);
  for (long long i = ep_lane(); i < bytes / 16; i += 32)
    d[i] = s[i];
}
__device__ __forceinline__ void ep_warp_copy4(void *dst, const void *src, long long bytes) {
  const unsigned *s = reinterpret_cast<const unsigned *>(src);
  unsigned *d = reinterpret_cast<unsigned *>(dst);
  for (long long i = ep_lane(); i < bytes / 4; i += 32)
    d[i] = s[i];
}
__device__ __forceinline__ void ep_warp_zero16(void *dst, long long bytes) {
  uint4 *d = reinterpret_cast<uint4 *>(dst);
  for (long long i = ep_lane(); i < bytes / 16; i += 32)
    d[i] = make_uint4(0, 0, 0, 0);
}

// Publish what this warp stored with a release store of `flag` by lane 0: each lane fences
// its own stores at system scope (they may cross NVLink), the warp converges, then lane 0
// releases. The reader's acquire of the same value then sees every lane's data.
__device__ __forceinline__ void ep_warp_release(sl_flag_t *flag, unsigned long long epoch) {
  __threadfence_system();
  __syncwarp();
  if (ep_lane() == 0) sl_st_release_sys(flag, epoch);
}

// Lane 0 acquires; the result and the ordering reach the whole warp through __syncwarp.
__device__ __forceinline__ bool ep_warp_wait(const ep_params_t &p, const sl_flag_t *f, unsigned long long expected,
                                             int peer, unsigned idx) {
  int ok = 1;
  if (ep_lane() == 0) ok = ep_wait(p, f, expected, peer, idx);
  ok = __shfl_sync(0xffffffffu, ok, 0);
  __syncwarp();
  return ok != 0;
}

// Every kernel starts with a shared copy of its parameters carrying this call's epoch, read
// from the workspace: dispatch kernels use (last dispatch's epoch + 1), combine kernels the
// last dispatch's epoch. The last kernel of a dispatch stores its epoch back (ep_epoch_done),
// after every block of the call has read it. Keeping the epoch on the device, not in the
// launch arguments, is what lets a captured CUDA graph be replayed: each replay is a new call.
#define EP_PROLOGUE(p0, is_dispatch)                                                                                   \
  __shared__ ep_params_t p;                                                                                            \
  if (threadIdx.x == 0) {                                                                                              \
    p = p0;                                                                                                            \
    p.epoch = *reinterpret_cast<volatile unsigned long long *>(p0.ws + p0.l.ws_epoch) + (is_dispatch);                 \
  }                                                                                                                    \
  __syncthreads();

__device__ __forceinline__ void ep_epoch_done(const ep_params_t &p) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *reinterpret_cast<volatile unsigned long long *>(p.ws + p.l.ws_epoch) = p.epoch;
}

// Grid barrier for the cooperative launches (every block resident). Arrivals are counted in
// a word that the last arriver resets before it publishes the next generation, so grids of
// any size may follow each other. Ordering: each block's threads sync, thread 0 fences
// (cumulative over the block's stores) and arrives; the last arriver's release of the
// generation carries every arrival before it; waiters acquire it. Bounded: a timed-out
// barrier records SL_MOE_EP_ERR_BARRIER and lets the block continue (its work is void then,
// the host reports the error).
__device__ __forceinline__ void ep_grid_sync(const ep_params_t &p) {
  __syncthreads();
  if (threadIdx.x == 0) {
    sl_flag_t *gen = ep_flag(p.ws, p.l.ws_barrier);
    unsigned *arrive = reinterpret_cast<unsigned *>(p.ws + p.l.ws_barrier + 8);
    unsigned long long g = sl_ld_acquire_gpu(gen);
    __threadfence();
    if (atomicAdd(arrive, 1u) == gridDim.x - 1) {
      atomicExch(arrive, 0u);
      sl_st_release_gpu(gen, g + 1);
    } else {
      unsigned long long start = sl_globaltimer_ns();
      unsigned spins = 0;
      while (sl_ld_acquire_gpu(gen) == g) {
        if ((++spins & 255u) == 0 && sl_globaltimer_ns() - start > 4ull * p.timeout_ns) {
          ep_error(p, SL_MOE_EP_ERR_BARRIER, (int)blockIdx.x, (int)gridDim.x, 0);
          break;
        }
      }
    }
  }
  __syncthreads();
}

#endif
