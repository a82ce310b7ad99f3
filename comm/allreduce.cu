// All-reduce kernels over symmetric memory (NVLink peer pointers): one-shot, two-shot, and the
// fused decode step (all-reduce + residual add + RMSNorm). Protocol: comm/allreduce_layout.h.
#include "comm/allreduce_proto.cuh"

// dst[i] = sum over ranks 0..n-1, in that order, of data_r[i] (fp32, rounded once).
__device__ __forceinline__ void reduce_range(const sl_ar_args_t &a, const ar_block_t &s, char *dst,
                                             unsigned long long b, unsigned long long e) {
  const unsigned long long ve = b + (e - b) / AR_VEC * AR_VEC;
  for (unsigned long long i = b + threadIdx.x * (unsigned long long)AR_VEC; i < ve; i += AR_THREADS * AR_VEC) {
    float acc[AR_VEC];
    pack_t x = ld_vec_cg(ar_data(s, a, 0) + i * ES);
#pragma unroll
    for (int k = 0; k < AR_VEC; k++)
      acc[k] = elem_to_f32(x.e[k]);
    for (int r = 1; r < a.nranks; r++) {
      x = ld_vec_cg(ar_data(s, a, r) + i * ES);
#pragma unroll
      for (int k = 0; k < AR_VEC; k++)
        acc[k] += elem_to_f32(x.e[k]);
    }
#pragma unroll
    for (int k = 0; k < AR_VEC; k++)
      x.e[k] = f32_to_elem(acc[k]);
    st_vec(dst + i * ES, x);
  }
  for (unsigned long long i = ve + threadIdx.x; i < e; i += AR_THREADS) {
    float acc = elem_to_f32(ld_elem_cg(ar_data(s, a, 0) + i * ES));
    for (int r = 1; r < a.nranks; r++)
      acc += elem_to_f32(ld_elem_cg(ar_data(s, a, r) + i * ES));
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
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < ARN_WARPS; w++)
    total += warp_sums[w];
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
      for (int k = 0; k < AR_VEC; k++)
        acc[k] = elem_to_f32(x.e[k]);
      for (int r = 1; r < a.nranks; r++) {
        x = ld_vec_cg(ar_data(s, a, r) + i * ES);
#pragma unroll
        for (int k = 0; k < AR_VEC; k++)
          acc[k] += elem_to_f32(x.e[k]);
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
