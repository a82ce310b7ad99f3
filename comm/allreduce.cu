// All-reduce kernels over symmetric memory (NVLink peer pointers): one-shot, two-shot, and the
// fused decode step (all-reduce + residual add + RMSNorm). Protocol: comm/allreduce_layout.h.
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
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) { return __uint_as_float(u); }
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) { return __float_as_uint(f); }
#elif AR_DTYPE == 1
#define AR_ELEM_BYTES 2
typedef unsigned short elem_bits_t;
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) { return __bfloat162float(__ushort_as_bfloat16(u)); }
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
#elif AR_DTYPE == 2
#define AR_ELEM_BYTES 2
typedef unsigned short elem_bits_t;
__device__ __forceinline__ float elem_to_f32(elem_bits_t u) { return __half2float(__ushort_as_half(u)); }
__device__ __forceinline__ elem_bits_t f32_to_elem(float f) { return __half_as_ushort(__float2half_rn(f)); }
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
__device__ __forceinline__ void st_vec(char *p, pack_t x) { *(raw_vec_t *)p = x.raw; }
__device__ __forceinline__ elem_bits_t ld_elem_cg(const char *p) { return __ldcg((const elem_bits_t *)p); }
__device__ __forceinline__ void st_elem(char *p, elem_bits_t v) { *(elem_bits_t *)p = v; }

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
    s.fail = *(volatile const unsigned int *)&a.timeout->timed_out != 0u;
  }
  __syncthreads();
  return !s.fail;
}

__device__ __forceinline__ char *ar_data(const ar_block_t &s, const sl_ar_args_t &a, int r) {
  return s.seg[r] + sl_ar_data_offset(s.epoch, a.max_bytes);
}

// Signal (phase, this block) to every peer, then wait for every peer's signal. Data stores
// of the whole block precede the barrier, the barrier precedes thread t's fence + release
// store to peer t; thread t's acquire of peer t's flag precedes the barrier that precedes
// every thread's data loads. Returns false on timeout (recorded by the waiter).
__device__ __forceinline__ bool ar_exchange(const sl_ar_args_t &a, ar_block_t &s, int phase) {
  __syncthreads();
  const int t = threadIdx.x;
  if (t < a.nranks && t != a.rank) {
    sl_flag_t *peer_flags = (sl_flag_t *)(s.seg[t] + SL_AR_FLAGS_OFFSET);
    sl_fence_acq_rel_sys();
    sl_st_release_sys(peer_flags + sl_ar_flag_index(s.epoch, phase, blockIdx.x, a.rank), s.epoch);
    const unsigned idx = sl_ar_flag_index(s.epoch, phase, blockIdx.x, t);
    const sl_flag_t *mine = (const sl_flag_t *)(s.seg[a.rank] + SL_AR_FLAGS_OFFSET) + idx;
    sl_ar_ctl_t *ctl = (sl_ar_ctl_t *)s.seg[a.rank];
    if (!sl_flag_wait_eq_dev(mine, s.epoch, a.timeout_ns, a.timeout, &ctl->timeout_claim, a.rank, t, idx))
      s.fail = 1;
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
    __threadfence();
    if (atomicAdd(&ctl->blocks_done, 1u) == gridDim.x - 1u) {
      ctl->blocks_done = 0u;
      ctl->epoch = s.epoch;
      __threadfence();
    }
  }
}

// dst[i] = src[i] for i in [b, e): vectors while whole, then single elements.
__device__ __forceinline__ void copy_range(char *dst, const char *src, unsigned long long b, unsigned long long e) {
  const unsigned long long ve = b + (e - b) / AR_VEC * AR_VEC;
  for (unsigned long long i = b + threadIdx.x * (unsigned long long)AR_VEC; i < ve; i += AR_THREADS * AR_VEC)
    st_vec(dst + i * ES, ld_vec_cg(src + i * ES));
  for (unsigned long long i = ve + threadIdx.x; i < e; i += AR_THREADS) st_elem(dst + i * ES, ld_elem_cg(src + i * ES));
}

// dst[i] = sum over ranks 0..n-1, in that order, of data_r[i] (fp32, rounded once).
__device__ __forceinline__ void reduce_range(const sl_ar_args_t &a, const ar_block_t &s, char *dst,
                                             unsigned long long b, unsigned long long e) {
  const unsigned long long ve = b + (e - b) / AR_VEC * AR_VEC;
  for (unsigned long long i = b + threadIdx.x * (unsigned long long)AR_VEC; i < ve; i += AR_THREADS * AR_VEC) {
    float acc[AR_VEC];
    pack_t x = ld_vec_cg(ar_data(s, a, 0) + i * ES);
#pragma unroll
    for (int k = 0; k < AR_VEC; k++) acc[k] = elem_to_f32(x.e[k]);
    for (int r = 1; r < a.nranks; r++) {
      x = ld_vec_cg(ar_data(s, a, r) + i * ES);
#pragma unroll
      for (int k = 0; k < AR_VEC; k++) acc[k] += elem_to_f32(x.e[k]);
    }
#pragma unroll
    for (int k = 0; k < AR_VEC; k++) x.e[k] = f32_to_elem(acc[k]);
    st_vec(dst + i * ES, x);
  }
  for (unsigned long long i = ve + threadIdx.x; i < e; i += AR_THREADS) {
    float acc = elem_to_f32(ld_elem_cg(ar_data(s, a, 0) + i * ES));
    for (int r = 1; r < a.nranks; r++) acc += elem_to_f32(ld_elem_cg(ar_data(s, a, r) + i * ES));
    st_elem(dst + i * ES, f32_to_elem(acc));
  }
}

// ---- one-shot: copy in, one exchange, every rank reduces everything ---------------------------------
extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_ar_oneshot(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  if (!ar_begin(a, s)) return;
  unsigned long long b, e;
  sl_ar_part(a.count, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
  copy_range(ar_data(s, a, a.rank), (const char *)a.in, b, e);
  if (!ar_exchange(a, s, 0)) return;
  reduce_range(a, s, (char *)a.out, b, e);
  ar_end(a, s);
}

// ---- two-shot: reduce-scatter (rank R reduces chunk R in place), exchange, all-gather ------------
extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_ar_twoshot(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  if (!ar_begin(a, s)) return;
  unsigned long long cb, ce, b, e;
  // Block b owns sub-range b of every chunk: it stages those, and only those are read
  // by the peers' block b.
  for (int c = 0; c < a.nranks; c++) {
    sl_ar_part(a.count, AR_VEC, a.nranks, c, &cb, &ce);
    sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
    copy_range(ar_data(s, a, a.rank), (const char *)a.in, cb + b, cb + e);
  }
  if (!ar_exchange(a, s, 0)) return;
  sl_ar_part(a.count, AR_VEC, a.nranks, a.rank, &cb, &ce);
  sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
  reduce_range(a, s, ar_data(s, a, a.rank), cb + b, cb + e);
  if (!ar_exchange(a, s, 1)) return;
  for (int c = 0; c < a.nranks; c++) {
    sl_ar_part(a.count, AR_VEC, a.nranks, c, &cb, &ce);
    sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
    copy_range((char *)a.out, ar_data(s, a, c), cb + b, cb + e);
  }
  ar_end(a, s);
}

// ---- fused decode: residual += allreduce(x); out = rmsnorm(residual) * (bias + w) ---------------
#ifdef ARN_HIDDEN
#ifndef ARN_EPS
#error "ARN_EPS (RMSNorm epsilon, a float constant) must be defined by the JIT"
#endif
#ifndef ARN_WEIGHT_BIAS
#error "ARN_WEIGHT_BIAS (added to the weight: 0 or 1) must be defined by the JIT"
#endif
#if ARN_HIDDEN % AR_VEC != 0
#error "ARN_HIDDEN must be a multiple of AR_VEC"
#endif
#define ARN_WARPS (AR_THREADS / 32)

// Sum over the block in a fixed tree (same result on every rank for the same inputs).
__device__ __forceinline__ float block_sum(float v, float *warp_sums) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < ARN_WARPS; w++) total += warp_sums[w];
  __syncthreads(); // warp_sums reused by the next row
  return total;
}

extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_ar_residual_rmsnorm(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  __shared__ float warp_sums[ARN_WARPS];
  if (!ar_begin(a, s)) return;
  unsigned long long rb, re;
  sl_ar_part((unsigned long long)a.rows, 1, gridDim.x, blockIdx.x, &rb, &re);
  copy_range(ar_data(s, a, a.rank), (const char *)a.in, rb * ARN_HIDDEN, re * ARN_HIDDEN);
  if (!ar_exchange(a, s, 0)) return;
  char *residual = (char *)a.residual;
  const char *weight = (const char *)a.weight;
  for (unsigned long long row = rb; row < re; row++) {
    float ss = 0.0f;
    for (int j = threadIdx.x * AR_VEC; j < ARN_HIDDEN; j += AR_THREADS * AR_VEC) {
      const unsigned long long i = row * ARN_HIDDEN + j;
      float acc[AR_VEC];
      pack_t x = ld_vec_cg(ar_data(s, a, 0) + i * ES);
#pragma unroll
      for (int k = 0; k < AR_VEC; k++) acc[k] = elem_to_f32(x.e[k]);
      for (int r = 1; r < a.nranks; r++) {
        x = ld_vec_cg(ar_data(s, a, r) + i * ES);
#pragma unroll
        for (int k = 0; k < AR_VEC; k++) acc[k] += elem_to_f32(x.e[k]);
      }
      pack_t res = ld_vec_cg(residual + i * ES);
#pragma unroll
      for (int k = 0; k < AR_VEC; k++) {
        res.e[k] = f32_to_elem(acc[k] + elem_to_f32(res.e[k]));
        const float v = elem_to_f32(res.e[k]); // normalise the rounded value, as stored
        ss += v * v;
      }
      st_vec(residual + i * ES, res);
    }
    const float inv = 1.0f / sqrtf(block_sum(ss, warp_sums) / (float)ARN_HIDDEN + ARN_EPS);
    // Same element-to-thread map as above: each thread re-reads its own residual stores.
    for (int j = threadIdx.x * AR_VEC; j < ARN_HIDDEN; j += AR_THREADS * AR_VEC) {
      const unsigned long long i = row * ARN_HIDDEN + j;
      pack_t v = *(const pack_t *)(residual + i * ES);
      pack_t w = *(const pack_t *)(weight + (unsigned long long)j * ES);
      pack_t o;
#pragma unroll
      for (int k = 0; k < AR_VEC; k++)
        o.e[k] = f32_to_elem((elem_to_f32(v.e[k]) * inv) * (ARN_WEIGHT_BIAS + elem_to_f32(w.e[k])));
      st_vec((char *)a.out + i * ES, o);
    }
  }
  ar_end(a, s);
}
#endif
