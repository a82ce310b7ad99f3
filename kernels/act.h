/* Gated activations for MoE/MLP: SiLU-and-mul (SwiGLU) and GELU(tanh)-and-mul over [T, 2*I]
 * rows (gate = first I columns, up = second I), optionally fused with FP8 E4M3 per-token-group
 * quantization of the output (group 128, same scale rule as kernels/quant.h). */
#ifndef SL_ACT_H
#define SL_ACT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/sl_dtype.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_ACT_SILU_MUL = 0, SL_ACT_GELU_TANH_MUL = 1 } sl_act_kind_t;

/* out[t, i] = act(in[t, i]) * in[t, inter + i], computed in fp32, rounded once to out_dtype. On the
 * GPU SiLU's e^-g into bf16/f16 (and FP8 where kernels/kq_launch.h says) is one ex2.approx: within
 * ~2^-17 relative of the expf of the CPU reference before the output's rounding (kernels/act.cu).
 * out_dtype SL_DTYPE_FP8_E4M3 selects the fused-quant variant: every 128 consecutive outputs
 * of a row form a group with one fp32 scale in out_scales[t * inter/128 + g] (absmax/448 by
 * IEEE division, or the UE8M0 power of two rounded up when scale_ue8m0). inter must then be a
 * multiple of 128. A group whose activations hold NaN/Inf gets a NaN scale and E4M3 NaN codes
 * (never plausible garbage); sl_quant_check_scales(dev, SL_QUANT_FP8_GROUP,
 * SL_QUANT_LAYOUT_LINEAR, T, inter, out_scales, stream) then returns SL_ERR_NUMERIC naming the
 * first token/group (a host sync, so it is separate from this graph-capturable call). */
typedef struct {
  sl_act_kind_t kind;
  int num_tokens;
  int inter;
  sl_dtype_t in_dtype, out_dtype;
  const void *in;
  void *out;
  long in_stride, out_stride; /* elements per row; 0 = dense (2*inter, inter) */
  float *out_scales;          /* FP8 output only: [T, inter/128] */
  bool scale_ue8m0;
  bool pdl; /* GPU, sm_90+: launch as a programmatic dependent of the previous kernel on the stream (JIT constant PDL,
               kernels/moe_pdl.cuh): its launch overlaps that kernel's tail, its memory accesses wait for that
               kernel's completion. For decode chains: H200, 0.45 us less per node in a graph (`sluice bench kernels
               --only decode-chain`). Ignored on the CPU backend and before sm_90 */
} sl_act_args_t;

sl_status_t sl_act(sl_device_t *dev, const sl_act_args_t *a, sl_stream_t *stream);

/* The CPU reference (also the CPU backend); pointers are host memory. */
sl_status_t sl_act_ref(const sl_act_args_t *a);

/* The JIT spec `sl_act` uses for these arguments on sm_<arch> with `sm_count` SMs. */
sl_status_t sl_act_spec(const sl_act_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec);

/* Every configuration point, for `sluice jit warm` and the jit tests. */
sl_status_t sl_act_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
