// Gated activation kernels: out = act(gate) * up over [T, 2*INTER] rows, optionally fused with
// FP8 E4M3 per-token-group (128) quantization; host side and CPU reference in kernels/act.c.
#include "kernels/quant_dev.cuh"

#ifndef ACT
#error "ACT (0 = SiLU-and-mul, 1 = GELU(tanh)-and-mul) must be defined by the JIT"
#endif
#ifndef INTER
#error "INTER (output columns; input rows hold 2*INTER) must be defined by the JIT"
#endif
#ifndef IN_DTYPE
#error "IN_DTYPE (SL_DTYPE_F32/BF16/F16) must be defined by the JIT"
#endif
#ifndef OUT_DTYPE
#error "OUT_DTYPE (SL_DTYPE_F32/BF16/F16, or SL_DTYPE_FP8_E4M3 for the fused quantization) must be defined"
#endif
#ifndef QRULE
#error "QRULE (SL_QRULE_IEEE or SL_QRULE_CEIL: scale rule of the FP8 output) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef UNROLL
#error "UNROLL (work items in flight per warp) must be defined by the JIT"
#endif

#define FP8_OUT (OUT_DTYPE == 3) // a preprocessor test: the enum isn't visible to #if
static_assert(SL_DTYPE_FP8_E4M3 == 3, "FP8_OUT compares with the value of SL_DTYPE_FP8_E4M3");
static constexpr int VEC = sl_kq_elem<IN_DTYPE>::vec; // 16 bytes of gate and 16 of up per lane
static constexpr int CHUNK = 32 * VEC;
static constexpr int CHUNKS = (INTER + CHUNK - 1) / CHUNK;
static constexpr int GROUP = 128;
static_assert(INTER % VEC == 0, "INTER must be a multiple of the 16-byte packet");
#if FP8_OUT
static constexpr int LANES = GROUP / VEC; // lanes sharing one FP8 scale group: 16 or 32
static_assert(INTER % GROUP == 0, "FP8 output needs INTER a multiple of 128");
#endif

// Accurate expf/tanhf (not the __expf intrinsics): the result is compared with the CPU
// reference within 1-2 ulp of the output dtype.
__device__ __forceinline__ float act_fn(float g) {
#if ACT == 0
  return g / (1.0f + expf(-g));
#else
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
#endif
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
    sl_act_kernel(const void *__restrict__ in, long in_stride, void *__restrict__ out, long out_stride,
                  float *__restrict__ out_scales, int num_tokens) {
  const int lane = threadIdx.x & 31;
  const long items = (long)num_tokens * CHUNKS;
  const long warp = (long)blockIdx.x * WARPS + threadIdx.x / 32, nwarps = (long)gridDim.x * WARPS;
  constexpr int ib = sl_kq_elem<IN_DTYPE>::bytes;
  for (long base = warp; base < items; base += nwarps * UNROLL) {
    float gate[UNROLL][VEC], up[UNROLL][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      if (it < items && col < INTER) {
        const char *p = (const char *)in + ((long)row * in_stride + col) * ib;
        sl_kq_load<IN_DTYPE>(p, gate[u]);
        sl_kq_load<IN_DTYPE>(p + (long)INTER * ib, up[u]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
          gate[u][j] = up[u][j] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long it = base + u * nwarps;
      if (it >= items) break; // warp-uniform
      const int row = (int)(it / CHUNKS), col = (int)(it % CHUNKS) * CHUNK + lane * VEC;
      float y[VEC];
#pragma unroll
      for (int j = 0; j < VEC; j++)
        y[j] = act_fn(gate[u][j]) * up[u][j];
#if FP8_OUT
      float absmax;
      int bad;
      sl_kq_block_absmax<VEC, LANES>(y, absmax, bad); // all lanes take part, tail lanes hold zeros
      if (col >= INTER) continue;
      unsigned char c[VEC], scale_u8;
      float scale_f32;
      sl_kq_quantize<SL_QFMT_FP8_GROUP, QRULE, VEC>(y, absmax, bad, 0.0f, c, scale_f32, scale_u8);
      sl_kq_store_codes<VEC, false>((unsigned char *)out + (long)row * out_stride + col, c);
      if (lane % LANES == 0) out_scales[(long)row * (INTER / GROUP) + col / GROUP] = scale_f32;
#else
      if (col >= INTER) continue;
      sl_kq_store<OUT_DTYPE, VEC>((char *)out + ((long)row * out_stride + col) * sl_kq_elem<OUT_DTYPE>::bytes, y);
#endif
    }
  }
}
