/* Launch helper of the quant / act / router kernels: grid sizing from the kernel's resident
 * blocks (the occupancy answer is remembered by the runtime with the kernel). */
#include "kernels/kq_launch.h"
#include "kernels/quant_formats.h"

static int waves_override, warps_override; /* 0: the defaults (kq_launch.h) */
void sl_kq_set_full_grid_waves_override(int waves) {
  waves_override = waves > 0 ? waves : 0;
}
void sl_kq_set_warps_override(int warps) {
  warps_override = warps > 0 && warps <= 32 ? warps : 0;
}
int sl_kq_warps(int arch, int sm_count, long rows) {
  return warps_override ? warps_override : sl_kq_table_warps(arch, sm_count, rows);
}
int sl_kq_warps_act16(int arch, int sm_count, long rows, long items) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (warps_override || rows >= sm_count || !c->act16_wide_items || items < (long)c->act16_wide_items * sm_count)
    return sl_kq_warps(arch, sm_count, rows);
  return items < (long)SL_KQ_ACT16_HALF_ITEMS * sm_count ? c->prefill_warps / 2 : c->prefill_warps;
}

static int unroll_override; /* 0: the per-arch table (kq_launch.h) */
static int seg_override = SL_KQ_SEG_TABLE;

bool sl_kq_q8_decode(int arch, int sm_count, long rows, long items, int one_warp_items, int *warps, int *unroll,
                     int *seg) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (!c->q8_decode || rows >= sm_count || warps_override || seg_override != SL_KQ_SEG_TABLE) return false;
  *warps = one_warp_items && items < (long)one_warp_items * sm_count ? 1
           : items < (long)SL_KQ_ACT16_HALF_ITEMS * sm_count     ? c->prefill_warps / 2
                                                                  : c->prefill_warps;
  *unroll = unroll_override ? unroll_override : 1;
  *seg = 0;
  return true;
}

bool sl_kq_q8_small_launch(int arch, int *warps, int *unroll, int *seg, int *min_blocks) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (!c->q8_small) return false;
  *warps = c->prefill_warps / 2;
  *unroll = 1;
  *seg = 0;
  *min_blocks = 2048 / (*warps * 32);
  return true;
}

bool sl_kq_q8_small(int arch, int sm_count, long rows, long items, long items_per_sm, int *warps, int *unroll, int *seg,
                    int *min_blocks) {
  if (rows < sm_count || items >= items_per_sm * sm_count || warps_override || unroll_override ||
      seg_override != SL_KQ_SEG_TABLE)
    return false;
  return sl_kq_q8_small_launch(arch, warps, unroll, seg, min_blocks);
}

bool sl_kq_pdl(bool pdl, int arch) {
  return pdl && arch >= SL_ARCH_HOPPER;
}
sl_status_t sl_kq_pdl_define(sl_jit_spec_t *spec, bool pdl, int arch) {
  return sl_kq_pdl(pdl, arch) ? sl_jit_spec_define(spec, "PDL", "1") : SL_OK;
}

sl_status_t sl_kq_launch(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, bool pdl,
                         sl_stream_t *stream, void **args) {
  return sl_kq_launch_waves(dev, k, warps, unroll, items, 0, pdl, stream, args);
}

sl_status_t sl_kq_launch_waves(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, int at_waves,
                               bool pdl, sl_stream_t *stream, void **args) {
  long want = (items + (long)warps * unroll - 1) / ((long)warps * unroll), resident = 0;
  SL_CHECK(sl_kernel_resident_blocks(k, warps * 32, 0, &resident));
  /* Up to a few waves the grid is capped at the resident blocks and strides; beyond that one
   * block per group of items (many short-lived blocks) streams better on the H200, as it did
   * for RMSNorm (+3-8 points of copy bandwidth at T >= 8192, kernels/NOTES.md); the point per
   * kind is kq_launch.h's SL_KQ_FULL_GRID_WAVES*. */
  const long waves = waves_override ? waves_override : at_waves > 0 ? at_waves : SL_KQ_FULL_GRID_WAVES;
  long blocks = want <= waves * resident ? (want < resident ? want : resident) : want;
  if (blocks < 1) blocks = 1;
  sl_launch_t l = {
      .grid = {(unsigned)blocks, 1, 1}, .block = {(unsigned)(warps * 32), 1, 1}, .stream = stream, .pdl = pdl};
  return sl_kernel_launch(k, &l, args);
}

void sl_kq_set_unroll_override(int unroll) {
  unroll_override = unroll > 0 ? unroll : 0;
}

int sl_kq_unroll(int arch) {
  return unroll_override ? unroll_override : sl_kq_arch_cfg(arch)->unroll;
}
int sl_kq_unroll_act(int arch, int act16) {
  return act16 && !unroll_override ? sl_kq_arch_cfg(arch)->unroll_act16 : sl_kq_unroll(arch);
}
int sl_kq_unroll_quant(int arch, int fmt, int seg, int chunks, int pair) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  const bool wide = chunks > SL_KQ_FP4Q_WIDE_CHUNKS || (pair && fmt == SL_QFMT_NVFP4) || pair == 2;
  if (unroll_override || !sl_qfmt_is_fp4(fmt) || seg <= 0 || !wide || !c->unroll_fp4q) return sl_kq_unroll(arch);
  return c->unroll_fp4q;
}

void sl_kq_set_seg_override(int seg) {
  seg_override = seg < 0 ? SL_KQ_SEG_TABLE : seg;
}

int sl_kq_seg(int arch, int warps, int kind) {
  if (seg_override != SL_KQ_SEG_TABLE) return seg_override;
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (warps == c->decode_warps && warps != c->prefill_warps) return 0;
  switch (kind) {
  case SL_KQ_SEG_ACT16: return c->seg_act16;
  case SL_KQ_SEG_DEQ8: return c->seg_deq8;
  case SL_KQ_SEG_ACT8: return c->seg_act8;
  default: return c->seg;
  }
}

static int qpair_override = SL_KQ_QPAIR_TABLE;

void sl_kq_set_qpair_override(int pair) {
  qpair_override = pair < 0 ? SL_KQ_QPAIR_TABLE : pair > 2 ? 2 : pair;
}
int sl_kq_qpair(int arch, int fmt, int chunks) {
  if (fmt != SL_QFMT_NVFP4 && fmt != SL_QFMT_MXFP4) return 0;
  if (qpair_override != SL_KQ_QPAIR_TABLE) return fmt == SL_QFMT_NVFP4 && qpair_override ? 1 : qpair_override;
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (fmt == SL_QFMT_NVFP4) return c->nv_pair ? 1 : 0;
  if (chunks > SL_KQ_FP4Q_WIDE_CHUNKS) return c->mx_quad ? 1 : 0;
  return c->mx_half ? 2 : 0;
}

static int q8_line_override = SL_KQ_Q8_LINE_TABLE;
void sl_kq_set_q8_line_override(int line) {
  q8_line_override = line == 0 || line == 1 ? line : SL_KQ_Q8_LINE_TABLE;
}
bool sl_kq_q8_line(int arch, long rows, int hidden) {
  if (q8_line_override != SL_KQ_Q8_LINE_TABLE) return q8_line_override == 1;
  return rows <= sl_kq_arch_cfg(arch)->q8_line_rows && hidden <= SL_KQ_Q8_LINE_MAX_HIDDEN;
}

static int act16_pack_override;

void sl_kq_set_act16_pack_override(int bytes) {
  act16_pack_override = bytes == 16 || bytes == 8 || bytes == 4 ? bytes : 0;
}
int sl_kq_act16_pack_forced(void) {
  return act16_pack_override != 0;
}
int sl_kq_act16_pack(int arch) {
  if (act16_pack_override) return act16_pack_override;
  const int p = sl_kq_arch_cfg(arch)->act16_pack;
  return p == 8 || p == 4 ? p : 16;
}

static int act8_exp_override = SL_KQ_ACT8_EXP_TABLE;

void sl_kq_set_act8_fast_exp_override(int fast) {
  act8_exp_override = fast < 0 ? SL_KQ_ACT8_EXP_TABLE : fast ? 1 : 0;
}
int sl_kq_act8_fast_exp(int arch) {
  if (act8_exp_override != SL_KQ_ACT8_EXP_TABLE) return act8_exp_override;
  return sl_kq_arch_cfg(arch)->act8_fast_exp;
}

static int gelu_exp_override = SL_KQ_ACT8_EXP_TABLE;

void sl_kq_set_gelu_fast_exp_override(int fast) {
  gelu_exp_override = fast < 0 ? SL_KQ_ACT8_EXP_TABLE : fast ? 1 : 0;
}
int sl_kq_gelu_fast_exp(int arch) {
  if (gelu_exp_override != SL_KQ_ACT8_EXP_TABLE) return gelu_exp_override;
  return sl_kq_arch_cfg(arch)->gelu_fast_exp;
}

static int deq_blocks_override, min_blocks_override;

void sl_kq_set_min_blocks_override(int blocks) {
  min_blocks_override = blocks > 0 ? blocks : 0;
}
int sl_kq_min_blocks_override(void) {
  return min_blocks_override;
}

void sl_kq_set_deq_blocks_override(int blocks) {
  deq_blocks_override = blocks > 0 ? blocks : 0;
}
int sl_kq_deq_blocks_override(void) {
  return deq_blocks_override;
}

static int swz_stage_override = SL_KQ_SWZ_STAGE_TABLE;

void sl_kq_set_swz_stage_override(int stage) {
  swz_stage_override = stage < 0 ? SL_KQ_SWZ_STAGE_TABLE : stage ? 1 : 0;
}
int sl_kq_swz_stage(int arch, int fmt, int chunks, int pair) {
  if (swz_stage_override != SL_KQ_SWZ_STAGE_TABLE) return swz_stage_override;
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  if (!(c->swz_stage_fmts & SL_KQ_STAGE_FMT(fmt))) return 0;
  if (fmt == SL_QFMT_MXFP4) return pair == 2;
  return !sl_qfmt_is_fp4(fmt) || chunks <= SL_KQ_FP4Q_WIDE_CHUNKS || pair;
}
