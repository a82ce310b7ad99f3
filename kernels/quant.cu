// Block-scaled quantize / dequantize kernels (FP8 group-128, MXFP8, MXFP4, NVFP4); the host
// side and the CPU reference are kernels/quant.c, the format rules kernels/quant_formats.h.
#include "kernels/quant_dev.cuh"

#ifndef QFMT
#error "QFMT (SL_QFMT_*) must be defined by the JIT"
#endif
#ifndef QRULE
#error "QRULE (SL_QRULE_*) must be defined by the JIT"
#endif
#ifndef QLAYOUT
#error "QLAYOUT (SL_QLAYOUT_*) must be defined by the JIT"
#endif
#ifndef HIDDEN
#error "HIDDEN (elements per row) must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (SL_DTYPE_* of the wide side: quant input, dequant output) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef UNROLL
#error "UNROLL (work items in flight per warp) must be defined by the JIT"
#endif

#define BLOCK_ELEMS (QFMT == SL_QFMT_FP8_GROUP ? 128 : QFMT == SL_QFMT_NVFP4 ? 16 : 32)
#define IS_FP4 (QFMT == SL_QFMT_MXFP4 || QFMT == SL_QFMT_NVFP4)
static constexpr int VEC = sl_kq_elem<DTYPE>::vec; // elements per thread per item
static constexpr int CHUNK = 32 * VEC;             // elements per warp item
static constexpr int CHUNKS = (HIDDEN + CHUNK - 1) / CHUNK;
static constexpr int LANES = BLOCK_ELEMS / VEC;   // lanes sharing one scale block
static constexpr int COLS = HIDDEN / BLOCK_ELEMS; // scale blocks per row
static_assert(HIDDEN % BLOCK_ELEMS == 0, "HIDDEN must be a multiple of the block size");
static_assert(BLOCK_ELEMS % VEC == 0, "a thread's packet never straddles two blocks");
static_assert(QFMT != SL_QFMT_FP8_GROUP || QLAYOUT == SL_QLAYOUT_LINEAR, "fp32 scales are linear");

// Swizzled layout: zero the padding (rows up to a multiple of 128, blocks up to 4), which
// the GEMM reads. Grid-stride over exactly the padding cells.
__device__ __forceinline__ void zero_swizzle_padding(unsigned char *scales, int num_tokens) {
  if constexpr (QLAYOUT == SL_QLAYOUT_SWIZZLED) {
    constexpr int cols_pad = (COLS + 3) / 4 * 4;
    const int rows_pad = (num_tokens + 127) / 128 * 128;
    const long n1 = (long)(rows_pad - num_tokens) * cols_pad;
    const long n2 = (long)num_tokens * (cols_pad - COLS);
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n1 + n2; i += (long)gridDim.x * blockDim.x) {
      int r, c;
      if (i < n1) {
        r = num_tokens + (int)(i / cols_pad);
        c = (int)(i % cols_pad);
      } else {
        long j = i - n1;
        r = (int)(j / (cols_pad - COLS));
        c = COLS + (int)(j % (cols_pad - COLS));
      }
      scales[sl_qf_swizzled_offset(r, c, COLS)] = 0;
    }
  }
}

// One warp item = CHUNK consecutive elements of one row; lane l holds elements
// [l*VEC, (l+1)*VEC) of it. A warp loads UNROLL items before quantizing any, so its loads are
// in flight together. Rows and items are grid-stride (grid <= resident blocks).
extern "C" __global__ void __launch_bounds__(WARPS * 32)
    sl_quant_kernel(const void *__restrict__ in, long in_stride, unsigned char *__restrict__ codes,
                    void *__restrict__ scales, float global_scale, int num_tokens) {
  const int lane = threadIdx.x & 31;
  const long items = (long)num_tokens * CHUNKS;
  const long warp = (long)blockIdx.x * WARPS + threadIdx.x / 32, nwarps = (long)gridDim.x * WARPS;
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  for (long base = warp; base < items; base += nwarps * UNROLL) {
    float v[UNROLL][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      if (it < items && col < HIDDEN)
        sl_kq_load<DTYPE>((const char *)in + ((long)row * in_stride + col) * ebytes, v[u]);
      else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
          v[u][j] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      if (it >= items) break; // warp-uniform
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      float absmax;
      int bad;
      sl_kq_block_absmax<VEC, LANES>(v[u], absmax, bad);
      if (col >= HIDDEN) continue;
      unsigned char c[VEC], scale_u8;
      float scale_f32;
      sl_kq_quantize<QFMT, QRULE, VEC>(v[u], absmax, bad, global_scale, c, scale_f32, scale_u8);
      const long flat = (long)row * HIDDEN + col;
      sl_kq_store_codes<VEC, IS_FP4>(codes + (IS_FP4 ? flat / 2 : flat), c);
      if (lane % LANES == 0) {
        const int g = col / BLOCK_ELEMS;
        if constexpr (QFMT == SL_QFMT_FP8_GROUP)
          reinterpret_cast<float *>(scales)[(long)row * COLS + g] = scale_f32;
        else
          reinterpret_cast<unsigned char *>(scales)[sl_qf_scale_offset(QLAYOUT, row, g, COLS)] = scale_u8;
      }
    }
  }
  if constexpr (QFMT != SL_QFMT_FP8_GROUP) zero_swizzle_padding(reinterpret_cast<unsigned char *>(scales), num_tokens);
}

// Dequantize: one warp item = CHUNK output elements (16 bytes of output per lane).
extern "C" __global__ void __launch_bounds__(WARPS * 32)
    sl_dequant_kernel(const unsigned char *__restrict__ codes, const void *__restrict__ scales, float global_scale,
                      void *__restrict__ out, long out_stride, int num_tokens) {
  const int lane = threadIdx.x & 31;
  const long items = (long)num_tokens * CHUNKS;
  const long warp = (long)blockIdx.x * WARPS + threadIdx.x / 32, nwarps = (long)gridDim.x * WARPS;
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  for (long base = warp; base < items; base += nwarps * UNROLL) {
    unsigned char c[UNROLL][VEC];
    float sf[UNROLL];
    unsigned char su[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      sf[u] = 0.0f;
      su[u] = 0;
      if (it < items && col < HIDDEN) {
        const long flat = (long)row * HIDDEN + col;
        sl_kq_load_codes<VEC, IS_FP4>(codes + (IS_FP4 ? flat / 2 : flat), c[u]);
        const int g = col / BLOCK_ELEMS;
        if constexpr (QFMT == SL_QFMT_FP8_GROUP)
          sf[u] = __ldg(reinterpret_cast<const float *>(scales) + (long)row * COLS + g);
        else
          su[u] = __ldg(reinterpret_cast<const unsigned char *>(scales) + sl_qf_scale_offset(QLAYOUT, row, g, COLS));
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      if (it >= items || col >= HIDDEN) continue;
      float y[VEC];
#pragma unroll
      for (int j = 0; j < VEC; j++)
        y[j] = sl_qf_decode(QFMT, c[u][j], sf[u], su[u], global_scale);
      sl_kq_store<DTYPE, VEC>((char *)out + ((long)row * out_stride + col) * ebytes, y);
    }
  }
}
