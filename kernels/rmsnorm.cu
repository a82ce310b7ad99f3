// RMSNorm over rows of HIDDEN elements, optionally fused with a residual add (see kernels/rmsnorm.h).
#include "kernels/rmsnorm.h"
#include "kernels/vec.cuh"

#ifndef HIDDEN
#error "HIDDEN (elements per row, a multiple of 8) must be defined by the JIT"
#endif
#ifndef DTYPE_IN
#error "DTYPE_IN (sl_dtype_t code of x) must be defined by the JIT"
#endif
#ifndef DTYPE_OUT
#error "DTYPE_OUT (sl_dtype_t code of y) must be defined by the JIT"
#endif
#ifndef DTYPE_W
#error "DTYPE_W (sl_dtype_t code of the weight) must be defined by the JIT"
#endif
#ifndef DTYPE_RES
#error "DTYPE_RES (sl_dtype_t code of the residual) must be defined by the JIT"
#endif
#ifndef EPS
#error "EPS (a float constant) must be defined by the JIT"
#endif
#ifndef WEIGHT_BIAS
#error "WEIGHT_BIAS (a float constant: scale is WEIGHT_BIAS + w) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef RESIDUAL
#error "RESIDUAL (0: plain norm, 1: fused residual add) must be defined by the JIT"
#endif

static_assert(HIDDEN % 8 == 0 && HIDDEN >= SL_RMSNORM_MIN_HIDDEN && HIDDEN <= SL_RMSNORM_MAX_HIDDEN,
              "HIDDEN must be a multiple of 8 in [64, 16384]");

// Layout: a row belongs to ROW_WARPS consecutive warps; a block holds ROWS_PER_BLOCK rows. A
// thread owns CHUNKS chunks of VEC elements, chunk c at position c*ROW_THREADS + thread: each
// chunk is one 16-byte packet of x, so consecutive lanes read consecutive 16 bytes (coalesced).
// The whole row stays in registers (CHUNKS*VEC <= 32 floats), so nothing but one float per warp
// goes through shared memory, and x is read from memory exactly once.
constexpr int VEC = sl_elem<DTYPE_IN>::per16;
constexpr int ROW_WARPS = SL_RMSNORM_ROW_WARPS(HIDDEN);
constexpr int ROW_THREADS = ROW_WARPS * SL_WARP_SIZE;
constexpr int ROWS_PER_BLOCK = WARPS / ROW_WARPS;
constexpr int NVEC = HIDDEN / VEC;
constexpr int CHUNKS = (NVEC + ROW_THREADS - 1) / ROW_THREADS;
static_assert(WARPS % ROW_WARPS == 0 && WARPS <= 32, "WARPS must be a multiple of the row's warps, <= 32");
// The weight is the same for every row. With one row per block (the decode shape, and prefill
// above hidden 8192) each thread loads its weight slice once, before the row, with the bias
// folded in: the weight's memory latency then overlaps the loads of x instead of following the
// reduction (one dependent DRAM/L2 round trip less per decode launch). It costs ~30 registers
// (80-95 instead of 51-68), so with several rows per block -- prefill, where occupancy hides
// latency and the weight is an L1 hit after the first row -- it is re-read per row instead.
constexpr bool PRELOAD_W = ROWS_PER_BLOCK == 1 && WARPS <= 16;

extern "C" __global__ void __launch_bounds__(WARPS * SL_WARP_SIZE)
    sl_rmsnorm_fwd(const void *__restrict__ x, void *__restrict__ y, void *__restrict__ residual,
                   const void *__restrict__ weight, int rows) {
  __shared__ float partial[2][WARPS];
  const int slot = threadIdx.x / ROW_THREADS;     // row within the block
  const int t = threadIdx.x - slot * ROW_THREADS; // thread within the row
  int parity = 0;
  float wpre[PRELOAD_W ? CHUNKS : 1][VEC];
  if constexpr (PRELOAD_W) {
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
      const int e = (c * ROW_THREADS + t) * VEC;
      if (NVEC % ROW_THREADS == 0 || e < HIDDEN) {
        sl_load_vec<DTYPE_W, VEC>((const char *)weight + (long)e * sl_elem<DTYPE_W>::bytes, wpre[c]);
#pragma unroll
        for (int i = 0; i < VEC; i++)
          wpre[c][i] = WEIGHT_BIAS + wpre[c][i];
      }
    }
  }
  // Grid-stride over groups of rows: the bound depends only on blockIdx, so every thread of a
  // block runs the same iterations and reaches the same barriers.
  for (long base = (long)blockIdx.x * ROWS_PER_BLOCK; base < rows; base += (long)gridDim.x * ROWS_PER_BLOCK) {
    const long row = base + slot;
    const bool active = row < rows;
    float v[CHUNKS][VEC];
    // Loads first, all of them, before any arithmetic that depends on them.
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
      const int e = (c * ROW_THREADS + t) * VEC;
      if (active && (NVEC % ROW_THREADS == 0 || e < HIDDEN))
        sl_load_vec<DTYPE_IN, VEC>((const char *)x + (row * HIDDEN + e) * sl_elem<DTYPE_IN>::bytes, v[c]);
      else
#pragma unroll
        for (int i = 0; i < VEC; i++)
          v[c][i] = 0.0f;
    }
#if RESIDUAL
    float r[CHUNKS][VEC];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
      const int e = (c * ROW_THREADS + t) * VEC;
      if (active && (NVEC % ROW_THREADS == 0 || e < HIDDEN))
        sl_load_vec<DTYPE_RES, VEC>((const char *)residual + (row * HIDDEN + e) * sl_elem<DTYPE_RES>::bytes, r[c]);
      else
#pragma unroll
        for (int i = 0; i < VEC; i++)
          r[c][i] = 0.0f;
    }
    // residual = x + residual, rounded to its dtype; the norm is of the stored value.
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
#pragma unroll
      for (int i = 0; i < VEC; i++)
        v[c][i] = sl_round_to<DTYPE_RES>(v[c][i] + r[c][i]);
      const int e = (c * ROW_THREADS + t) * VEC;
      if (active && (NVEC % ROW_THREADS == 0 || e < HIDDEN))
        sl_store_vec<DTYPE_RES, VEC>((char *)residual + (row * HIDDEN + e) * sl_elem<DTYPE_RES>::bytes, v[c]);
    }
#endif
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++)
#pragma unroll
      for (int i = 0; i < VEC; i++)
        ss += v[c][i] * v[c][i];
    ss = sl_group_sum<WARPS, ROW_WARPS>(ss, partial[parity]);
    parity ^= 1;
    // IEEE sqrt and division (not rsqrtf): once per row, and it matches the CPU reference.
    const float inv = 1.0f / sqrtf(ss / (float)HIDDEN + EPS);
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
      const int e = (c * ROW_THREADS + t) * VEC;
      if (active && (NVEC % ROW_THREADS == 0 || e < HIDDEN)) {
        float w[VEC], out[VEC];
        if constexpr (PRELOAD_W) {
#pragma unroll
          for (int i = 0; i < VEC; i++)
            w[i] = wpre[c][i];
        } else {
          sl_load_vec<DTYPE_W, VEC>((const char *)weight + (long)e * sl_elem<DTYPE_W>::bytes, w);
#pragma unroll
          for (int i = 0; i < VEC; i++)
            w[i] = WEIGHT_BIAS + w[i];
        }
#pragma unroll
        for (int i = 0; i < VEC; i++)
          out[i] = (v[c][i] * inv) * w[i];
        sl_store_vec<DTYPE_OUT, VEC>((char *)y + (row * HIDDEN + e) * sl_elem<DTYPE_OUT>::bytes, out);
      }
    }
  }
}
