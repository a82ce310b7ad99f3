// MoE combine: one warp per (token, chunk); lane k < K holds the pair's slot and weight,
// every lane accumulates its 8 x UNROLL columns over the K rows in fp32 registers.
#include <cuda_bf16.h>

#include "kernels/moe_layout.h"
#include "kernels/moe_pdl.cuh"
#include "kernels/vec.cuh"

#ifndef MOE_HIDDEN
#error "MOE_HIDDEN (hidden size, a multiple of 8) must be defined by the JIT"
#endif
#ifndef MOE_TOPK
#error "MOE_TOPK (experts per token) must be defined by the JIT"
#endif
#ifndef MOE_UNROLL
#error "MOE_UNROLL (16-byte vectors per lane per work item) must be defined by the JIT"
#endif
#if MOE_HIDDEN % 8 != 0 || MOE_TOPK < 1 || MOE_TOPK > SL_MOE_MAX_TOPK
#error "MoE combine constants out of range"
#endif
// MOE_PDL (optional, 0 if absent): 1 = launched as a programmatic dependent of the FFN's last
// kernel: the first item's slot and weight are loaded (through L2) before griddepcontrol.wait
// (written by dispatch, which the FFN waited for before letting us launch), the expert rows
// after it.
#ifndef MOE_PDL
#define MOE_PDL 0
#endif

#define MOE_CHUNK (32 * SL_MOE_VEC_ELEMS * MOE_UNROLL)
#define MOE_CHUNKS ((MOE_HIDDEN + MOE_CHUNK - 1) / MOE_CHUNK)

__device__ __forceinline__ void bf16x8_to_f32(const uint4 &v, float *f) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  sl_unpack_u32<SL_DTYPE_BF16>(w, 4, f);
}

// 64 registers at most (4 blocks of 256 threads per SM: 32 warps): the K rows' vectors of
// one item (K x UNROLL x 4 registers at unroll 1: 32 at K = 8) stay in flight together
// with the residual's, and accumulate in k order into 8 x UNROLL fp32 registers. The old
// build (unroll 2 for prefill, no bound) took 116 registers: 25% occupancy.
#define MOE_COMBINE_MIN_BLOCKS (MOE_TOPK * MOE_UNROLL <= 8 ? 4 : 2)
extern "C" __global__ void __launch_bounds__(SL_MOE_COPY_THREADS, MOE_COMBINE_MIN_BLOCKS)
    sl_moe_combine(const __nv_bfloat16 *__restrict__ expert_out, const int *__restrict__ slots,
                   const float *__restrict__ topk_weights, const __nv_bfloat16 *residual, __nv_bfloat16 *out,
                   int num_tokens) {
  const int lane = threadIdx.x % 32;
  const int warps_per_block = SL_MOE_COPY_THREADS / 32;
  const long num_items = (long)num_tokens * MOE_CHUNKS;
  const long stride = (long)gridDim.x * warps_per_block;
  long item = (long)blockIdx.x * warps_per_block + threadIdx.x / 32;
  // Grid-stride (the host launches at most the resident blocks): the next item's slot and
  // weight are loaded while this item's rows are in flight, so a warp's second and later
  // items start with one memory latency (rows) instead of two (slots, then rows).
  int next_row = -1;
  float next_w = 0.0f;
  if (item < num_items && lane < MOE_TOPK) {
    const int t = (int)(item / MOE_CHUNKS);
#if MOE_PDL
    next_row = __ldcg(&slots[t * MOE_TOPK + lane]);
    next_w = __ldcg(&topk_weights[t * MOE_TOPK + lane]);
#else
    next_row = __ldg(&slots[t * MOE_TOPK + lane]);
    next_w = __ldg(&topk_weights[t * MOE_TOPK + lane]);
#endif
  }
#if MOE_PDL
  sl_moe_pdl_wait(); // the expert rows come from the FFN's last kernel
#endif
  for (; item < num_items; item += stride) {
    const int t = (int)(item / MOE_CHUNKS), c = (int)(item % MOE_CHUNKS);
    const int my_row = next_row;
    const float my_w = next_w;
    // The residual (independent of the slots) and all K rows' loads are issued before the
    // first FMA. A row's pointer is formed right before its load (no 64-bit pointer per k
    // kept live); the row index itself is one 32-bit register.
    uint4 res[MOE_UNROLL];
#pragma unroll
    for (int j = 0; j < MOE_UNROLL; j++) {
      const int col = c * MOE_CHUNK + (j * 32 + lane) * SL_MOE_VEC_ELEMS;
      res[j] = make_uint4(0u, 0u, 0u, 0u);
      if (residual && col < MOE_HIDDEN)
        res[j] = reinterpret_cast<const uint4 *>(residual)[((long)t * MOE_HIDDEN + col) / SL_MOE_VEC_ELEMS];
    }
    // Bit k: pair k has a row (one register instead of K row indices).
    const unsigned valid = __ballot_sync(0xffffffffu, my_row >= 0);
    uint4 v[MOE_TOPK][MOE_UNROLL];
#pragma unroll
    for (int k = 0; k < MOE_TOPK; k++) {
      const int row = __shfl_sync(0xffffffffu, my_row, k);
      const uint4 *src = reinterpret_cast<const uint4 *>(expert_out) + (long)row * (MOE_HIDDEN / SL_MOE_VEC_ELEMS);
#pragma unroll
      for (int j = 0; j < MOE_UNROLL; j++) {
        const int col = c * MOE_CHUNK + (j * 32 + lane) * SL_MOE_VEC_ELEMS;
        v[k][j] = make_uint4(0u, 0u, 0u, 0u);
        if (row >= 0 && col < MOE_HIDDEN) v[k][j] = __ldg(src + col / SL_MOE_VEC_ELEMS);
      }
    }
    if (item + stride < num_items && lane < MOE_TOPK) {
      const int tn = (int)((item + stride) / MOE_CHUNKS);
      next_row = __ldg(&slots[tn * MOE_TOPK + lane]);
      next_w = __ldg(&topk_weights[tn * MOE_TOPK + lane]);
    }
    float acc[MOE_UNROLL][SL_MOE_VEC_ELEMS];
#pragma unroll
    for (int j = 0; j < MOE_UNROLL; j++)
#pragma unroll
      for (int i = 0; i < SL_MOE_VEC_ELEMS; i++) acc[j][i] = 0.0f;
#pragma unroll
    for (int k = 0; k < MOE_TOPK; k++) {
      const float w = __shfl_sync(0xffffffffu, my_w, k);
      if (!(valid >> k & 1u)) continue;
#pragma unroll
      for (int j = 0; j < MOE_UNROLL; j++) {
        float f[SL_MOE_VEC_ELEMS];
        bf16x8_to_f32(v[k][j], f);
#pragma unroll
        for (int i = 0; i < SL_MOE_VEC_ELEMS; i++) acc[j][i] = __fmaf_rn(w, f[i], acc[j][i]);
      }
    }
#pragma unroll
    for (int j = 0; j < MOE_UNROLL; j++) {
      const int col = c * MOE_CHUNK + (j * 32 + lane) * SL_MOE_VEC_ELEMS;
      if (col >= MOE_HIDDEN) continue;
      const long at = ((long)t * MOE_HIDDEN + col) / SL_MOE_VEC_ELEMS;
      if (residual) {
        float f[SL_MOE_VEC_ELEMS];
        bf16x8_to_f32(res[j], f);
#pragma unroll
        for (int i = 0; i < SL_MOE_VEC_ELEMS; i++) acc[j][i] = __fadd_rn(acc[j][i], f[i]);
      }
      unsigned w[4];
      sl_pack_u32<SL_DTYPE_BF16>(acc[j], 4, w);
      reinterpret_cast<uint4 *>(out)[at] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}
