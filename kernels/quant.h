/* Block-scaled quantization and dequantization: FP8 E4M3 per-token-group (128, fp32 scale,
 * IEEE or UE8M0 rule), MXFP8 and MXFP4 (32, E8M0 scale, OCP floor or RCEIL rule), NVFP4 (16,
 * E4M3 scale + fp32 tensor scale). Formats and rules: kernels/quant_formats.h. */
#ifndef SL_QUANT_H
#define SL_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/quant_formats.h"
#include "kernels/sl_dtype.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SL_QUANT_FP8_GROUP = SL_QFMT_FP8_GROUP, /* E4M3, fp32 scale per 128 */
  SL_QUANT_MXFP8 = SL_QFMT_MXFP8,         /* E4M3, E8M0 scale per 32 */
  SL_QUANT_MXFP4 = SL_QFMT_MXFP4,         /* E2M1, E8M0 scale per 32 */
  SL_QUANT_NVFP4 = SL_QFMT_NVFP4,         /* E2M1, E4M3 scale per 16, fp32 tensor scale */
} sl_quant_format_t;

typedef enum {
  SL_QUANT_RULE_IEEE = SL_QRULE_IEEE,   /* FP8_GROUP: scale = absmax / 448 */
  SL_QUANT_RULE_CEIL = SL_QRULE_CEIL,   /* FP8_GROUP UE8M0 / MX "RCEIL": power of two rounded up */
  SL_QUANT_RULE_FLOOR = SL_QRULE_FLOOR, /* MX: OCP floor(log2(absmax)) - emax */
} sl_quant_rule_t;

typedef enum {
  SL_QUANT_LAYOUT_LINEAR = SL_QLAYOUT_LINEAR,     /* [T, hidden/block] row-major */
  SL_QUANT_LAYOUT_SWIZZLED = SL_QLAYOUT_SWIZZLED, /* 128x4 tiles for Blackwell GEMMs (byte scales) */
} sl_quant_layout_t;

/* Quantize rows of `hidden` elements (a multiple of the block: 128, 32 or 16).
 * codes: dense [T, hidden] bytes (FP8) or [T, hidden/2] bytes (FP4, element 2i low nibble).
 * scales: FP8_GROUP float [T, hidden/128] (linear only); others one byte per block in
 *   `layout`; the swizzled layout's padding (rows to 128, blocks to 4) is written as zero.
 * On the GPU the input rows and codes, and swizzled scales, must be 16-byte aligned.
 * A block holding NaN/Inf gets the format's NaN scale (see quant_formats.h). With check_nan,
 * the call then returns SL_ERR_NUMERIC naming the first such token/block; on the GPU that
 * costs a stream synchronisation, so graph-captured callers leave it off and call
 * sl_quant_check_scales when they can afford to look. */
typedef struct {
  sl_quant_format_t format;
  sl_quant_rule_t rule; /* NVFP4: ignored */
  sl_quant_layout_t layout;
  int num_tokens, hidden;
  sl_dtype_t in_dtype; /* bf16, f16, f32 */
  const void *in;
  long in_stride; /* elements per row; 0 = hidden */
  void *codes;
  void *scales;
  float global_scale; /* NVFP4 encode scale, 448*6 / tensor absmax (finite, > 0) */
  bool check_nan;
  bool pdl; /* as sl_act_args_t's (kernels/act.h) */
} sl_quant_args_t;

typedef struct {
  sl_quant_format_t format;
  sl_quant_layout_t layout;
  int num_tokens, hidden;
  const void *codes;
  const void *scales;
  float global_scale;   /* NVFP4 */
  sl_dtype_t out_dtype; /* bf16, f16, f32 */
  void *out;
  long out_stride; /* elements per row; 0 = hidden */
  bool pdl;        /* as sl_act_args_t's (kernels/act.h) */
} sl_dequant_args_t;

sl_status_t sl_quant(sl_device_t *dev, const sl_quant_args_t *a, sl_stream_t *stream);
sl_status_t sl_dequant(sl_device_t *dev, const sl_dequant_args_t *a, sl_stream_t *stream);
/* CPU references (also the CPU backend); pointers are host memory. sl_quant_ref returns
 * SL_ERR_NUMERIC for a NaN/Inf block only when a->check_nan. */
sl_status_t sl_quant_ref(const sl_quant_args_t *a);
sl_status_t sl_dequant_ref(const sl_dequant_args_t *a);

/* Bytes of codes and of scales for T rows of `hidden`. */
size_t sl_quant_codes_bytes(sl_quant_format_t format, int num_tokens, int hidden);
size_t sl_quant_scales_bytes(sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens, int hidden);

/* Read the scales back (synchronises `stream`) and return SL_ERR_NUMERIC naming the first
 * token/block whose scale is the NaN marker of a non-finite input; SL_OK otherwise. Works for
 * sl_quant output and for sl_act's FP8 out_scales (FP8_GROUP, linear). */
sl_status_t sl_quant_check_scales(sl_device_t *dev, sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens,
                                  int hidden, const void *scales, sl_stream_t *stream);
/* The same on host memory. */
sl_status_t sl_quant_check_scales_host(sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens, int hidden,
                                       const void *scales);

/* JIT specs `sl_quant` / `sl_dequant` use on sm_<arch> with `sm_count` SMs. */
sl_status_t sl_quant_spec(const sl_quant_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec);
sl_status_t sl_dequant_spec(const sl_dequant_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec);
/* Every configuration point, for `sluice jit warm` and the jit tests. */
sl_status_t sl_quant_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
