// All-reduce protocol on the device: element types, 16-byte vector helpers, and the
// begin / exchange / end steps shared by comm/allreduce.cu and comm/nvls.cu. The protocol and
// its invariants are written once in comm/allreduce_layout.h and comm/flags.h.
#ifndef SL_COMM_ALLREDUCE_PROTO_CUH
#define SL_COMM_ALLREDUCE_PROTO_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "comm/allreduce_layout.h"
#include "comm/flags.cuh"

#ifndef AR_DTYPE
#error "AR_DTYPE (0 = f32, 1 = bf16, 2 = f16; kernels/sl_dtype.h) must be defined by the JIT"
#endif
#ifndef AR_THREADS
#error "AR_THREADS (threads per block, a multiple of 32) must be defined by the JIT"
#endif
#ifndef AR_VEC
#error "AR_VEC (elements per vector access: 16 bytes' worth, or 1 for unaligned buffers) must be defined by the JIT"
#endif
#if AR_THREADS % 32 != 0 || AR_THREADS > 1024
#error "AR_THREADS must be a multiple of 32, at most 1024"
#endif

// ---- element type: raw bits in memory, fp32 in registers ---------------------------------------
#if AR_DTYPE == 0
#define AR_ELEM_BYTES 4
typedef unsigned int elem_bits_t;
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) {
  return __uint_as_float(u);
}
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) {
  return __float_as_uint(f);
}
#elif AR_DTYPE == 1
#define AR_ELEM_BYTES 2
typedef unsigned short elem_bits_t;
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) {
  return __bfloat162float(__ushort_as_bfloat16(u));
}
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
#elif AR_DTYPE == 2
#define AR_ELEM_BYTES 2
typedef unsigned short elem_bits_t;
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) {
  return __half2float(__ushort_as_half(u));
}
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) {
  return __half_as_ushort(__float2half_rn(f));
}
#else
#error "AR_DTYPE must be 0 (f32), 1 (bf16) or 2 (f16)"
#endif

#define ES ((unsigned long long)sizeof(elem_bits_t))
#define VEC_BYTES (AR_VEC * AR_ELEM_BYTES)
#if VEC_BYTES == 16
typedef uint4 raw_vec_t;
#elif AR_VEC == 1
typedef elem_bits_t raw_vec_t;
#else
#error "AR_VEC must make 16 bytes or be 1"
#endif

// A vector of AR_VEC elements: the 16-byte load/store helper (llm.c's Packed128 idea).
union pack_t {
  raw_vec_t raw;
  elem_bits_t e[AR_VEC];
};
// Peer and staged data are read with ld.global.cg (L2, not L1): another process wrote them,
// and L1 is not coherent across the acquire done by a different thread of the block.
__device__ __forceinline__ pack_t ld_vec_cg(const char *p) {
  pack_t x;
  x.raw = __ldcg((const raw_vec_t *)p);
  return x;
}
__device__ __forceinline__ void st_vec(char *p, pack_t x) {
  *(raw_vec_t *)p = x.raw;
}
__device__ __forceinline__ elem_bits_t ld_elem_cg(const char *p) {
  return __ldcg((const elem_bits_t *)p);
}
__device__ __forceinline__ void st_elem(char *p, elem_bits_t v) {
  *(elem_bits_t *)p = v;
}

// ---- protocol helpers ----------------------------------------------------------------------------
struct ar_block_t {
  char *seg[SL_AR_MAX_RANKS]; // segments, copied to shared memory for indexed access
  unsigned long long epoch;
  int fail;
};

// Read the epoch for this call and the peers' segments. False when a timeout was already
// recorded (the communicator is broken: do nothing).
__device__ __forceinline__ bool ar_begin(const sl_ar_args_t &a, ar_block_t &s) {
  if (threadIdx.x < SL_AR_MAX_RANKS) s.seg[threadIdx.x] = threadIdx.x < (unsigned)a.nranks ? a.seg[threadIdx.x] : 0;
  if (threadIdx.x == 0) {
    const sl_ar_ctl_t *ctl = (const sl_ar_ctl_t *)a.seg[a.rank];
    s.epoch = *(volatile const unsigned long long *)&ctl->epoch + 1ull;
    // The claim word (this rank's device memory), not the host-mapped record: one PCIe read
    // per block cost about a microsecond each, served one after another across blocks.
    s.fail = sl_flag_timeout_claimed(&ctl->timeout_claim);
  }
  __syncthreads();
  return !s.fail;
}

__device__ __forceinline__ char *ar_data(const ar_block_t &s, const sl_ar_args_t &a, int r) {
  return s.seg[r] + sl_ar_data_offset(s.epoch, a.max_bytes);
}

// Signal (phase, this block) to every peer, then wait for every peer's signal. Data stores
// of the whole block precede the barrier, the barrier precedes thread t's release store
// (st.release.sys: a release pattern by itself, so the block's stores are in causality order
// before it; a separate fence.acq_rel.sys before it would only add a second MEMBAR.SYS) to
// peer t; thread t's acquire of peer t's flag precedes the barrier that precedes every
// thread's data loads. Returns false on timeout (recorded by the waiter).
__device__ __forceinline__ bool ar_exchange(const sl_ar_args_t &a, ar_block_t &s, int phase) {
  __syncthreads();
  const int t = threadIdx.x;
  if (t < a.nranks && t != a.rank) {
    sl_flag_t *peer_flags = (sl_flag_t *)(s.seg[t] + SL_AR_FLAGS_OFFSET);
    sl_st_release_sys(peer_flags + sl_ar_flag_index(s.epoch, phase, blockIdx.x, a.rank), s.epoch);
    const unsigned idx = sl_ar_flag_index(s.epoch, phase, blockIdx.x, t);
    const sl_flag_t *mine = (const sl_flag_t *)(s.seg[a.rank] + SL_AR_FLAGS_OFFSET) + idx;
    sl_ar_ctl_t *ctl = (sl_ar_ctl_t *)s.seg[a.rank];
    if (!sl_flag_wait_eq_dev(mine, s.epoch, a.timeout_ns, a.timeout, &ctl->timeout_claim, a.rank, t, idx)) s.fail = 1;
  }
  __syncthreads();
  return !s.fail;
}

// The last block to finish publishes the epoch for the next launch on this stream (all
// blocks have read it by then: each counted itself in blocks_done after reading it).
__device__ __forceinline__ void ar_end(const sl_ar_args_t &a, const ar_block_t &s) {
  __syncthreads();
  if (threadIdx.x == 0) {
    sl_ar_ctl_t *ctl = (sl_ar_ctl_t *)s.seg[a.rank];
    // One block (small messages): nobody else reads the epoch during this kernel, and the
    // kernel's end orders the store before the next launch on the stream: no fence, no atomic.
    if (gridDim.x == 1u) {
      ctl->epoch = s.epoch;
      return;
    }
    __threadfence();
    if (atomicAdd(&ctl->blocks_done, 1u) == gridDim.x - 1u) {
      ctl->blocks_done = 0u;
      ctl->epoch = s.epoch;
      __threadfence();
    }
  }
}

// Independent 16-byte loads each thread keeps in flight per source before it uses them: a
// peer load over NVLink takes ~1-2 us, so one load per thread per round trip (the first
// version) left the link mostly idle; AR_UNROLL x 512 threads x 16 B = 32 KiB per block.
#ifndef AR_UNROLL
#define AR_UNROLL 4
#endif

// dst[i] = src[i] for i in [b, e): AR_UNROLL vectors loaded, then stored (the loads cannot
// move past the stores on their own: dst and src may alias as far as the compiler knows),
// then single elements for the tail.
__device__ __forceinline__ void copy_range(char *dst, const char *src, unsigned long long b, unsigned long long e) {
  const unsigned long long ve = b + (e - b) / AR_VEC * AR_VEC;
  const unsigned long long stride = (unsigned long long)AR_THREADS * AR_VEC;
  for (unsigned long long i0 = b + threadIdx.x * (unsigned long long)AR_VEC; i0 < ve; i0 += stride * AR_UNROLL) {
    pack_t x[AR_UNROLL];
#pragma unroll
    for (int u = 0; u < AR_UNROLL; u++)
      if (i0 + u * stride < ve) x[u] = ld_vec_cg(src + (i0 + u * stride) * ES);
#pragma unroll
    for (int u = 0; u < AR_UNROLL; u++)
      if (i0 + u * stride < ve) st_vec(dst + (i0 + u * stride) * ES, x[u]);
  }
  for (unsigned long long i = ve + threadIdx.x; i < e; i += AR_THREADS)
    st_elem(dst + i * ES, ld_elem_cg(src + i * ES));
}

#endif
