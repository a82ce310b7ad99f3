// MoE expert FFN for few rows per expert (decode): weight-streaming kernels, fp32 accumulation.
//
// Work item = one warp and two weight rows (gate_up: gate row j and up row I+j; down: rows
// h and h+1) against the expert's R <= 4 input rows at a time; the weights (the bytes that
// matter) are read once with 16-byte streaming loads, U vectors of each row in flight per
// lane; the input rows are small and hit L1/L2. Items are grid-strided over one resident
// wave. Slot s (the s-th non-empty local expert, expert order) is found from the counts by
// each block once. Rounding as the CPU reference (kernels/moe_ffn.c): gate and up rounded
// to bf16, act = silu(g) * u in fp32 rounded to bf16; down output rounded to bf16.
#include <cuda_bf16.h>

#include "kernels/moe_ffn_gemv.h"

#define GEMV_WARPS (SL_MOE_FFN_GEMV_THREADS / 32)
#define GEMV_U 4 // 16-byte vectors per lane per weight row in flight

__device__ __forceinline__ uint4 gemv_ld_stream(const uint4 *p) { return __ldcs(p); }

// The 8 bf16 of a 16-byte vector as fp32 (bf16 -> fp32 is a 16-bit shift).
__device__ __forceinline__ void gemv_unpack8(uint4 a, float f[8]) {
  const unsigned w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ unsigned short gemv_bf16_bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ float gemv_bf16_round(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }

// Sums over k < V vectors of w0 . in_r and w1 . in_r for r < R (rows of `in`, stride
// in_stride vectors); rows r >= nrows are skipped (their sums stay 0). Result in every lane.
template <int R>
__device__ __forceinline__ void gemv_two_rows(const uint4 *__restrict__ w0, const uint4 *__restrict__ w1,
                                              const uint4 *__restrict__ in, long in_stride, int nrows, int V,
                                              int lane, float s0[R], float s1[R]) {
#pragma unroll
  for (int r = 0; r < R; r++) s0[r] = s1[r] = 0.0f;
  for (int v0 = lane; v0 < V; v0 += 32 * GEMV_U) {
    uint4 a[GEMV_U], b[GEMV_U];
#pragma unroll
    for (int u = 0; u < GEMV_U; u++) {
      const int v = v0 + 32 * u;
      if (v < V) {
        a[u] = gemv_ld_stream(w0 + v);
        b[u] = gemv_ld_stream(w1 + v);
      } else {
        a[u] = b[u] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
#pragma unroll
    for (int u = 0; u < GEMV_U; u++) {
      const int v = v0 + 32 * u;
      if (v >= V) break;
      // Each weight vector unpacked once, each input vector once; sums in element order.
      float fa[8], fb[8];
      gemv_unpack8(a[u], fa);
      gemv_unpack8(b[u], fb);
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (r < nrows) {
          float fx[8];
          gemv_unpack8(__ldg(in + r * in_stride + v), fx);
#pragma unroll
          for (int i = 0; i < 8; i++) {
            s0[r] = __fmaf_rn(fa[i], fx[i], s0[r]);
            s1[r] = __fmaf_rn(fb[i], fx[i], s1[r]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      s0[r] += __shfl_xor_sync(0xffffffffu, s0[r], o);
      s1[r] += __shfl_xor_sync(0xffffffffu, s1[r], o);
    }
  }
}

// The block's table of non-empty experts (expert order) and their row counts; returns
// how many there are. Called by all threads.
__device__ __forceinline__ int gemv_active_experts(const int *__restrict__ counts, int num_local, int capacity,
                                                   int *active, int *rows) {
  __shared__ int n_active;
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x, lower = (1u << lane) - 1u;
    int na = 0;
    for (int e0 = 0; e0 < num_local; e0 += 32) {
      const int e = e0 + (int)lane;
      const int c = e < num_local ? counts[e] : 0;
      const unsigned on = __ballot_sync(0xffffffffu, c > 0);
      if (c > 0) {
        active[na + __popc(on & lower)] = e;
        rows[na + __popc(on & lower)] = c < capacity ? c : capacity;
      }
      na += __popc(on);
    }
    if (lane == 0) n_active = na;
  }
  __syncthreads();
  return n_active;
}

// act[slot, r, j] = bf16(silu(bf16(x_e[r] . Wgu_e[j])) * bf16(x_e[r] . Wgu_e[I + j])) for the
// slot-th non-empty expert e and its rows r < count; slots beyond the non-empty ones idle.
extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS)
    sl_moe_ffn_gemv_gate_up(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                            int inter, const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_gate_up,
                            __nv_bfloat16 *__restrict__ act) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int lane = threadIdx.x & 31, V = hidden / 8;
  const long items = (long)na * inter;
  for (long item = (long)blockIdx.x * GEMV_WARPS + threadIdx.x / 32; item < items;
       item += (long)gridDim.x * GEMV_WARPS) {
    const int slot = (int)(item / inter), j = (int)(item % inter), e = active[slot], n = rows[slot];
    const uint4 *wg = (const uint4 *)(w_gate_up + ((long)e * 2 * inter + j) * hidden);
    const uint4 *wu = (const uint4 *)(w_gate_up + ((long)e * 2 * inter + inter + j) * hidden);
    for (int r0 = 0; r0 < n; r0 += 4) {
      const int nr = n - r0 < 4 ? n - r0 : 4;
      const uint4 *in = (const uint4 *)(x + ((long)e * capacity + r0) * hidden);
      float g[4], u[4];
      if (nr == 1)
        gemv_two_rows<1>(wg, wu, in, V, nr, V, lane, g, u);
      else if (nr == 2)
        gemv_two_rows<2>(wg, wu, in, V, nr, V, lane, g, u);
      else
        gemv_two_rows<4>(wg, wu, in, V, nr, V, lane, g, u);
      // Lane r stores row r0 + r (the sums are in every lane).
#pragma unroll
      for (int r = 0; r < 4; r++) {
        if (lane == r && r < nr) {
          const float gb = gemv_bf16_round(g[r]), ub = gemv_bf16_round(u[r]);
          const float y = gb / (1.0f + expf(-gb)) * ub;
          act[((long)slot * capacity + r0 + r) * inter + j] = __float2bfloat16_rn(y);
        }
      }
    }
  }
}

// y_e[r, h] = bf16(act[slot, r] . Wd_e[h]) for the slot-th non-empty expert e, rows r < count;
// a warp computes columns h and h + 1 (hidden is even).
extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS)
    sl_moe_ffn_gemv_down(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                         int inter, const __nv_bfloat16 *__restrict__ act, const __nv_bfloat16 *__restrict__ w_down,
                         __nv_bfloat16 *__restrict__ y) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int lane = threadIdx.x & 31, V = inter / 8, pairs = hidden / 2;
  const long items = (long)na * pairs;
  for (long item = (long)blockIdx.x * GEMV_WARPS + threadIdx.x / 32; item < items;
       item += (long)gridDim.x * GEMV_WARPS) {
    const int slot = (int)(item / pairs), h = 2 * (int)(item % pairs), e = active[slot], n = rows[slot];
    const uint4 *w0 = (const uint4 *)(w_down + ((long)e * hidden + h) * inter);
    const uint4 *w1 = (const uint4 *)(w_down + ((long)e * hidden + h + 1) * inter);
    for (int r0 = 0; r0 < n; r0 += 4) {
      const int nr = n - r0 < 4 ? n - r0 : 4;
      const uint4 *in = (const uint4 *)(act + ((long)slot * capacity + r0) * inter);
      float s0[4], s1[4];
      if (nr == 1)
        gemv_two_rows<1>(w0, w1, in, V, nr, V, lane, s0, s1);
      else if (nr == 2)
        gemv_two_rows<2>(w0, w1, in, V, nr, V, lane, s0, s1);
      else
        gemv_two_rows<4>(w0, w1, in, V, nr, V, lane, s0, s1);
#pragma unroll
      for (int r = 0; r < 4; r++) {
        if (lane == r && r < nr) {
          const unsigned packed = (unsigned)gemv_bf16_bits(s0[r]) | ((unsigned)gemv_bf16_bits(s1[r]) << 16);
          *(unsigned *)(y + ((long)e * capacity + r0 + r) * hidden + h) = packed;
        }
      }
    }
  }
}

// Router logits for few tokens: logits[t, e] = x[t] . w_router[e] in fp32 (no rounding), a
// warp per pair of experts (e, e + 1; the last one alone when E is odd), tokens 4 per pass.
extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS)
    sl_moe_gate_gemv(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_router,
                     float *__restrict__ logits, int num_tokens, int num_experts, int hidden) {
  const int lane = threadIdx.x & 31, V = hidden / 8, pairs = (num_experts + 1) / 2;
  for (int item = blockIdx.x * GEMV_WARPS + threadIdx.x / 32; item < pairs; item += gridDim.x * GEMV_WARPS) {
    const int e0 = 2 * item, e1 = e0 + 1 < num_experts ? e0 + 1 : e0;
    const uint4 *w0 = (const uint4 *)(w_router + (long)e0 * hidden);
    const uint4 *w1 = (const uint4 *)(w_router + (long)e1 * hidden);
    for (int r0 = 0; r0 < num_tokens; r0 += 4) {
      const int nr = num_tokens - r0 < 4 ? num_tokens - r0 : 4;
      const uint4 *in = (const uint4 *)(x + (long)r0 * hidden);
      float s0[4], s1[4];
      if (nr == 1)
        gemv_two_rows<1>(w0, w1, in, V, nr, V, lane, s0, s1);
      else if (nr == 2)
        gemv_two_rows<2>(w0, w1, in, V, nr, V, lane, s0, s1);
      else
        gemv_two_rows<4>(w0, w1, in, V, nr, V, lane, s0, s1);
#pragma unroll
      for (int r = 0; r < 4; r++) {
        if (lane == r && r < nr) {
          logits[(long)(r0 + r) * num_experts + e0] = s0[r];
          if (e1 != e0) logits[(long)(r0 + r) * num_experts + e1] = s1[r];
        }
      }
    }
  }
}
