// Shared device helpers: 16-byte packed loads/stores of bf16/fp16/fp32 as fp32, butterfly reductions.
//
// Every kernel of the norm family moves memory in 16-byte packets per thread (8 bf16/fp16 or 4
// fp32): that is the widest single global access on Hopper (LDG.128/STG.128), and it lets a warp
// cover 512 contiguous bytes per instruction, i.e. four full 128-byte lines. Conversions to and
// from fp32 are here once, so every kernel rounds the same way as the CPU reference
// (kernels/sl_dtype.h): round to nearest even, subnormals kept.
#ifndef SL_VEC_CUH
#define SL_VEC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/sl_dtype.h"

#define SL_WARP_SIZE 32
#define SL_VEC_BYTES 16

// Bytes of one element of a float-like dtype code (SL_DTYPE_F32/BF16/F16), at compile time.
template <int DT> struct sl_elem {
  static_assert(DT == SL_DTYPE_F32 || DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16,
                "vec.cuh handles f32, bf16 and f16 only");
  static constexpr int bytes = DT == SL_DTYPE_F32 ? 4 : 2;
  static constexpr int per16 = SL_VEC_BYTES / bytes; // elements in one 16-byte packet
};

// ---- one packet <-> fp32 ----------------------------------------------------------------
// Unpack 16 (or 8) raw bytes holding elements of DT into fp32.
template <int DT> __device__ __forceinline__ void sl_unpack_u32(const unsigned int *w, int nwords, float *f) {
#pragma unroll
  for (int i = 0; i < nwords; i++) {
    if constexpr (DT == SL_DTYPE_F32) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (DT == SL_DTYPE_BF16) {
      __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162 *>(&w[i]);
      float2 x = __bfloat1622float2(h);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    } else {
      __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
      float2 x = __half22float2(h);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
}
template <int DT> __device__ __forceinline__ void sl_pack_u32(const float *f, int nwords, unsigned int *w) {
#pragma unroll
  for (int i = 0; i < nwords; i++) {
    if constexpr (DT == SL_DTYPE_F32) {
      w[i] = __float_as_uint(f[i]);
    } else if constexpr (DT == SL_DTYPE_BF16) {
      __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
      w[i] = *reinterpret_cast<unsigned int *>(&h);
    } else {
      __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      w[i] = *reinterpret_cast<unsigned int *>(&h);
    }
  }
}

// Round an fp32 value to DT and back (the value a store of DT would keep).
template <int DT> __device__ __forceinline__ float sl_round_to(float x) {
  if constexpr (DT == SL_DTYPE_F32)
    return x;
  else if constexpr (DT == SL_DTYPE_BF16)
    return __bfloat162float(__float2bfloat16_rn(x));
  else
    return __half2float(__float2half_rn(x));
}

// ---- N contiguous elements <-> fp32 registers ---------------------------------------------
// Load N elements of DT at p into f, as 16-byte packets (an 8-byte tail when N*bytes is 8).
// p must be aligned to min(16, N*bytes).
template <int DT, int N> __device__ __forceinline__ void sl_load_vec(const void *__restrict__ p, float (&f)[N]) {
  constexpr int bytes = N * sl_elem<DT>::bytes;
  static_assert(bytes % 16 == 0 || bytes == 8, "sl_load_vec: N elements must fill 16-byte packets or 8 bytes");
  if constexpr (bytes == 8) {
    uint2 v = *reinterpret_cast<const uint2 *>(p);
    unsigned int w[2] = {v.x, v.y};
    sl_unpack_u32<DT>(w, 2, f);
  } else {
#pragma unroll
    for (int i = 0; i < bytes / 16; i++) {
      uint4 v = reinterpret_cast<const uint4 *>(p)[i];
      unsigned int w[4] = {v.x, v.y, v.z, v.w};
      sl_unpack_u32<DT>(w, 4, f + i * sl_elem<DT>::per16);
    }
  }
}

// Store N fp32 values to DT at p (rounded to nearest even), as 16-byte packets.
template <int DT, int N> __device__ __forceinline__ void sl_store_vec(void *__restrict__ p, const float (&f)[N]) {
  constexpr int bytes = N * sl_elem<DT>::bytes;
  static_assert(bytes % 16 == 0 || bytes == 8, "sl_store_vec: N elements must fill 16-byte packets or 8 bytes");
  if constexpr (bytes == 8) {
    unsigned int w[2];
    sl_pack_u32<DT>(f, 2, w);
    *reinterpret_cast<uint2 *>(p) = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (int i = 0; i < bytes / 16; i++) {
      unsigned int w[4];
      sl_pack_u32<DT>(f + i * sl_elem<DT>::per16, 4, w);
      reinterpret_cast<uint4 *>(p)[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// ---- N contiguous elements kept raw (packed) in registers ------------------------------------
// A row held as its packed words costs half the registers of fp32 values for 16-bit dtypes, so a
// warp can keep the next row's loads in flight while it works on the current one. sl_raw_to_f32
// gives exactly the values sl_load_vec would (same unpacking); a zeroed sl_raw reads as +0.0.
template <int DT, int N> struct sl_raw {
  static constexpr int bytes = N * sl_elem<DT>::bytes;
  static_assert(bytes % 16 == 0 || bytes == 8, "sl_raw: N elements must fill 16-byte packets or 8 bytes");
  static constexpr int words = bytes / 4;
  unsigned int w[words];
};
template <int DT, int N> __device__ __forceinline__ void sl_raw_zero(sl_raw<DT, N> &r) {
#pragma unroll
  for (int i = 0; i < sl_raw<DT, N>::words; i++)
    r.w[i] = 0u;
}
// Load N elements of DT at p (aligned to min(16, N*bytes)) without converting them.
template <int DT, int N> __device__ __forceinline__ void sl_raw_load(const void *__restrict__ p, sl_raw<DT, N> &r) {
  if constexpr (sl_raw<DT, N>::bytes == 8) {
    uint2 v = *reinterpret_cast<const uint2 *>(p);
    r.w[0] = v.x;
    r.w[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < sl_raw<DT, N>::bytes / 16; i++) {
      uint4 v = reinterpret_cast<const uint4 *>(p)[i];
      r.w[4 * i] = v.x;
      r.w[4 * i + 1] = v.y;
      r.w[4 * i + 2] = v.z;
      r.w[4 * i + 3] = v.w;
    }
  }
}
template <int DT, int N> __device__ __forceinline__ void sl_raw_to_f32(const sl_raw<DT, N> &r, float (&f)[N]) {
  sl_unpack_u32<DT>(r.w, sl_raw<DT, N>::words, f);
}
// Round N fp32 values to DT (nearest even) into packed words: what sl_store_vec would store.
template <int DT, int N> __device__ __forceinline__ void sl_raw_from_f32(const float (&f)[N], sl_raw<DT, N> &r) {
  sl_pack_u32<DT>(f, sl_raw<DT, N>::words, r.w);
}
// a + b element-wise on packed 16-bit words (bf16 or f16, two per word), one RN rounding per element. Bit for bit
// what widening both to fp32, adding and rounding back gives: fp32 holds the exact sum of two bf16 or f16 values
// unless their exponents are so far apart that the smaller is below half an ulp of the result, where both give
// the larger one (double rounding through a format of >= 2p + 2 bits is innocuous: p = 8 / 11 here, 24 in fp32),
// and fp32 overflows only where the 16-bit rounding gives Inf too. Subnormals kept (no .ftz). bf16x2: sm_90+.
template <int DT, int N> __device__ __forceinline__ void sl_raw_add(const sl_raw<DT, N> &a, sl_raw<DT, N> &b) {
  static_assert(DT == SL_DTYPE_BF16 || DT == SL_DTYPE_F16, "sl_raw_add: bf16 or f16");
#pragma unroll
  for (int i = 0; i < sl_raw<DT, N>::words; i++) {
    if constexpr (DT == SL_DTYPE_BF16)
      asm("add.rn.bf16x2 %0, %1, %0;" : "+r"(b.w[i]) : "r"(a.w[i]));
    else
      asm("add.rn.f16x2 %0, %1, %0;" : "+r"(b.w[i]) : "r"(a.w[i]));
  }
}
template <int DT, int N> __device__ __forceinline__ void sl_raw_store(void *__restrict__ p, const sl_raw<DT, N> &r) {
  if constexpr (sl_raw<DT, N>::bytes == 8) {
    *reinterpret_cast<uint2 *>(p) = make_uint2(r.w[0], r.w[1]);
  } else {
#pragma unroll
    for (int i = 0; i < sl_raw<DT, N>::bytes / 16; i++)
      reinterpret_cast<uint4 *>(p)[i] = make_uint4(r.w[4 * i], r.w[4 * i + 1], r.w[4 * i + 2], r.w[4 * i + 3]);
  }
}

// Barrier over `threads` threads (a multiple of 32) of the block on hardware barrier `id` (1..15;
// 0 is __syncthreads): lets independent groups of warps in one block synchronise separately.
__device__ __forceinline__ void sl_named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Raw 16-byte packet copy (no conversion), for gathers.
__device__ __forceinline__ uint4 sl_load_packet(const void *__restrict__ p) {
  return *reinterpret_cast<const uint4 *>(p);
}
__device__ __forceinline__ void sl_store_packet(void *__restrict__ p, uint4 v) {
  *reinterpret_cast<uint4 *>(p) = v;
}

// ---- reductions ------------------------------------------------------------------------------
// Sum over aligned groups of 2^ROUNDS lanes by a butterfly (shfl_xor): every lane of a group ends
// with the same, bit-identical sum (each step adds the same two values in either order). The
// whole warp must call it (full mask); ROUNDS = 5 is a whole-warp sum, 4 is half-warps, etc.
template <int ROUNDS_> __device__ __forceinline__ float sl_butterfly_sum(float v) {
  static_assert(ROUNDS_ >= 0 && ROUNDS_ <= 5, "a butterfly spans at most a warp (5 rounds)");
#pragma unroll
  for (int i = ROUNDS_ - 1; i >= 0; i--)
    v += __shfl_xor_sync(0xffffffffu, v, 1 << i);
  return v;
}

// log2 of a power of two, at compile time (for the number of butterfly rounds).
__host__ __device__ constexpr int sl_log2_exact(int n) {
  return n <= 1 ? 0 : 1 + sl_log2_exact(n / 2);
}

// Sum over groups of GROUP_WARPS_ consecutive warps of a block of BLOCK_WARPS_ warps: warp sums go
// through `partial` (BLOCK_WARPS_ floats of shared memory, one slot per warp; no data round trip).
// Every thread of the block must call it (it contains __syncthreads). The caller alternates
// between two `partial` arrays on consecutive calls: the barrier of call i+1 then separates the
// reads of call i from the writes of call i+2, so one barrier per call suffices.
template <int BLOCK_WARPS_, int GROUP_WARPS_> __device__ __forceinline__ float sl_group_sum(float v, float *partial) {
  static_assert(BLOCK_WARPS_ % GROUP_WARPS_ == 0, "groups must tile the block");
  v = sl_butterfly_sum<5>(v);
  if constexpr (GROUP_WARPS_ == 1) {
    return v;
  } else {
    const int warp = threadIdx.x / SL_WARP_SIZE;
    if ((threadIdx.x & (SL_WARP_SIZE - 1)) == 0) partial[warp] = v;
    __syncthreads();
    const int first = warp / GROUP_WARPS_ * GROUP_WARPS_;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < GROUP_WARPS_; i++)
      s += partial[first + i];
    return s;
  }
}

// Sum over the whole block (one group).
template <int BLOCK_WARPS_> __device__ __forceinline__ float sl_block_sum(float v, float *partial) {
  return sl_group_sum<BLOCK_WARPS_, BLOCK_WARPS_>(v, partial);
}

#endif
