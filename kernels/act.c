/* Gated activations host side: argument checks, JIT spec and launch, CPU reference. */
#include "kernels/act.h"

#include <math.h>

#include "kernels/kq_launch.h"
#include "kernels/quant.h"

static bool float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}
static const char *kind_name(sl_act_kind_t k) {
  return k == SL_ACT_SILU_MUL ? "silu_mul" : "gelu_tanh_mul";
}

static sl_status_t check_args(const sl_act_args_t *a) {
  if (a->kind != SL_ACT_SILU_MUL && a->kind != SL_ACT_GELU_TANH_MUL)
    return SL_ERR(SL_ERR_INVALID, "act: unknown kind %d (SL_ACT_SILU_MUL, SL_ACT_GELU_TANH_MUL)", (int)a->kind);
  if (a->num_tokens < 0 || a->inter <= 0)
    return SL_ERR(SL_ERR_INVALID, "act %s: bad shape %d tokens x %d", kind_name(a->kind), a->num_tokens, a->inter);
  if (a->inter % 8)
    return SL_ERR(SL_ERR_INVALID, "act %s: inter %d must be a multiple of 8 (16-byte rows)", kind_name(a->kind),
                  a->inter);
  if (!float_dtype(a->in_dtype))
    return SL_ERR(SL_ERR_INVALID, "act %s: input dtype %s not supported (bf16, f16, f32)", kind_name(a->kind),
                  sl_dtype_name(a->in_dtype));
  bool fp8 = a->out_dtype == SL_DTYPE_FP8_E4M3;
  if (!fp8 && !float_dtype(a->out_dtype))
    return SL_ERR(SL_ERR_INVALID, "act %s: output dtype %s not supported (bf16, f16, f32, e4m3)", kind_name(a->kind),
                  sl_dtype_name(a->out_dtype));
  if (fp8 && (a->inter % 128 || !a->out_scales))
    return SL_ERR(SL_ERR_INVALID, "act %s: FP8 output needs inter (%d) a multiple of 128 and out_scales [T, inter/128]",
                  kind_name(a->kind), a->inter);
  if (a->in_stride && a->in_stride < 2L * a->inter)
    return SL_ERR(SL_ERR_INVALID, "act: in_stride %ld < 2*inter %d", a->in_stride, 2 * a->inter);
  if (a->out_stride && a->out_stride < a->inter)
    return SL_ERR(SL_ERR_INVALID, "act: out_stride %ld < inter %d", a->out_stride, a->inter);
  return SL_OK;
}

static float act_ref(sl_act_kind_t kind, float g) {
  if (kind == SL_ACT_SILU_MUL) return g / (1.0f + expf(-g));
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
}

sl_status_t sl_act_ref(const sl_act_args_t *a) {
  SL_CHECK(check_args(a));
  long is = a->in_stride ? a->in_stride : 2L * a->inter, os = a->out_stride ? a->out_stride : a->inter;
  bool fp8 = a->out_dtype == SL_DTYPE_FP8_E4M3;
  int rule = a->scale_ue8m0 ? SL_QRULE_CEIL : SL_QRULE_IEEE;
  float y[128];
  for (int t = 0; t < a->num_tokens; t++) {
    for (int i0 = 0; i0 < a->inter; i0 += 128) {
      int n = a->inter - i0 < 128 ? a->inter - i0 : 128;
      for (int j = 0; j < n; j++) {
        size_t gi = (size_t)t * is + i0 + j;
        float g = sl_load_f32(a->in, a->in_dtype, gi), u = sl_load_f32(a->in, a->in_dtype, gi + a->inter);
        y[j] = act_ref(a->kind, g) * u;
        if (!fp8) sl_store_f32(a->out, a->out_dtype, (size_t)t * os + i0 + j, y[j]);
      }
      if (!fp8) continue;
      /* FP8 group: the quantizer's rule on the fp32 activations (kernels/quant_formats.h). */
      float absmax = 0.0f;
      int bad = 0;
      for (int j = 0; j < 128; j++) {
        if (!sl_qf_finite(y[j]))
          bad = 1;
        else
          absmax = sl_qf_max(absmax, sl_qf_abs(y[j]));
      }
      sl_qf_scale_t s = sl_qf_block_scale(SL_QFMT_FP8_GROUP, rule, absmax, 0.0f);
      float scale = s.scale_f32;
      uint8_t su;
      if (bad) sl_qf_nan_scale(SL_QFMT_FP8_GROUP, &scale, &su);
      uint8_t *codes = (uint8_t *)a->out + (size_t)t * os + i0;
      for (int j = 0; j < 128; j++)
        codes[j] = bad ? (uint8_t)SL_E4M3_NAN : sl_qf_encode(SL_QFMT_FP8_GROUP, s, y[j]);
      a->out_scales[(size_t)t * (a->inter / 128) + i0 / 128] = scale;
    }
  }
  return SL_OK;
}

/* SiLU's e^-g by ex2.approx (kernels/act.cu FASTEXP): into 16-bit outputs always, into FP8 where
 * the arch table says so (kernels/kq_launch.h act8_fast_exp); GELU's 1 + tanh(z) as 2 / (1 + e^-2z),
 * e^-2z by ex2.approx, into 16-bit and FP8 outputs where the table's gelu_fast_exp says so; fp32
 * outputs keep expf / tanhf. */
static int act_fast_exp(sl_act_kind_t kind, sl_dtype_t out, int arch) {
  if (out != SL_DTYPE_BF16 && out != SL_DTYPE_F16 && out != SL_DTYPE_FP8_E4M3) return 0;
  if (kind == SL_ACT_GELU_TANH_MUL) return sl_kq_gelu_fast_exp(arch);
  return out == SL_DTYPE_FP8_E4M3 ? sl_kq_act8_fast_exp(arch) : 1;
}

/* min_blocks: the blocks per SM the kernel is compiled for (MIN_BLOCKS; 0: the kernel's rule). */
static sl_status_t spec_at(sl_act_kind_t kind, int inter, sl_dtype_t in, sl_dtype_t out, int rule, int warps,
                           int unroll, int seg, bool one_item, int fast_exp, int min_blocks, int pack,
                           sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "kernels/act.cu", "sl_act_kernel");
  SL_CHECK(sl_jit_spec_define(spec, "ACT", "%d", (int)kind));
  SL_CHECK(sl_jit_spec_define(spec, "INTER", "%d", inter));
  SL_CHECK(sl_jit_spec_define(spec, "IN_DTYPE", "%d", (int)in));
  SL_CHECK(sl_jit_spec_define(spec, "OUT_DTYPE", "%d", (int)out));
  SL_CHECK(sl_jit_spec_define(spec, "QRULE", "%d", out == SL_DTYPE_FP8_E4M3 ? rule : 0));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", warps));
  SL_CHECK(sl_jit_spec_define(spec, "UNROLL", "%d", unroll));
  SL_CHECK(sl_jit_spec_define(spec, "SEG", "%d", seg));
  SL_CHECK(sl_jit_spec_define(spec, "ONEITEM", "%d", one_item ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "FASTEXP", "%d", fast_exp));
  SL_CHECK(sl_jit_spec_define(spec, "PACK", "%d", pack));
  const int over = sl_kq_min_blocks_override(); /* the tune sweep's rows */
  const int blocks = over > 0 ? over : min_blocks;
  if (blocks > 0 && warps > 1) SL_CHECK(sl_jit_spec_define(spec, "MIN_BLOCKS", "%d", blocks));
  return SL_OK;
}

/* Warp chunks per row (32 x `pack` bytes of the input dtype: 16, or the one-item kernel's 8 / 4, act.cu PACK) and
 * the segment knob as compiled: 0, or chunks per warp task clamped to the row (kernels/kq_launch.h). */
static int act_chunks_p(int inter, sl_dtype_t in, int pack) {
  int chunk = 32 * (pack / (int)(sl_dtype_bits(in) / 8));
  return (inter + chunk - 1) / chunk;
}
static int act_chunks(int inter, sl_dtype_t in) {
  return act_chunks_p(inter, in, 16);
}
static int act_seg(int arch, int warps, int inter, sl_dtype_t in, sl_dtype_t out) {
  int seg = sl_kq_seg(arch, warps, out != SL_DTYPE_FP8_E4M3 ? SL_KQ_SEG_ACT16 : SL_KQ_SEG_ACT8);
  const int chunks = act_chunks(inter, in);
  return seg > chunks ? chunks : seg;
}

/* Warps per block (kernels/kq_launch.h): by rows, and for a 16-bit output by its warp items too. */
static int act_warps(const sl_act_args_t *a, int arch, int sm_count) {
  if (a->out_dtype == SL_DTYPE_FP8_E4M3) return sl_kq_warps(arch, sm_count, a->num_tokens);
  return sl_kq_warps_act16(arch, sm_count, a->num_tokens, (long)a->num_tokens * act_chunks(a->inter, a->in_dtype));
}

/* Items per SM up to which decode launches one block per item: an SM keeps up to 32 blocks
 * (sm_90/sm_100), and this kernel's one-warp blocks are bound by nothing else; half of that. */
#define SL_ACT_ONE_ITEM_PER_SM 16

/* One block of one warp per item (kernels/act.cu ONEITEM) where the launch is exactly that: one
 * warp per block, one item per warp, the item layout, and few enough items that every block is
 * resident at once (sl_kq_launch then launches one block per item; sl_act checks it). */
static bool act_one_item(int warps, int unroll, int seg, long items, int sm_count) {
  return warps == 1 && unroll == 1 && seg == 0 && items >= 1 && items <= (long)SL_ACT_ONE_ITEM_PER_SM * sm_count;
}

/* A launch's choices (kernels/kq_launch.h): warps per block, unroll, segment length, the one-item kernel and the
 * blocks per SM it is compiled for. The FP8 output below sm_count rows takes the quantizers' decode launch
 * (q8_decode: one item per warp, the item layout, one warp per block -- the one-item kernel -- below
 * SL_KQ_ACT8_ONE_WARP_ITEMS items per SM), and from there the FP8 group quantizer's small prefill launch up to the
 * table's q8_small items per SM (GELU: SL_KQ_Q8_SMALL_GELU of it). */
typedef struct {
  int warps, unroll, seg;
  bool one_item;
  int min_blocks; /* act.cu MIN_BLOCKS (0: the kernel's rule) */
  int pack;       /* act.cu PACK: bytes of gate and of up per lane (16; the one-item kernel's 8 / 4) */
} act_choice_t;

/* Blocks per SM of a prefill launch of `warps` warps (act.cu MIN_BLOCKS; 0: the kernel's rule): GELU into FP8 with
 * IEEE scales at the table's gelu8_blocks (kq_launch.h). */
static int act_prefill_blocks(sl_act_kind_t kind, sl_dtype_t out, int rule, int warps, int arch) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  const bool gelu8 = kind == SL_ACT_GELU_TANH_MUL && out == SL_DTYPE_FP8_E4M3 && rule == SL_QRULE_IEEE;
  return gelu8 && warps == c->prefill_warps ? c->gelu8_blocks : 0;
}

/* The FP8-out activation's q8_small point: GELU's longer chain takes it below fewer items (kq_launch.h). */
static long act_q8_small_items(sl_act_kind_t kind, int arch) {
  const long n = sl_kq_arch_cfg(arch)->q8_small;
  return kind == SL_ACT_GELU_TANH_MUL ? SL_KQ_Q8_SMALL_GELU(n) : n;
}

static act_choice_t act_choose(const sl_act_args_t *a, int arch, int sm_count) {
  act_choice_t c = {.min_blocks = 0};
  const bool fp8 = a->out_dtype == SL_DTYPE_FP8_E4M3;
  const long items = (long)a->num_tokens * act_chunks(a->inter, a->in_dtype);
  if (!(fp8 && (sl_kq_q8_decode(arch, sm_count, a->num_tokens, items, SL_KQ_ACT8_ONE_WARP_ITEMS, &c.warps, &c.unroll,
                                &c.seg) ||
                sl_kq_q8_small(arch, sm_count, a->num_tokens, items, act_q8_small_items(a->kind, arch), &c.warps,
                               &c.unroll, &c.seg, &c.min_blocks)))) {
    c.warps = act_warps(a, arch, sm_count);
    c.unroll = sl_kq_unroll_act(arch, !fp8);
    c.seg = act_seg(arch, c.warps, a->inter, a->in_dtype, a->out_dtype);
    c.min_blocks = act_prefill_blocks(a->kind, a->out_dtype, a->scale_ue8m0 ? SL_QRULE_CEIL : SL_QRULE_IEEE, c.warps,
                                      arch);
  }
  c.one_item = act_one_item(c.warps, c.unroll, c.seg, items, sm_count);
  /* From and into 16-bit dtypes the one-item kernel takes the table's narrower lane (kq_launch.h act16_pack) while
   * its 2-4x blocks are <= SL_KQ_ACT16_PACK_PER_SM per SM (T=1; T=16 at I=2048), a forced one (the override) up to
   * the one-item bound. */
  c.pack = 16;
  const bool d16 = (a->in_dtype == SL_DTYPE_BF16 || a->in_dtype == SL_DTYPE_F16) &&
                   (a->out_dtype == SL_DTYPE_BF16 || a->out_dtype == SL_DTYPE_F16);
  const int pack = sl_kq_act16_pack(arch);
  const long per_sm = sl_kq_act16_pack_forced() ? SL_ACT_ONE_ITEM_PER_SM : SL_KQ_ACT16_PACK_PER_SM;
  if (c.one_item && d16 && pack < 16 &&
      (long)a->num_tokens * act_chunks_p(a->inter, a->in_dtype, pack) <= per_sm * sm_count)
    c.pack = pack;
  return c;
}

sl_status_t sl_act_spec(const sl_act_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec) {
  const act_choice_t c = act_choose(a, arch, sm_count);
  SL_CHECK(spec_at(a->kind, a->inter, a->in_dtype, a->out_dtype, a->scale_ue8m0 ? SL_QRULE_CEIL : SL_QRULE_IEEE,
                   c.warps, c.unroll, c.seg, c.one_item, act_fast_exp(a->kind, a->out_dtype, arch), c.min_blocks,
                   c.pack, spec));
  return sl_kq_pdl_define(spec, a->pdl, arch);
}

static sl_status_t check_aligned(const void *p, long row_bytes, const char *what) {
  if (((uintptr_t)p & 15u) || (row_bytes & 15))
    return SL_ERR(SL_ERR_INVALID, "act: %s must be 16-byte aligned, rows included (pointer %p, row %ld bytes)", what, p,
                  row_bytes);
  return SL_OK;
}

sl_status_t sl_act(sl_device_t *dev, const sl_act_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_act_ref(a);
  SL_CHECK(check_args(a));
  if (a->num_tokens == 0) return SL_OK;
  long is = a->in_stride ? a->in_stride : 2L * a->inter, os = a->out_stride ? a->out_stride : a->inter;
  long ib = (long)(sl_dtype_bits(a->in_dtype) / 8),
       ob = a->out_dtype == SL_DTYPE_FP8_E4M3 ? 1 : (long)(sl_dtype_bits(a->out_dtype) / 8);
  SL_CHECK(check_aligned(a->in, is * ib, "the input"));
  /* A lane stores 16/ib elements at once: 16 bytes, or 8/4 for outputs narrower than the
   * input (f32 -> bf16, FP8), so rows need that alignment. */
  long store = (16 / ib) * ob > 16 ? 16 : (16 / ib) * ob;
  if (((uintptr_t)a->out & 15u) || ((os * ob) % store))
    return SL_ERR(SL_ERR_INVALID, "act: the output must be 16-byte aligned and rows a multiple of %ld bytes (%p, %ld)",
                  store, a->out, os * ob);
  const sl_device_info_t *info = sl_device_info(dev);
  sl_jit_spec_t spec;
  SL_CHECK(sl_act_spec(a, info->arch, info->sm_count, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  const act_choice_t c = act_choose(a, info->arch, info->sm_count);
  const int warps = c.warps, unroll = c.unroll, seg = c.seg;
  const void *in = a->in;
  void *out = a->out;
  float *scales = a->out_scales;
  int t = a->num_tokens;
  void *args[] = {&in, &is, &out, &os, &scales, &t};
  long items = (long)t * act_chunks_p(a->inter, a->in_dtype, c.pack);
  if (items > 0x7fffffffL) /* the kernel's item index is 32-bit (kernels/act.cu) */
    return SL_ERR(SL_ERR_INVALID, "act: %ld work items exceed the kernel's 32-bit index: split the call by tokens",
                  items);
  if (c.one_item) { /* a block per item: all resident */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, 32, 0, &resident));
    if (resident < items)
      return SL_ERR(SL_ERR_INTERNAL, "act: the one-item kernel needs %ld resident blocks, the device keeps %ld", items,
                    resident);
  }
  const bool pdl = sl_kq_pdl(a->pdl, info->arch);
  if (seg > 0) /* one warp task per (row, segment) */
    return sl_kq_launch(dev, k, warps, 1, sl_kq_seg_tasks(t, act_chunks(a->inter, a->in_dtype), seg), pdl, stream,
                        args);
  return sl_kq_launch(dev, k, warps, unroll, items, pdl, stream, args);
}

/* Configuration points: both activations, bf16/f16/f32 in, same-dtype out and FP8 out (IEEE and
 * UE8M0 scales), decode and prefill warps, at one intermediate size (768, Qwen3-30B-A3B's MoE
 * experts): the size only changes loop bounds (see sl_quant_jit_points). */
sl_status_t sl_act_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const int inters[] = {768};
  static const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const sl_kq_arch_cfg_t *ac = sl_kq_arch_cfg(arch);
  /* decode, prefill, and (16-bit outputs below SMs rows, sl_kq_warps_act16) half the prefill warps */
  int warps[3] = {ac->decode_warps, ac->prefill_warps, ac->prefill_warps / 2}, segs[4];
  int nseg = sl_kq_seg_points(arch, segs);
  for (int kind = 0; kind < 2; kind++)
    for (size_t i = 0; i < sizeof inters / sizeof inters[0]; i++)
      for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (int o = 0; o < 3; o++)
          for (int w = 0; w < (o == 0 && ac->act16_wide_items ? 3 : 2); w++)
            for (int si = 0; si < (w == 1 ? nseg : 1); si++) { /* decode: seg 0; prefill: table's, 0, point */
              const sl_dtype_t out = o == 0 ? dtypes[d] : SL_DTYPE_FP8_E4M3;
              int chunks = act_chunks(inters[i], dtypes[d]), seg = 0;
              if (w == 1) seg = segs[si];
              if (w == 2) seg = act_seg(arch, warps[w], inters[i], dtypes[d], out); /* the table's */
              if (seg > chunks) seg = chunks;
              sl_jit_spec_t spec;
              const int unroll = o == 0 ? ac->unroll_act16 : ac->unroll;
              const int fe = act_fast_exp((sl_act_kind_t)kind, out, arch);
              /* GELU into 16-bit and FP8 outputs with either tanh too (the benchmark's comparison rows,
               * the GPU tests: sl_kq_set_gelu_fast_exp_override) */
              const bool both = kind == SL_ACT_GELU_TANH_MUL && out != SL_DTYPE_F32;
              const int rule = o == 2 ? SL_QRULE_CEIL : SL_QRULE_IEEE;
              for (int f = 0; f < (both ? 2 : 1); f++) {
                const int fx = f ? !fe : fe;
                if (w == 0 && o > 0 && ac->q8_decode) { /* FP8 at decode: kq_launch.h q8_decode's launches */
                  SL_CHECK(
                      spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, 1, 1, 0, true, fx, 0, 16, &spec));
                  SL_CHECK(fn(&spec, user));
                  for (int qw = ac->prefill_warps / 2; qw <= ac->prefill_warps; qw *= 2) {
                    SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, qw, 1, 0, false, fx, 0,
                                     16, &spec));
                    SL_CHECK(fn(&spec, user));
                  }
                  /* and the small prefill (q8_small), SiLU with either exp (the benchmark's comparison rows, the
                   * GPU tests; GELU's two forms come from the loop) */
                  int qw, qu, qs, mb;
                  const bool q8s = sl_kq_q8_small_launch(arch, &qw, &qu, &qs, &mb);
                  for (int e = 0; q8s && e < (both ? 1 : 2); e++) {
                    SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, qw, qu, qs, false,
                                     e ? !fx : fx, mb, 16, &spec));
                    SL_CHECK(fn(&spec, user));
                  }
                  continue;
                }
                SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, warps[w], unroll, seg, false, fx,
                                 act_prefill_blocks((sl_act_kind_t)kind, out, rule, warps[w], arch), 16, &spec));
                SL_CHECK(fn(&spec, user));
                if (act_one_item(warps[w], unroll, seg, 1, 132)) { /* decode's one-item kernel too */
                  SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, warps[w], unroll, seg, true,
                                   fx, 0, 16, &spec));
                  SL_CHECK(fn(&spec, user));
                  /* and its 8- and 4-byte lanes from and into 16-bit dtypes (act16_pack; the overrides) */
                  for (int pk = 8; o == 0 && dtypes[d] != SL_DTYPE_F32 && pk >= 4; pk /= 2) {
                    SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], out, rule, warps[w], unroll, seg,
                                     true, fx, 0, pk, &spec));
                    SL_CHECK(fn(&spec, user));
                  }
                }
              }
            }
  /* The FP8-out activation at its own prefill segment length (kq_launch.h seg_act8) where it is not
   * one of the points above, with either exp / tanh there (the benchmark's comparison rows, the GPU
   * tests). */
  const int sa = ac->seg_act8;
  bool seen = false;
  for (int i = 0; i < nseg; i++)
    seen |= segs[i] == sa;
  for (int kind = 0; kind < 2; kind++)
    for (size_t i = 0; i < sizeof inters / sizeof inters[0]; i++)
      for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (int o = 1; o < 3; o++) {
          const int chunks = act_chunks(inters[i], dtypes[d]), seg = sa > chunks ? chunks : sa;
          const int fe = act_fast_exp((sl_act_kind_t)kind, SL_DTYPE_FP8_E4M3, arch);
          for (int f = 0; f < 2; f++) { /* either exp (SiLU) or tanh (GELU) */
            if (seen && (f == 0 || kind == SL_ACT_GELU_TANH_MUL)) continue; /* registered above */
            sl_jit_spec_t spec;
            const int rule = o == 2 ? SL_QRULE_CEIL : SL_QRULE_IEEE;
            SL_CHECK(spec_at((sl_act_kind_t)kind, inters[i], dtypes[d], SL_DTYPE_FP8_E4M3, rule, ac->prefill_warps,
                             ac->unroll, seg, false, f ? !fe : fe,
                             act_prefill_blocks((sl_act_kind_t)kind, SL_DTYPE_FP8_E4M3, rule, ac->prefill_warps, arch),
                             16, &spec));
            SL_CHECK(fn(&spec, user));
          }
        }
  /* As programmatic dependents (`pdl`, sm_90+) at decode: both activations, every output kind. */
  for (int kind = 0; kind < 2 && arch >= SL_ARCH_HOPPER; kind++)
    for (int o = 0; o < 3; o++) {
      const sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                               .num_tokens = 1,
                               .inter = inters[0],
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = o ? SL_DTYPE_FP8_E4M3 : SL_DTYPE_BF16,
                               .scale_ue8m0 = o == 2,
                               .pdl = true};
      sl_jit_spec_t spec;
      SL_CHECK(sl_act_spec(&a, arch, 132, &spec));
      SL_CHECK(fn(&spec, user));
    }
  return SL_OK;
}
