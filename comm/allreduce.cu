// All-reduce kernels over symmetric memory (NVLink peer pointers): one-shot, two-shot, and the
// fused decode step (all-reduce + residual add + RMSNorm). Protocol: comm/allreduce_layout.h.
#include "comm/allreduce_proto.cuh"

// dst[i] = sum over ranks 0..n-1, in that order, of data_r[i] (fp32, rounded once).
// Each thread takes AR_UNROLL vectors at a time and keeps 2 x AR_UNROLL independent 16-byte
// loads in flight: rank r+1's vectors are requested before rank r's are added, so the NVLink
// round trip is paid about once per group, not once per (vector, rank). The sum order per
// element is unchanged (acc = x_0, then += x_1, ..., x_{n-1}): same bits as sl_allreduce_ref.
__device__ __forceinline__ void reduce_range(const sl_ar_args_t &a, const ar_block_t &s, char *dst,
                                             unsigned long long b, unsigned long long e) {
  const unsigned long long ve = b + (e - b) / AR_VEC * AR_VEC;
  const unsigned long long stride = (unsigned long long)AR_THREADS * AR_VEC;
  for (unsigned long long i0 = b + threadIdx.x * (unsigned long long)AR_VEC; i0 < ve; i0 += stride * AR_UNROLL) {
    pack_t cur[AR_UNROLL], nxt[AR_UNROLL];
    float acc[AR_UNROLL][AR_VEC];
    const char *src0 = ar_data(s, a, 0);
#pragma unroll
    for (int u = 0; u < AR_UNROLL; u++) {
      cur[u].raw = raw_vec_t();
      nxt[u].raw = raw_vec_t();
      if (i0 + u * stride < ve) cur[u] = ld_vec_cg(src0 + (i0 + u * stride) * ES);
    }
    for (int r = 0; r < a.nranks; r++) {
      if (r + 1 < a.nranks) {
        const char *src = ar_data(s, a, r + 1);
#pragma unroll
        for (int u = 0; u < AR_UNROLL; u++)
          if (i0 + u * stride < ve) nxt[u] = ld_vec_cg(src + (i0 + u * stride) * ES);
      }
#pragma unroll
      for (int u = 0; u < AR_UNROLL; u++) {
#pragma unroll
        for (int k = 0; k < AR_VEC; k++) {
          const float v = elem_to_f32(cur[u].e[k]);
          acc[u][k] = r == 0 ? v : acc[u][k] + v;
        }
        cur[u] = nxt[u];
      }
    }
#pragma unroll
    for (int u = 0; u < AR_UNROLL; u++) {
      if (i0 + u * stride >= ve) continue;
      pack_t x;
#pragma unroll
      for (int k = 0; k < AR_VEC; k++)
        x.e[k] = f32_to_elem(acc[u][k]);
      st_vec(dst + (i0 + u * stride) * ES, x);
    }
  }
  for (unsigned long long i = ve + threadIdx.x; i < e; i += AR_THREADS) {
    float acc = elem_to_f32(ld_elem_cg(ar_data(s, a, 0) + i * ES));
    for (int r = 1; r < a.nranks; r++)
      acc += elem_to_f32(ld_elem_cg(ar_data(s, a, r) + i * ES));
    st_elem(dst + i * ES, f32_to_elem(acc));
  }
}

// ---- one-shot LL ("push", small messages): no staging copy, no flag round ---------------------
// Thread t of the grid owns 16-byte chunk c (LL_ELEMS elements; zero padded past count): it
// writes the chunk as two LL lines into every peer's LL area for (parity, this rank) -- stores
// over NVLink are posted, so the sender does not wait -- then waits for each peer's lines of
// chunk c in its own memory and sums in rank order (its own value straight from the input).
// Blocks never wait for each other, so any grid works. Layout: comm/allreduce_layout.h.
#define LL_ELEMS (16 / AR_ELEM_BYTES)
union ll_chunk_t {
  uint4 raw;
  unsigned int w[4];
  elem_bits_t e[LL_ELEMS];
};

__device__ __forceinline__ void ll_store_line(char *p, unsigned int d0, unsigned int d1, unsigned int flag) {
  const unsigned long long w0 = (unsigned long long)d0 | ((unsigned long long)flag << 32);
  const unsigned long long w1 = (unsigned long long)d1 | ((unsigned long long)flag << 32);
  asm volatile("st.relaxed.sys.global.v2.b64 [%0], {%1, %2};" ::"l"(p), "l"(w0), "l"(w1) : "memory");
}
__device__ __forceinline__ void ll_load_line(const char *p, unsigned long long &w0, unsigned long long &w1) {
  asm volatile("ld.relaxed.sys.global.v2.b64 {%0, %1}, [%2];" : "=l"(w0), "=l"(w1) : "l"(p) : "memory");
}

// Wait (bounded) until both lines of a chunk carry `flag` in all four words; fill x.
__device__ __forceinline__ bool ll_wait_chunk(const sl_ar_args_t &a, const ar_block_t &s, const char *p, int peer,
                                              ll_chunk_t &x) {
  const unsigned int flag = (unsigned int)s.epoch;
  unsigned long long w0, w1, w2, w3;
  unsigned int *claim = &((sl_ar_ctl_t *)s.seg[a.rank])->timeout_claim;
  unsigned long long start = 0;
  for (unsigned spins = 0;; spins++) {
    ll_load_line(p, w0, w1);
    ll_load_line(p + 16, w2, w3);
    if ((unsigned int)(w0 >> 32) == flag && (unsigned int)(w1 >> 32) == flag && (unsigned int)(w2 >> 32) == flag &&
        (unsigned int)(w3 >> 32) == flag)
      break;
    if (spins == 0) start = sl_globaltimer_ns();
    if ((spins & 63u) == 63u) {
      if (sl_flag_timeout_claimed(claim)) return false;
      const unsigned long long now = sl_globaltimer_ns();
      if (now - start >= a.timeout_ns) {
        // No flag slot: the record names phase 0 and this block; `observed` is the flag half
        // (low 32 bits of an epoch) of the first word that did not match.
        const unsigned long long seen = (unsigned int)(w0 >> 32) != flag   ? (w0 >> 32)
                                        : (unsigned int)(w1 >> 32) != flag ? (w1 >> 32)
                                        : (unsigned int)(w2 >> 32) != flag ? (w2 >> 32)
                                                                            : (w3 >> 32);
        sl_flag_timeout_record_dev(a.timeout, claim, a.rank, peer,
                                   sl_ar_flag_index(s.epoch, 0, (int)(blockIdx.x % SL_AR_MAX_BLOCKS), peer), s.epoch,
                                   seen, now - start);
        return false;
      }
    }
  }
  x.w[0] = (unsigned int)w0;
  x.w[1] = (unsigned int)w1;
  x.w[2] = (unsigned int)w2;
  x.w[3] = (unsigned int)w3;
  return true;
}

// This rank's chunk c of the input (zero past count).
__device__ __forceinline__ ll_chunk_t ll_load_input(const sl_ar_args_t &a, unsigned long long c) {
  const char *in = (const char *)a.in;
  const unsigned long long i0 = c * LL_ELEMS;
  ll_chunk_t x;
#if AR_VEC != 1
  if (i0 + LL_ELEMS <= a.count) {
    x.raw = *(const uint4 *)(in + i0 * ES);
    return x;
  }
#endif
#pragma unroll
  for (int k = 0; k < LL_ELEMS; k++)
    x.e[k] = i0 + k < a.count ? *(const elem_bits_t *)(in + (i0 + k) * ES) : (elem_bits_t)0;
  return x;
}

extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_ar_oneshot_ll(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  const unsigned long long chunks = (a.count + LL_ELEMS - 1) / LL_ELEMS;
  const unsigned long long c0 = (unsigned long long)blockIdx.x * AR_THREADS + threadIdx.x;
  // The first chunk's load overlaps ar_begin's epoch read (the input is this rank's own).
  ll_chunk_t first;
  first.raw = make_uint4(0u, 0u, 0u, 0u);
  if (c0 < chunks) first = ll_load_input(a, c0);
  if (!ar_begin(a, s)) return;
  const unsigned int flag = (unsigned int)s.epoch;
  const unsigned long long my_lines = sl_ar_ll_offset(s.epoch, a.rank, a.max_bytes);
  char *out = (char *)a.out;
  bool bad = false;
  for (unsigned long long c = c0; c < chunks && !bad; c += (unsigned long long)gridDim.x * AR_THREADS) {
    const unsigned long long i0 = c * LL_ELEMS;
    const ll_chunk_t mine = c == c0 ? first : ll_load_input(a, c);
    // Push: next rank first, so the ranks do not all write to rank 0 at once.
    for (int j = 1; j < a.nranks; j++) {
      const int p = (a.rank + j) % a.nranks;
      char *dst = s.seg[p] + my_lines + c * 32ull;
      ll_store_line(dst, mine.w[0], mine.w[1], flag);
      ll_store_line(dst + 16, mine.w[2], mine.w[3], flag);
    }
    float acc[LL_ELEMS];
    for (int r = 0; r < a.nranks; r++) {
      ll_chunk_t x;
      if (r == a.rank) {
        x = mine;
      } else if (!ll_wait_chunk(a, s, s.seg[a.rank] + sl_ar_ll_offset(s.epoch, r, a.max_bytes) + c * 32ull, r, x)) {
        bad = true;
        break;
      }
#pragma unroll
      for (int k = 0; k < LL_ELEMS; k++) {
        const float v = elem_to_f32(x.e[k]);
        acc[k] = r == 0 ? v : acc[k] + v;
      }
    }
    if (bad) break;
    ll_chunk_t o;
#pragma unroll
    for (int k = 0; k < LL_ELEMS; k++)
      o.e[k] = f32_to_elem(acc[k]);
#if AR_VEC != 1
    if (i0 + LL_ELEMS <= a.count) {
      *(uint4 *)(out + i0 * ES) = o.raw;
      continue;
    }
#endif
#pragma unroll
    for (int k = 0; k < LL_ELEMS; k++)
      if (i0 + k < a.count) *(elem_bits_t *)(out + (i0 + k) * ES) = o.e[k];
  }
  // A waiter that gave up leaves the epoch alone (the communicator is broken).
  if (__syncthreads_or(bad)) return;
  ar_end(a, s);
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

#if AR_VEC * AR_ELEM_BYTES != 16
#error "the fused kernel moves whole 16-byte vectors (AR_VEC = 16 / element size)"
#endif

// With a.ll the block's rows travel as LL lines (vector i = LL chunk i / LL_ELEMS): every
// thread first pushes all its chunks to every peer, then sums each chunk in rank order as it
// arrives; no staging copy, no flag round. A waiter that gives up marks the block bad, keeps
// going through the barriers with zeros, and the block leaves the epoch alone.
extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_ar_residual_rmsnorm(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  __shared__ float warp_sums[ARN_WARPS];
  if (!ar_begin(a, s)) return;
  unsigned long long rb, re;
  sl_ar_part((unsigned long long)a.rows, 1, gridDim.x, blockIdx.x, &rb, &re);
  const bool ll = a.ll != 0;
  bool bad = false;
  if (ll) {
    const unsigned int flag = (unsigned int)s.epoch;
    const unsigned long long my_lines = sl_ar_ll_offset(s.epoch, a.rank, a.max_bytes);
    for (unsigned long long row = rb; row < re; row++)
      for (int j = threadIdx.x * AR_VEC; j < ARN_HIDDEN; j += AR_THREADS * AR_VEC) {
        const unsigned long long i = row * ARN_HIDDEN + j;
        ll_chunk_t mine;
        mine.raw = *(const uint4 *)((const char *)a.in + i * ES);
        for (int q = 1; q < a.nranks; q++) {
          char *dst = s.seg[(a.rank + q) % a.nranks] + my_lines + (i / LL_ELEMS) * 32ull;
          ll_store_line(dst, mine.w[0], mine.w[1], flag);
          ll_store_line(dst + 16, mine.w[2], mine.w[3], flag);
        }
      }
  } else {
    copy_range(ar_data(s, a, a.rank), (const char *)a.in, rb * ARN_HIDDEN, re * ARN_HIDDEN);
    if (!ar_exchange(a, s, 0)) return;
  }
  char *residual = (char *)a.residual;
  const char *weight = (const char *)a.weight;
  for (unsigned long long row = rb; row < re; row++) {
    float ss = 0.0f;
    for (int j = threadIdx.x * AR_VEC; j < ARN_HIDDEN; j += AR_THREADS * AR_VEC) {
      const unsigned long long i = row * ARN_HIDDEN + j;
      float acc[AR_VEC];
      if (ll) {
        for (int r = 0; r < a.nranks; r++) {
          ll_chunk_t x;
          if (r == a.rank) {
            x.raw = *(const uint4 *)((const char *)a.in + i * ES);
          } else if (bad || !ll_wait_chunk(a, s, s.seg[a.rank] + sl_ar_ll_offset(s.epoch, r, a.max_bytes) +
                                                      (i / LL_ELEMS) * 32ull, r, x)) {
            bad = true;
            x.raw = make_uint4(0u, 0u, 0u, 0u);
          }
#pragma unroll
          for (int k = 0; k < AR_VEC; k++) {
            const float v = elem_to_f32(x.e[k]);
            acc[k] = r == 0 ? v : acc[k] + v;
          }
        }
      } else {
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
  if (__syncthreads_or(bad)) return;
  ar_end(a, s);
}
#endif
