/* Quantize / dequantize host side: argument checks, JIT spec and launch, CPU reference. */
#include "kernels/quant.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kq_launch.h"

static const char *format_name(sl_quant_format_t f) {
  switch (f) {
  case SL_QUANT_FP8_GROUP: return "fp8-group128";
  case SL_QUANT_MXFP8: return "mxfp8";
  case SL_QUANT_MXFP4: return "mxfp4";
  case SL_QUANT_NVFP4: return "nvfp4";
  }
  return "?";
}

static bool float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}

size_t sl_quant_codes_bytes(sl_quant_format_t format, int num_tokens, int hidden) {
  size_t n = (size_t)num_tokens * (size_t)hidden;
  return sl_qfmt_is_fp4((int)format) ? n / 2 : n;
}

size_t sl_quant_scales_bytes(sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens, int hidden) {
  int cols = hidden / sl_qfmt_block((int)format);
  if (format == SL_QUANT_FP8_GROUP) return (size_t)num_tokens * (size_t)cols * sizeof(float);
  return sl_qf_scale_count((int)layout, num_tokens, cols);
}

static sl_status_t check_common(const char *op, sl_quant_format_t format, int rule, sl_quant_layout_t layout,
                                int num_tokens, int hidden, sl_dtype_t dtype, long stride, float global_scale) {
  if ((unsigned)format > SL_QUANT_NVFP4) return SL_ERR(SL_ERR_INVALID, "%s: unknown format %d", op, (int)format);
  if (num_tokens < 0 || hidden <= 0)
    return SL_ERR(SL_ERR_INVALID, "%s %s: bad shape %d x %d", op, format_name(format), num_tokens, hidden);
  int block = sl_qfmt_block((int)format);
  if (hidden % block)
    return SL_ERR(SL_ERR_INVALID, "%s %s: hidden %d is not a multiple of the block size %d", op, format_name(format),
                  hidden, block);
  if (!float_dtype(dtype))
    return SL_ERR(SL_ERR_INVALID, "%s %s: dtype %s not supported (bf16, f16, f32)", op, format_name(format),
                  sl_dtype_name(dtype));
  if (stride != 0 && stride < hidden)
    return SL_ERR(SL_ERR_INVALID, "%s: row stride %ld < hidden %d", op, stride, hidden);
  if (layout != SL_QUANT_LAYOUT_LINEAR && layout != SL_QUANT_LAYOUT_SWIZZLED)
    return SL_ERR(SL_ERR_INVALID, "%s: unknown scale layout %d", op, (int)layout);
  if (format == SL_QUANT_FP8_GROUP && layout != SL_QUANT_LAYOUT_LINEAR)
    return SL_ERR(SL_ERR_INVALID, "%s fp8-group128: fp32 scales are linear only (swizzled is for byte scales)", op);
  if (rule >= 0) {
    bool ok =
        format == SL_QUANT_NVFP4 ||
        (format == SL_QUANT_FP8_GROUP && (rule == SL_QRULE_IEEE || rule == SL_QRULE_CEIL)) ||
        ((format == SL_QUANT_MXFP8 || format == SL_QUANT_MXFP4) && (rule == SL_QRULE_CEIL || rule == SL_QRULE_FLOOR));
    if (!ok)
      return SL_ERR(SL_ERR_INVALID, "%s %s: scale rule %d not defined (fp8-group: IEEE or CEIL; MX: CEIL or FLOOR)", op,
                    format_name(format), rule);
  }
  if (format == SL_QUANT_NVFP4 && !(sl_qf_finite(global_scale) && global_scale > 0.0f))
    return SL_ERR(SL_ERR_INVALID, "%s nvfp4: global_scale %g must be finite and > 0 (448*6 / tensor absmax)", op,
                  (double)global_scale);
  return SL_OK;
}

/* ---- CPU reference ----------------------------------------------------------------------- */

static void write_swizzle_padding(uint8_t *scales, int rows, int cols) {
  int rows_pad = sl_qf_round_up(rows, 128), cols_pad = sl_qf_round_up(cols, 4);
  for (int r = 0; r < rows_pad; r++)
    for (int c = (r < rows ? cols : 0); c < cols_pad; c++)
      scales[sl_qf_swizzled_offset(r, c, cols)] = 0;
}

sl_status_t sl_quant_ref(const sl_quant_args_t *a) {
  SL_CHECK(check_common("quant", a->format, (int)a->rule, a->layout, a->num_tokens, a->hidden, a->in_dtype,
                        a->in_stride, a->global_scale));
  int fmt = (int)a->format, block = sl_qfmt_block(fmt), cols = a->hidden / block;
  long stride = a->in_stride ? a->in_stride : a->hidden;
  uint8_t *codes = a->codes, *scales_u8 = a->scales;
  float *scales_f32 = a->scales;
  long first_bad = -1;
  for (int t = 0; t < a->num_tokens; t++) {
    for (int g = 0; g < cols; g++) {
      size_t base = (size_t)t * stride + (size_t)g * block;
      float absmax = 0.0f;
      int bad = 0;
      for (int j = 0; j < block; j++) {
        float x = sl_load_f32(a->in, a->in_dtype, base + j);
        if (!sl_qf_finite(x))
          bad = 1;
        else
          absmax = sl_qf_max(absmax, sl_qf_abs(x));
      }
      float scale_f32;
      uint8_t scale_u8;
      sl_qf_scale_t s = sl_qf_block_scale(fmt, (int)a->rule, absmax, a->global_scale);
      scale_f32 = s.scale_f32;
      scale_u8 = s.scale_u8;
      if (bad) {
        sl_qf_nan_scale(fmt, &scale_f32, &scale_u8);
        if (first_bad < 0) first_bad = (long)t * cols + g;
      }
      size_t out0 = (size_t)t * a->hidden + (size_t)g * block;
      for (int j = 0; j < block; j++) {
        uint8_t c = bad ? sl_qf_nan_code(fmt) : sl_qf_encode(fmt, s, sl_load_f32(a->in, a->in_dtype, base + j));
        size_t i = out0 + j;
        if (sl_qfmt_is_fp4(fmt)) {
          if (i & 1)
            codes[i / 2] = (uint8_t)((codes[i / 2] & 0x0f) | (c << 4));
          else
            codes[i / 2] = c; /* element 2i in the low nibble */
        } else {
          codes[i] = c;
        }
      }
      if (fmt == SL_QFMT_FP8_GROUP)
        scales_f32[(size_t)t * cols + g] = scale_f32;
      else
        scales_u8[sl_qf_scale_offset((int)a->layout, t, g, cols)] = scale_u8;
    }
  }
  if (fmt != SL_QFMT_FP8_GROUP && a->layout == SL_QUANT_LAYOUT_SWIZZLED)
    write_swizzle_padding(scales_u8, a->num_tokens, cols);
  if (a->check_nan && first_bad >= 0)
    return SL_ERR(SL_ERR_NUMERIC, "quant %s: NaN/Inf input in token %ld, block %ld (elements %ld..%ld of the row)",
                  format_name(a->format), first_bad / cols, first_bad % cols, (first_bad % cols) * block,
                  (first_bad % cols) * block + block - 1);
  return SL_OK;
}

sl_status_t sl_dequant_ref(const sl_dequant_args_t *a) {
  SL_CHECK(check_common("dequant", a->format, -1, a->layout, a->num_tokens, a->hidden, a->out_dtype, a->out_stride,
                        a->format == SL_QUANT_NVFP4 ? a->global_scale : 1.0f));
  int fmt = (int)a->format, block = sl_qfmt_block(fmt), cols = a->hidden / block;
  long stride = a->out_stride ? a->out_stride : a->hidden;
  const uint8_t *codes = a->codes, *scales_u8 = a->scales;
  const float *scales_f32 = a->scales;
  for (int t = 0; t < a->num_tokens; t++)
    for (int i = 0; i < a->hidden; i++) {
      size_t ci = (size_t)t * a->hidden + i;
      uint8_t c = sl_qfmt_is_fp4(fmt) ? (uint8_t)((codes[ci / 2] >> ((ci & 1) * 4)) & 0xf) : codes[ci];
      int g = i / block;
      float sf = fmt == SL_QFMT_FP8_GROUP ? scales_f32[(size_t)t * cols + g] : 0.0f;
      uint8_t su = fmt == SL_QFMT_FP8_GROUP ? 0 : scales_u8[sl_qf_scale_offset((int)a->layout, t, g, cols)];
      sl_store_f32(a->out, a->out_dtype, (size_t)t * stride + i, sl_qf_decode(fmt, c, sf, su, a->global_scale));
    }
  return SL_OK;
}

sl_status_t sl_quant_check_scales_host(sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens, int hidden,
                                       const void *scales) {
  int fmt = (int)format, block = sl_qfmt_block(fmt), cols = hidden / block;
  for (int t = 0; t < num_tokens; t++)
    for (int g = 0; g < cols; g++) {
      bool nan;
      if (fmt == SL_QFMT_FP8_GROUP) {
        nan = !sl_qf_finite(((const float *)scales)[(size_t)t * cols + g]);
      } else {
        uint8_t s = ((const uint8_t *)scales)[sl_qf_scale_offset((int)layout, t, g, cols)];
        nan = fmt == SL_QFMT_NVFP4 ? (s & 0x7f) == SL_E4M3_NAN : s == SL_E8M0_NAN;
      }
      if (nan)
        return SL_ERR(SL_ERR_NUMERIC, "quant %s: NaN/Inf input in token %d, block %d (elements %d..%d of the row)",
                      format_name(format), t, g, g * block, g * block + block - 1);
    }
  return SL_OK;
}

sl_status_t sl_quant_check_scales(sl_device_t *dev, sl_quant_format_t format, sl_quant_layout_t layout, int num_tokens,
                                  int hidden, const void *scales, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU)
    return sl_quant_check_scales_host(format, layout, num_tokens, hidden, scales);
  size_t bytes = sl_quant_scales_bytes(format, layout, num_tokens, hidden);
  void *host = malloc(bytes ? bytes : 1);
  if (!host) return SL_ERR(SL_ERR_NOMEM, "quant check: %zu bytes for the scales", bytes);
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(sl_memcpy(dev, host, scales, bytes, stream), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  SL_CHECK_GOTO(sl_quant_check_scales_host(format, layout, num_tokens, hidden, host), s, out);
out:
  free(host);
  return s;
}

/* ---- JIT --------------------------------------------------------------------------------- */

static sl_status_t common_defines(sl_jit_spec_t *spec, int fmt, int rule, int layout, int hidden, sl_dtype_t dtype,
                                  int warps, int unroll, int seg, int stage, int pair) {
  SL_CHECK(sl_jit_spec_define(spec, "QFMT", "%d", fmt));
  SL_CHECK(sl_jit_spec_define(spec, "QRULE", "%d", rule));
  SL_CHECK(sl_jit_spec_define(spec, "QLAYOUT", "%d", layout));
  SL_CHECK(sl_jit_spec_define(spec, "HIDDEN", "%d", hidden));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE", "%d", (int)dtype));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", warps));
  SL_CHECK(sl_jit_spec_define(spec, "UNROLL", "%d", unroll));
  SL_CHECK(sl_jit_spec_define(spec, "SEG", "%d", seg));
  SL_CHECK(sl_jit_spec_define(spec, "SWZ_STAGE", "%d", stage));
  SL_CHECK(sl_jit_spec_define(spec, "QPAIR", "%d", pair));
  return SL_OK;
}

/* min_blocks: the blocks per SM the kernel is compiled for (MIN_BLOCKS; 0: the kernel's rule). */
static sl_status_t quant_spec_at(int fmt, int rule, int layout, int hidden, sl_dtype_t dtype, int warps, int unroll,
                                 int seg, int stage, int pair, int min_blocks, sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "kernels/quant.cu", "sl_quant_kernel");
  if (fmt == SL_QFMT_NVFP4) rule = 0; /* one rule: don't split the cache on an ignored knob */
  SL_CHECK(common_defines(spec, fmt, rule, layout, hidden, dtype, warps, unroll, seg, stage, pair));
  const int over = sl_kq_min_blocks_override(); /* the tune sweep's rows */
  const int blocks = over > 0 ? over : min_blocks;
  if (blocks > 0) SL_CHECK(sl_jit_spec_define(spec, "MIN_BLOCKS", "%d", blocks));
  return SL_OK;
}

/* The FP8 IEEE group quantizer's straight-line hot path (quant.cu QLINE) applies to a launch: 16-bit inputs in the
 * item layout, whole 256-element chunks (no idle lanes). */
static bool qline_applies(int fmt, int rule, sl_dtype_t dtype, int hidden, int seg) {
  return fmt == SL_QFMT_FP8_GROUP && rule == SL_QRULE_IEEE && (dtype == SL_DTYPE_BF16 || dtype == SL_DTYPE_F16) &&
         seg == 0 && hidden % 256 == 0;
}

/* The FP4 dequantizer's per-CTA table applies (quant.cu DEQ_TABLE): FP4 into 16 bits, the segment
 * layout. */
static bool deq_table(int fmt, sl_dtype_t dtype, int seg) {
  return sl_qfmt_is_fp4(fmt) && dtype != SL_DTYPE_F32 && seg > 0;
}

static sl_status_t dequant_spec_at(int fmt, int layout, int hidden, sl_dtype_t dtype, int warps, int unroll, int seg,
                                   sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "kernels/quant.cu", "sl_dequant_kernel");
  SL_CHECK(common_defines(spec, fmt, 0, layout, hidden, dtype, warps, unroll, seg, 0, 0));
  const int blocks = sl_kq_deq_blocks_override(); /* the benchmark's comparison: the kernel's rule otherwise */
  if (blocks > 0) SL_CHECK(sl_jit_spec_define(spec, "DEQ_MIN_BLOCKS", "%d", blocks));
  return SL_OK;
}

/* Warp chunks per row: 32 x 16 bytes of the wider side. */
static int quant_chunks(int hidden, sl_dtype_t dtype) {
  int chunk = 32 * (16 / (int)(sl_dtype_bits(dtype) / 8));
  return (hidden + chunk - 1) / chunk;
}

/* The segment knob as compiled: 0, or the chunks per task clamped to the row (one cache entry
 * for every seg >= the row's chunks). `kind`: the table's column (kq_launch.h SL_KQ_SEG_*). */
static int quant_seg(int arch, int warps, int hidden, sl_dtype_t dtype, int kind) {
  int seg = sl_kq_seg(arch, warps, kind), chunks = quant_chunks(hidden, dtype);
  return seg > chunks ? chunks : seg;
}
/* The dequantizer's column: the FP8 group format has its own (seg_deq8, measured). */
static int deq_seg_kind(int fmt) {
  return fmt == SL_QFMT_FP8_GROUP ? SL_KQ_SEG_DEQ8 : SL_KQ_SEG_QUANT;
}

/* Whether an FP4 quantizer's lane takes a whole block, or half of one (quant.cu QPAIR 1 / 2; `want`:
 * sl_kq_qpair): 16-bit inputs in the segment layout, whole rows of 256-element chunks, every task
 * whole groups of the lane's packets in chunks (NVFP4 2, MXFP4 4 or, half a block, 2; a multiple of
 * the step: max(unroll, group)). */
static bool qpair_applies(int want, int fmt, sl_dtype_t dtype, int hidden, int seg, int unroll) {
  const int group = fmt == SL_QFMT_MXFP4 && want != 2 ? 4 : 2;
  const int chunks = quant_chunks(hidden, dtype), segc = seg < chunks ? seg : chunks;
  const int step = unroll > group ? unroll : group;
  return want && (fmt == SL_QFMT_MXFP4 || (fmt == SL_QFMT_NVFP4 && want == 1)) &&
         (dtype == SL_DTYPE_BF16 || dtype == SL_DTYPE_F16) &&
         seg > 0 && hidden % 256 == 0 && chunks % segc == 0 && segc % step == 0;
}

/* A quantizer launch's unroll and its FP4 lane's share of a block (*pair: 0 one packet, 1 the whole
 * block, 2 half of it; `want_pair` as sl_kq_qpair): the paired lane takes its own unroll (kq_launch.h
 * sl_kq_unroll_quant's `pair`: 4) where it still applies at that unroll, else the one-packet lane's. */
static int quant_unroll(int arch, int want_pair, int fmt, sl_dtype_t dtype, int hidden, int seg, int *pair) {
  const int chunks = quant_chunks(hidden, dtype), single = sl_kq_unroll_quant(arch, fmt, seg, chunks, 0);
  *pair = qpair_applies(want_pair, fmt, dtype, hidden, seg, single) ? want_pair : 0;
  if (!*pair) return single;
  const int paired = sl_kq_unroll_quant(arch, fmt, seg, chunks, want_pair);
  return qpair_applies(want_pair, fmt, dtype, hidden, seg, paired) ? paired : single;
}

/* Whether a launch stages its swizzled scales: `stage` is the wish (kernels/kq_launch.h
 * sl_kq_swz_stage: the table's formats, or the override), granted only where the kernel's
 * staged variant exists. */
static bool swz_stage_applies(int stage, int fmt, int layout, int warps, int seg) {
  return stage && fmt != SL_QFMT_FP8_GROUP && layout == SL_QLAYOUT_SWIZZLED && seg > 0 &&
         warps == SL_KQ_SWZ_STAGE_WARPS;
}

/* A quantizer launch's choices (kernels/kq_launch.h): warps per block, segment length, unroll, the
 * whole block per lane (QPAIR) and the staged swizzled scales, in that order of dependence. */
typedef struct {
  int warps, seg, unroll, pair; /* pair: quant.cu QPAIR */
  bool stage;
  bool line;      /* quant.cu QLINE */
  int min_blocks; /* quant.cu MIN_BLOCKS (0: the kernel's rule) */
} quant_choice_t;

static quant_choice_t quant_choose(const sl_quant_args_t *a, int arch, int sm_count) {
  quant_choice_t c = {.min_blocks = 0};
  const int fmt = (int)a->format, chunks = quant_chunks(a->hidden, a->in_dtype);
  const long items = (long)a->num_tokens * chunks;
  /* decode (kq_launch.h q8_decode): one item per warp in the item layout, warps by items (the FP8 IEEE group format
   * up to the table's q8_line_rows straight-line: QLINE); the FP8 group format's small prefill (q8_small): the same
   * at 4 warps on every SM's 2048 threads */
  if (sl_kq_q8_decode(arch, sm_count, a->num_tokens, items, 0, &c.warps, &c.unroll, &c.seg)) {
    c.pair = 0, c.stage = false;
    c.line = qline_applies(fmt, (int)a->rule, a->in_dtype, a->hidden, c.seg) && c.unroll == 1 &&
             sl_kq_q8_line(arch, a->num_tokens, a->hidden);
    return c;
  }
  if (fmt == SL_QFMT_FP8_GROUP && sl_kq_q8_small(arch, sm_count, a->num_tokens, items, sl_kq_arch_cfg(arch)->q8_small,
                                                 &c.warps, &c.unroll, &c.seg, &c.min_blocks)) {
    c.pair = 0, c.stage = false;
    return c;
  }
  c.warps = sl_kq_warps(arch, sm_count, a->num_tokens);
  c.seg = quant_seg(arch, c.warps, a->hidden, a->in_dtype, SL_KQ_SEG_QUANT);
  c.unroll = quant_unroll(arch, sl_kq_qpair(arch, fmt, chunks), fmt, a->in_dtype, a->hidden, c.seg, &c.pair);
  c.stage = swz_stage_applies(sl_kq_swz_stage(arch, fmt, chunks, c.pair), fmt, (int)a->layout, c.warps, c.seg);
  return c;
}

sl_status_t sl_quant_spec(const sl_quant_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec) {
  const quant_choice_t c = quant_choose(a, arch, sm_count);
  SL_CHECK(quant_spec_at((int)a->format, (int)a->rule, (int)a->layout, a->hidden, a->in_dtype, c.warps, c.unroll, c.seg,
                         c.stage, c.pair, c.min_blocks, spec));
  if (c.line) SL_CHECK(sl_jit_spec_define(spec, "QLINE", "1"));
  return sl_kq_pdl_define(spec, a->pdl, arch);
}

sl_status_t sl_dequant_spec(const sl_dequant_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec) {
  int warps = sl_kq_warps(arch, sm_count, a->num_tokens);
  SL_CHECK(dequant_spec_at((int)a->format, (int)a->layout, a->hidden, a->out_dtype, warps, sl_kq_unroll(arch),
                           quant_seg(arch, warps, a->hidden, a->out_dtype, deq_seg_kind((int)a->format)), spec));
  return sl_kq_pdl_define(spec, a->pdl, arch);
}

/* Work items of a kernel: one warp-wide chunk of 32 x 16 bytes of the wider side. */
static long quant_items(int num_tokens, int hidden, sl_dtype_t dtype) {
  return (long)num_tokens * quant_chunks(hidden, dtype);
}

/* Launch either layout: warp items `unroll` at a time (seg 0), or one warp task per
 * (row, segment) (sl_kq_seg_tasks). Staged swizzled scales (stage): a CTA takes 8 rows of one
 * 128-row tile row and one segment, so the tasks are the rows rounded up to 128 (the padding
 * rows' warps write the zero scales) times the segments: a whole number of CTAs, one per group. */
static sl_status_t quant_launch(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, int seg, bool stage, int waves,
                                int num_tokens, int hidden, sl_dtype_t dtype, bool pdl, sl_stream_t *stream,
                                void **args) {
  if (stage)
    return sl_kq_launch_waves(dev, k, warps, 1,
                              sl_kq_seg_tasks(((long)num_tokens + 127) / 128 * 128, quant_chunks(hidden, dtype), seg),
                              waves, pdl, stream, args);
  if (seg > 0)
    return sl_kq_launch_waves(dev, k, warps, 1, sl_kq_seg_tasks(num_tokens, quant_chunks(hidden, dtype), seg), waves,
                              pdl, stream, args);
  return sl_kq_launch_waves(dev, k, warps, unroll, quant_items(num_tokens, hidden, dtype), waves, pdl, stream, args);
}

/* The launcher's full-grid point per kind (kq_launch.h SL_KQ_FULL_GRID_WAVES*, measured): the
 * MXFP4 quantizer on rows of <= SL_KQ_FP4Q_WIDE_CHUNKS chunks keeps the resident grid, except its
 * half-block lane (`pair` 2: the launcher's point, kq_launch.h mx_half); the MXFP8
 * quantizer (8 blocks per SM) goes full past 1 of its waves; so does the FP4 table dequantizer when
 * the benchmark compiles it for 8 blocks per SM (its "mb8" rows: the default until session 16, with
 * the point it had; quant.cu DEQ_MIN_BLOCKS). 0: the launcher's point. */
static int quant_full_grid_waves(int fmt, int chunks, int pair) {
  if (fmt == SL_QFMT_MXFP4 && pair != 2) return chunks <= SL_KQ_FP4Q_WIDE_CHUNKS ? SL_KQ_FULL_GRID_WAVES_MXFP4Q : 0;
  return fmt == SL_QFMT_MXFP8 ? SL_KQ_FULL_GRID_WAVES_8BLOCKS : 0;
}
static int deq_full_grid_waves(const sl_dequant_args_t *a, int warps, int seg) {
  const bool table = deq_table((int)a->format, a->out_dtype, seg);
  const bool eight = table && warps == 8 && sl_kq_deq_blocks_override() == 8;
  return eight ? SL_KQ_FULL_GRID_WAVES_8BLOCKS : 0;
}

static sl_status_t check_aligned(const char *op, const void *p, long stride_bytes, const char *what) {
  if (((uintptr_t)p & 15u) || (stride_bytes & 15))
    return SL_ERR(SL_ERR_INVALID, "%s: %s must be 16-byte aligned, rows included (pointer %p, row %ld bytes)", op, what,
                  p, stride_bytes);
  return SL_OK;
}

/* The kernels index work items with 32 bits (a multiply-high per item instead of a 64-bit
 * division): 2^31 items are 2^39 elements, far beyond one call's tensor. */
static sl_status_t check_items(const char *op, long items) {
  if (items > 0x7fffffffL)
    return SL_ERR(SL_ERR_INVALID, "%s: %ld work items exceed the kernel's 32-bit index: split the call by tokens", op,
                  items);
  return SL_OK;
}

sl_status_t sl_quant(sl_device_t *dev, const sl_quant_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_quant_ref(a);
  SL_CHECK(check_common("quant", a->format, (int)a->rule, a->layout, a->num_tokens, a->hidden, a->in_dtype,
                        a->in_stride, a->global_scale));
  if (a->num_tokens == 0) return SL_OK;
  long stride = a->in_stride ? a->in_stride : a->hidden;
  SL_CHECK(check_aligned("quant", a->in, stride * (long)(sl_dtype_bits(a->in_dtype) / 8), "the input"));
  SL_CHECK(check_aligned("quant", a->codes, 0, "codes"));
  if (a->format != SL_QUANT_FP8_GROUP && a->layout == SL_QUANT_LAYOUT_SWIZZLED)
    SL_CHECK(check_aligned("quant", a->scales, 0, "swizzled scales (the padding is zeroed in 16-byte lines)"));
  SL_CHECK(check_items("quant", quant_items(a->num_tokens, a->hidden, a->in_dtype)));
  const sl_device_info_t *info = sl_device_info(dev);
  sl_jit_spec_t spec;
  SL_CHECK(sl_quant_spec(a, info->arch, info->sm_count, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  const quant_choice_t c = quant_choose(a, info->arch, info->sm_count);
  const void *in = a->in;
  void *codes = a->codes, *scales = a->scales;
  float gs = a->global_scale;
  int t = a->num_tokens;
  void *args[] = {&in, &stride, &codes, &scales, &gs, &t};
  const int waves = quant_full_grid_waves((int)a->format, quant_chunks(a->hidden, a->in_dtype), c.pair);
  SL_CHECK(quant_launch(dev, k, c.warps, c.unroll, c.seg, c.stage, waves, t, a->hidden, a->in_dtype,
                        sl_kq_pdl(a->pdl, info->arch), stream, args));
  if (a->check_nan)
    SL_CHECK(sl_quant_check_scales(dev, a->format, a->layout, a->num_tokens, a->hidden, a->scales, stream));
  return SL_OK;
}

sl_status_t sl_dequant(sl_device_t *dev, const sl_dequant_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_dequant_ref(a);
  SL_CHECK(check_common("dequant", a->format, -1, a->layout, a->num_tokens, a->hidden, a->out_dtype, a->out_stride,
                        a->format == SL_QUANT_NVFP4 ? a->global_scale : 1.0f));
  if (a->num_tokens == 0) return SL_OK;
  long stride = a->out_stride ? a->out_stride : a->hidden;
  SL_CHECK(check_aligned("dequant", a->out, stride * (long)(sl_dtype_bits(a->out_dtype) / 8), "the output"));
  SL_CHECK(check_aligned("dequant", a->codes, 0, "codes"));
  SL_CHECK(check_items("dequant", quant_items(a->num_tokens, a->hidden, a->out_dtype)));
  const sl_device_info_t *info = sl_device_info(dev);
  sl_jit_spec_t spec;
  SL_CHECK(sl_dequant_spec(a, info->arch, info->sm_count, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  int warps = sl_kq_warps(info->arch, info->sm_count, a->num_tokens), unroll = sl_kq_unroll(info->arch);
  int seg = quant_seg(info->arch, warps, a->hidden, a->out_dtype, deq_seg_kind((int)a->format));
  const void *codes = a->codes, *scales = a->scales;
  void *out = a->out;
  float gs = a->global_scale;
  int t = a->num_tokens;
  void *args[] = {&codes, &scales, &gs, &out, &stride, &t};
  return quant_launch(dev, k, warps, unroll, seg, false, deq_full_grid_waves(a, warps, seg), t, a->hidden, a->out_dtype,
                      sl_kq_pdl(a->pdl, info->arch), stream, args);
}

/* Configuration points: every format x rule x layout x dtype, decode and prefill warps, quant
 * (swizzled MX/NV prefill in the segment layout with and without the staged scales, SWZ_STAGE)
 * and dequant, at one hidden size (7168, DeepSeek-V3): the hidden size only changes loop
 * bounds, so one size proves every variant compiles while keeping `sluice jit warm` and the
 * jit tests short; a deployment's own sizes compile on first use and stay in the cache. */
sl_status_t sl_quant_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const int hiddens[] = {7168};
  static const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  static const struct {
    int fmt, rule, layout;
  } cfgs[] = {
      {SL_QFMT_FP8_GROUP, SL_QRULE_IEEE, SL_QLAYOUT_LINEAR},
      {SL_QFMT_FP8_GROUP, SL_QRULE_CEIL, SL_QLAYOUT_LINEAR},
      {SL_QFMT_MXFP8, SL_QRULE_FLOOR, SL_QLAYOUT_LINEAR},
      {SL_QFMT_MXFP8, SL_QRULE_CEIL, SL_QLAYOUT_SWIZZLED},
      {SL_QFMT_MXFP8, SL_QRULE_FLOOR, SL_QLAYOUT_SWIZZLED},
      {SL_QFMT_MXFP4, SL_QRULE_FLOOR, SL_QLAYOUT_LINEAR},
      {SL_QFMT_MXFP4, SL_QRULE_CEIL, SL_QLAYOUT_SWIZZLED},
      {SL_QFMT_MXFP4, SL_QRULE_FLOOR, SL_QLAYOUT_SWIZZLED},
      {SL_QFMT_NVFP4, 0, SL_QLAYOUT_LINEAR},
      {SL_QFMT_NVFP4, 0, SL_QLAYOUT_SWIZZLED},
  };
  const sl_kq_arch_cfg_t *ac = sl_kq_arch_cfg(arch);
  int warps[2] = {ac->decode_warps, ac->prefill_warps}, segs[4];
  int nseg = sl_kq_seg_points(arch, segs);
  /* the quantizers' decode launches (kq_launch.h q8_decode): unroll 1, the item layout, half the prefill warps
   * and all of them (the dequantizer keeps the table's decode launch, below) */
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0] && ac->q8_decode; c++)
    for (size_t h = 0; h < sizeof hiddens / sizeof hiddens[0]; h++)
      for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (int w = ac->prefill_warps / 2; w <= ac->prefill_warps; w *= 2) {
          sl_jit_spec_t spec;
          SL_CHECK(quant_spec_at(cfgs[c].fmt, cfgs[c].rule, cfgs[c].layout, hiddens[h], dtypes[d], w, 1, 0, 0, 0, 0,
                                 &spec));
          SL_CHECK(fn(&spec, user));
          if (ac->q8_line_rows && qline_applies(cfgs[c].fmt, cfgs[c].rule, dtypes[d], hiddens[h], 0)) {
            SL_CHECK(sl_jit_spec_define(&spec, "QLINE", "1")); /* the straight-line hot path (q8_line_rows) */
            SL_CHECK(fn(&spec, user));
          }
        }
  /* the FP8 group quantizer's small prefill launch (q8_small): half the prefill warps on all 2048 threads per SM */
  int qw, qu, qs, qmb;
  const bool q8s = sl_kq_q8_small_launch(arch, &qw, &qu, &qs, &qmb);
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0] && q8s; c++)
    for (size_t h = 0; h < sizeof hiddens / sizeof hiddens[0] && cfgs[c].fmt == SL_QFMT_FP8_GROUP; h++)
      for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        sl_jit_spec_t spec;
        SL_CHECK(quant_spec_at(cfgs[c].fmt, cfgs[c].rule, cfgs[c].layout, hiddens[h], dtypes[d], qw, qu, qs, 0, 0, qmb,
                               &spec));
        SL_CHECK(fn(&spec, user));
      }
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
    for (size_t h = 0; h < sizeof hiddens / sizeof hiddens[0]; h++)
      for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (int w = 0; w < 2; w++)
          for (int si = 0; si < (w ? nseg : 1); si++) { /* decode: seg 0; prefill: table's, 0, point */
            int chunks = quant_chunks(hiddens[h], dtypes[d]), seg = w ? segs[si] : 0;
            if (seg > chunks) seg = chunks;
            sl_jit_spec_t spec;
            /* a whole block per lane (QPAIR 1) and MXFP4's half block (QPAIR 2) where they apply: each
             * form, staged and not */
            for (int pr = 0; pr < 3 && !(w == 0 && ac->q8_decode); pr++) { /* decode: the q8 points above */
              int got = 0;
              const int unroll = quant_unroll(arch, pr, cfgs[c].fmt, dtypes[d], hiddens[h], seg, &got);
              if (got != pr) continue;
              SL_CHECK(quant_spec_at(cfgs[c].fmt, cfgs[c].rule, cfgs[c].layout, hiddens[h], dtypes[d], warps[w], unroll,
                                     seg, 0, pr, 0, &spec));
              SL_CHECK(fn(&spec, user));
              if (swz_stage_applies(1, cfgs[c].fmt, cfgs[c].layout, warps[w], seg)) { /* staged scales: both forms */
                SL_CHECK(quant_spec_at(cfgs[c].fmt, cfgs[c].rule, cfgs[c].layout, hiddens[h], dtypes[d], warps[w],
                                       unroll, seg, 1, pr, 0, &spec));
                SL_CHECK(fn(&spec, user));
              }
            }
            if (cfgs[c].rule != SL_QRULE_CEIL) { /* dequant doesn't depend on the rule: once per layout */
              SL_CHECK(dequant_spec_at(cfgs[c].fmt, cfgs[c].layout, hiddens[h], dtypes[d], warps[w], ac->unroll, seg,
                                       &spec));
              SL_CHECK(fn(&spec, user));
            }
          }
  /* the FP8 group dequantizer's own prefill segment length (kq_launch.h seg_deq8), where it is
   * not one of the points above */
  const int sd = ac->seg_deq8;
  bool seen = false;
  for (int i = 0; i < nseg; i++)
    seen |= segs[i] == sd;
  for (size_t h = 0; h < sizeof hiddens / sizeof hiddens[0] && !seen; h++)
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
      const int chunks = quant_chunks(hiddens[h], dtypes[d]);
      sl_jit_spec_t spec;
      SL_CHECK(dequant_spec_at(SL_QFMT_FP8_GROUP, SL_QLAYOUT_LINEAR, hiddens[h], dtypes[d], ac->prefill_warps,
                               ac->unroll, sd > chunks ? chunks : sd, &spec));
      SL_CHECK(fn(&spec, user));
    }
  /* As programmatic dependents (`pdl`, sm_90+) at decode: every format and layout, quantizer and dequantizer. */
  for (int f = 0; f < 4 && arch >= SL_ARCH_HOPPER; f++)
    for (int l = 0; l < 2; l++) {
      const sl_quant_format_t fmt = (sl_quant_format_t)f;
      if (fmt == SL_QUANT_FP8_GROUP && l) continue; /* linear scales only */
      const sl_quant_layout_t lay = l || fmt == SL_QUANT_FP8_GROUP ? SL_QUANT_LAYOUT_LINEAR : SL_QUANT_LAYOUT_SWIZZLED;
      const sl_quant_args_t q = {.format = fmt,
                                 .rule = fmt == SL_QUANT_FP8_GROUP ? SL_QUANT_RULE_IEEE : SL_QUANT_RULE_CEIL,
                                 .layout = lay,
                                 .num_tokens = 1,
                                 .hidden = 7168,
                                 .in_dtype = SL_DTYPE_BF16,
                                 .global_scale = 1.0f,
                                 .pdl = true};
      sl_jit_spec_t spec;
      SL_CHECK(sl_quant_spec(&q, arch, 132, &spec));
      SL_CHECK(fn(&spec, user));
      if (fmt != SL_QUANT_FP8_GROUP && fmt != SL_QUANT_NVFP4) continue; /* the dequantizers' formats */
      const sl_dequant_args_t d = {.format = fmt,
                                   .layout = lay,
                                   .num_tokens = 1,
                                   .hidden = 7168,
                                   .global_scale = 1.0f,
                                   .out_dtype = SL_DTYPE_BF16,
                                   .pdl = true};
      SL_CHECK(sl_dequant_spec(&d, arch, 132, &spec));
      SL_CHECK(fn(&spec, user));
    }
  return SL_OK;
}
