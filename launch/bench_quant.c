/* `sluice bench kernels`, quantization part: activations (SiLU-and-mul and GELU(tanh)-and-mul, bf16 and fused FP8),
 * quantizers (FP8 group-128, MXFP8, MXFP4, NVFP4; swizzled scales), dequantization and the
 * router, over T x hidden, each against the device copy bandwidth measured in the same run.
 * Bytes moved = every input read once + every output (codes and scales) written once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include("bench_kernels.h")
#include "bench_kernels.h"
#else
#include "sl_bench.h"
sl_status_t sl_bench_kernels_quant(sl_bench_t *b);
#endif
#include "kernels/act.h"
#include "kernels/kq_launch.h"
#include "kernels/quant.h"
#include "kernels/router.h"

typedef enum {
  OP_ACT_BF16,
  OP_ACT_FP8,
  OP_ACT_GELU_BF16,
  OP_ACT_GELU_FP8,
  OP_QUANT_FP8,
  OP_QUANT_MXFP8,
  OP_QUANT_MXFP4,
  OP_QUANT_NVFP4,
  OP_DEQUANT_FP8,
  OP_DEQUANT_NVFP4,
  OP_ROUTER_SOFTMAX,
  OP_ROUTER_GROUPED,
  OP_COUNT
} op_t;

static const char *op_names[OP_COUNT] = {
    "act_silu_bf16",   "act_silu_fp8",     "act_gelu_bf16",    "act_gelu_fp8",         "quant_fp8_g128",
    "quant_mxfp8_swz", "quant_mxfp4_swz",  "quant_nvfp4_swz",  "dequant_fp8_g128",     "dequant_nvfp4_swz",
    "router_softmax_128k8", "router_ds_256k8g",
};

enum { MAX_SETS = 8 };

typedef struct {
  sl_device_t *dev;
  op_t op;
  int T, H, sets;
  void *in[MAX_SETS], *out[MAX_SETS], *scales[MAX_SETS];
  float *bias;
  size_t in_bytes, out_bytes, scale_bytes;
  bool linear; /* MX/NV formats: the linear [T, H/block] scales instead of the swizzled tiles */
} ctx_t;

/* The MX/NV rows run in both scale layouts: "<op>_swz" (the 128x4 tiles Blackwell GEMMs read)
 * and "<op>_lin" ([T, H/block]); FP8 group-128 is linear only. */
static bool has_layouts(op_t op) {
  return op == OP_QUANT_MXFP8 || op == OP_QUANT_MXFP4 || op == OP_QUANT_NVFP4 || op == OP_DEQUANT_NVFP4;
}

static bool is_act(op_t op) {
  return op == OP_ACT_BF16 || op == OP_ACT_FP8 || op == OP_ACT_GELU_BF16 || op == OP_ACT_GELU_FP8;
}
static bool act_fp8(op_t op) {
  return op == OP_ACT_FP8 || op == OP_ACT_GELU_FP8;
}

static bool is_router(op_t op) {
  return op == OP_ROUTER_SOFTMAX || op == OP_ROUTER_GROUPED;
}

/* Input and output sizes of one repetition. */
static void sizes(ctx_t *c) {
  size_t T = (size_t)c->T, H = (size_t)c->H;
  c->scale_bytes = 0;
  switch (c->op) {
  case OP_ACT_BF16:
  case OP_ACT_GELU_BF16: c->in_bytes = T * 2 * H * 2, c->out_bytes = T * H * 2; break;
  case OP_ACT_FP8:
  case OP_ACT_GELU_FP8: c->in_bytes = T * 2 * H * 2, c->out_bytes = T * H, c->scale_bytes = T * (H / 128) * 4; break;
  case OP_QUANT_FP8:
  case OP_QUANT_MXFP8:
  case OP_QUANT_MXFP4:
  case OP_QUANT_NVFP4: {
    sl_quant_format_t f = c->op == OP_QUANT_FP8     ? SL_QUANT_FP8_GROUP
                          : c->op == OP_QUANT_MXFP8 ? SL_QUANT_MXFP8
                          : c->op == OP_QUANT_MXFP4 ? SL_QUANT_MXFP4
                                                    : SL_QUANT_NVFP4;
    sl_quant_layout_t l = f == SL_QUANT_FP8_GROUP || c->linear ? SL_QUANT_LAYOUT_LINEAR : SL_QUANT_LAYOUT_SWIZZLED;
    c->in_bytes = T * H * 2, c->out_bytes = sl_quant_codes_bytes(f, c->T, c->H);
    c->scale_bytes = sl_quant_scales_bytes(f, l, c->T, c->H);
    break;
  }
  case OP_DEQUANT_FP8: c->in_bytes = T * H, c->scale_bytes = T * (H / 128) * 4, c->out_bytes = T * H * 2; break;
  case OP_DEQUANT_NVFP4:
    c->in_bytes = T * H / 2,
    c->scale_bytes = sl_quant_scales_bytes(SL_QUANT_NVFP4, c->linear ? SL_QUANT_LAYOUT_LINEAR : SL_QUANT_LAYOUT_SWIZZLED,
                                           c->T, c->H);
    c->out_bytes = T * H * 2;
    break;
  case OP_ROUTER_SOFTMAX: c->in_bytes = T * 128 * 2, c->out_bytes = T * 8 * 8; break;
  case OP_ROUTER_GROUPED: c->in_bytes = T * 256 * 4, c->out_bytes = T * 8 * 8; break;
  default: break;
  }
}

/* One repetition's arguments (input set s) of the row's op: the member of its kind is filled. */
typedef struct {
  sl_act_args_t act;
  sl_quant_args_t q;
  sl_dequant_args_t d;
  sl_router_args_t r;
} row_args_t;

static void row_args(const ctx_t *c, int s, row_args_t *a) {
  memset(a, 0, sizeof *a);
  if (is_act(c->op)) {
    a->act = (sl_act_args_t){.kind = c->op == OP_ACT_GELU_BF16 || c->op == OP_ACT_GELU_FP8 ? SL_ACT_GELU_TANH_MUL
                                                                                          : SL_ACT_SILU_MUL,
                             .num_tokens = c->T,
                             .inter = c->H,
                             .in_dtype = SL_DTYPE_BF16,
                             .out_dtype = act_fp8(c->op) ? SL_DTYPE_FP8_E4M3 : SL_DTYPE_BF16,
                             .in = c->in[s],
                             .out = c->out[s],
                             .out_scales = c->scales[s]};
  } else if (c->op == OP_QUANT_FP8 || c->op == OP_QUANT_MXFP8 || c->op == OP_QUANT_MXFP4 || c->op == OP_QUANT_NVFP4) {
    sl_quant_args_t *q = &a->q;
    *q = (sl_quant_args_t){.num_tokens = c->T,
                           .hidden = c->H,
                           .in_dtype = SL_DTYPE_BF16,
                           .in = c->in[s],
                           .codes = c->out[s],
                           .scales = c->scales[s],
                           .global_scale = 1.0f,
                           .layout = c->linear ? SL_QUANT_LAYOUT_LINEAR : SL_QUANT_LAYOUT_SWIZZLED,
                           .rule = SL_QUANT_RULE_CEIL};
    if (c->op == OP_QUANT_FP8)
      q->format = SL_QUANT_FP8_GROUP, q->layout = SL_QUANT_LAYOUT_LINEAR, q->rule = SL_QUANT_RULE_IEEE;
    if (c->op == OP_QUANT_MXFP8) q->format = SL_QUANT_MXFP8;
    if (c->op == OP_QUANT_MXFP4) q->format = SL_QUANT_MXFP4;
    if (c->op == OP_QUANT_NVFP4) q->format = SL_QUANT_NVFP4;
  } else if (c->op == OP_DEQUANT_FP8 || c->op == OP_DEQUANT_NVFP4) {
    bool nv = c->op == OP_DEQUANT_NVFP4;
    a->d = (sl_dequant_args_t){.format = nv ? SL_QUANT_NVFP4 : SL_QUANT_FP8_GROUP,
                               .layout = nv && !c->linear ? SL_QUANT_LAYOUT_SWIZZLED : SL_QUANT_LAYOUT_LINEAR,
                               .num_tokens = c->T,
                               .hidden = c->H,
                               .codes = c->in[s],
                               .scales = c->scales[s],
                               .global_scale = 1.0f,
                               .out_dtype = SL_DTYPE_BF16,
                               .out = c->out[s]};
  } else {
    bool ds = c->op == OP_ROUTER_GROUPED;
    a->r = (sl_router_args_t){.kind = ds ? SL_ROUTER_SIGMOID_GROUPED : SL_ROUTER_SOFTMAX_TOPK,
                              .num_tokens = c->T,
                              .num_experts = ds ? 256 : 128,
                              .top_k = 8,
                              .renormalize = true,
                              .num_groups = 8,
                              .topk_groups = 4,
                              .routed_scaling = ds ? 2.5f : 1.0f,
                              .logits_dtype = ds ? SL_DTYPE_F32 : SL_DTYPE_BF16,
                              .logits = c->in[s],
                              .correction_bias = ds ? c->bias : NULL,
                              .topk_ids = c->out[s],
                              .topk_weights = c->out[s] ? (float *)((char *)c->out[s] + (size_t)c->T * 8 * 4) : NULL};
  }
}

static sl_status_t run_once(void *p, int iter, sl_stream_t *stream) {
  ctx_t *c = p;
  row_args_t a;
  row_args(c, iter % c->sets, &a);
  if (is_act(c->op)) return sl_act(c->dev, &a.act, stream);
  if (c->op == OP_DEQUANT_FP8 || c->op == OP_DEQUANT_NVFP4) return sl_dequant(c->dev, &a.d, stream);
  if (is_router(c->op)) return sl_router(c->dev, &a.r, stream);
  return sl_quant(c->dev, &a.q, stream);
}

/* The warps per block of the row's launch (its JIT spec's WARPS: the table's choice, with the row's overrides). */
static int row_warps(const ctx_t *c, int arch, int sm_count) {
  row_args_t a;
  row_args(c, 0, &a);
  sl_jit_spec_t spec;
  sl_status_t st = is_act(c->op)                                          ? sl_act_spec(&a.act, arch, sm_count, &spec)
                   : c->op == OP_DEQUANT_FP8 || c->op == OP_DEQUANT_NVFP4 ? sl_dequant_spec(&a.d, arch, sm_count, &spec)
                   : is_router(c->op)                                     ? sl_router_spec(&a.r, arch, sm_count, &spec)
                                                                          : sl_quant_spec(&a.q, arch, sm_count, &spec);
  char desc[512];
  if (st != SL_OK) return 0;
  sl_jit_spec_describe(&spec, desc, sizeof desc);
  const char *w = strstr(desc, " WARPS=");
  return w ? atoi(w + 7) : 0;
}

/* Fill device memory with finite values that look like activations (bf16 normal-ish bytes
 * tiled from one host block); FP8/FP4 codes and scales get valid non-NaN bytes. */
static sl_status_t fill(sl_device_t *dev, void *dst, size_t bytes, bool bf16, bool f32) {
  enum { BLOCK = 1 << 20 };
  static uint16_t block[BLOCK / 2];
  static bool ready;
  if (!ready) {
    uint32_t st = 12345u;
    for (int i = 0; i < BLOCK / 2; i++) {
      st = st * 1664525u + 1013904223u;
      block[i] = (uint16_t)(0x3c00u + ((st >> 16) & 0x3ffu)) ^ (uint16_t)((st >> 31) << 15); /* +-[2^-7, 2) bf16 */
    }
    ready = true;
  }
  for (size_t off = 0; off < bytes; off += BLOCK) {
    size_t n = bytes - off < BLOCK ? bytes - off : BLOCK;
    if (bf16 || f32) {
      /* f32 buffers hold bf16 pairs reinterpreted: finite floats of modest magnitude since the
       * high half of each word is a bf16 of magnitude < 2 */
      SL_CHECK(sl_memcpy(dev, (char *)dst + off, block, n, NULL));
    } else {
      SL_CHECK(sl_memset(dev, (char *)dst + off, 0x35, n, NULL)); /* E4M3 0.8125, E2M1 pairs, scales 2^-74 */
    }
  }
  return SL_OK;
}

static void free_ctx(ctx_t *c) {
  for (int s = 0; s < MAX_SETS; s++) {
    sl_device_free(c->dev, c->in[s]);
    sl_device_free(c->dev, c->out[s]);
    sl_device_free(c->dev, c->scales[s]);
  }
  sl_device_free(c->dev, c->bias);
}

/* SL_KQ_TUNE=1: every act/quant/dequant shape at T >= 1024 is run once per UNROLL in
 * tune_unrolls (path column "w8u<N>") after its default row, so one GPU run shows which
 * items-in-flight count the kq_launch.h table should carry (a different UNROLL is a different
 * JIT specialization: its first launch compiles, outside the timed repetitions); then once per
 * segment length in tune_segs at each kind's own UNROLL (path "w8s<S>": the segment layout of
 * kernels/kq_launch.h, a warp walking S chunks of one row; "s0" = the old item layout forced),
 * so the old and the new layout are printed next to each other. */
static const int tune_unrolls[] = {1, 2, 4};
/* ... and once per warps per block in tune_warps at the table's other choices (path "w<N>") */
static const int tune_warps[] = {4, 16};
static const int tune_segs[] = {0, 1, 2, 4, SL_KQ_SEG_POINT, 32};

/* One row's launch choices, each forced away from kernels/kq_launch.h's default or not: unroll
 * (0: the table), seg (SL_KQ_SEG_TABLE: the table), stage (SL_KQ_SWZ_STAGE_TABLE: the table; 0 /
 * 1 forced), waves (0: the launcher's full-grid rule; SL_BENCH_RESIDENT: always the resident,
 * grid-stride grid; SL_BENCH_FULL_GRID: the full grid past one resident wave), linear (the
 * quantizer's linear scale layout instead of the swizzled one). */
typedef struct {
  int unroll, seg, stage, waves;
  bool linear;
  int deq_blocks; /* the dequantizer's blocks per SM (0: the kernel's rule; sl_kq_set_deq_blocks_override) */
  int pair;       /* the FP4 quantizer's block per lane (SL_KQ_QPAIR_TABLE: the table; 0 / 1 / 2 forced) */
  int warps;      /* warps per block (0: the table; sl_kq_set_warps_override) */
  int fexp;       /* SiLU into FP8 by ex2.approx (SL_KQ_ACT8_EXP_TABLE: the table; 0 / 1 forced) */
  int gexp;       /* GELU's 1 + tanh by ex2.approx (SL_KQ_ACT8_EXP_TABLE: the table; 0 / 1 forced) */
  int min_blocks; /* the quantizer's / activation's blocks per SM (0: the kernel's rule; "mb<N>" rows) */
  int pack;       /* the one-item 16-bit activation's bytes per lane (0: the table; 16 / 8 / 4: "p<N>" rows) */
  int line;       /* the FP8 group quantizer's straight-line decode path (SL_KQ_Q8_LINE_TABLE: the table; 0 / 1) */
} knobs_t;
/* The comparison row of the FP4 dequantizer's occupancy (path "<path> mb8"): the 8 blocks of 8
 * warps (32 registers) it was compiled for on Hopper in sessions 13-15, against the kernel's rule
 * (6; kernels/quant.cu DEQ_MIN_BLOCKS). */
#define SL_BENCH_DEQ_BLOCKS 8
#define SL_BENCH_MIN_BLOCKS 8 /* 8 blocks of 8 warps: 32 registers */
#define SL_BENCH_RESIDENT (1 << 30)
static const knobs_t knobs_table = {.seg = SL_KQ_SEG_TABLE,
                                    .stage = SL_KQ_SWZ_STAGE_TABLE,
                                    .pair = SL_KQ_QPAIR_TABLE,
                                    .fexp = SL_KQ_ACT8_EXP_TABLE,
                                    .gexp = SL_KQ_ACT8_EXP_TABLE,
                                    .line = SL_KQ_Q8_LINE_TABLE};

static sl_status_t bench_one_at(sl_bench_t *b, op_t op, int T, int H, knobs_t kn);

/* Staged swizzled scales (kernels/kq_launch.h sl_kq_swz_stage: the table's formats): a row after
 * each swizzled quantizer row at T >= 1024 with the other choice forced (path "w8 staged" where
 * the table does not stage, "w8 unstaged" where it does; where the arch's table has the item
 * layout, at the registered segment point: "w8s8 staged"), so a run prints both stores side by
 * side. The inputs are bf16: 256 elements per chunk. */
static sl_status_t bench_staged(sl_bench_t *b, op_t op, int T, int H) {
  static const int fmts[] = {[OP_QUANT_MXFP8] = SL_QFMT_MXFP8, [OP_QUANT_MXFP4] = SL_QFMT_MXFP4,
                             [OP_QUANT_NVFP4] = SL_QFMT_NVFP4};
  bool quant = op == OP_QUANT_MXFP8 || op == OP_QUANT_MXFP4 || op == OP_QUANT_NVFP4;
  if (!quant || T < 1024 || sl_device_backend(b->rt->dev) != SL_BACKEND_CUDA) return SL_OK;
  int arch = sl_device_info(b->rt->dev)->arch;
  int seg = sl_kq_arch_cfg(arch)->seg > 0 ? SL_KQ_SEG_TABLE : SL_KQ_SEG_POINT;
  knobs_t kn = knobs_table;
  kn.seg = seg;
  /* the table's choice for this launch: its spec says (QPAIR changes it for wide NVFP4 rows) */
  sl_quant_args_t q = {.format = (sl_quant_format_t)fmts[op],
                       .rule = SL_QUANT_RULE_FLOOR,
                       .layout = SL_QUANT_LAYOUT_SWIZZLED,
                       .num_tokens = T,
                       .hidden = H,
                       .in_dtype = SL_DTYPE_BF16};
  sl_jit_spec_t spec;
  char desc[512];
  SL_CHECK(sl_quant_spec(&q, arch, sl_device_info(b->rt->dev)->sm_count, &spec));
  sl_jit_spec_describe(&spec, desc, sizeof desc);
  kn.stage = !(seg == SL_KQ_SEG_TABLE && strstr(desc, "SWZ_STAGE=1"));
  return bench_one_at(b, op, T, H, kn);
}

/* SL_KQ_GRID=1: after each act/quant/dequant row at T >= 1024 the same launch on the resident grid
 * (path "<path> res") and on the full grid (one block per group of tasks whenever the work
 * exceeds one resident wave: "<path> full"), so a run shows which streams better on either side
 * of the launcher's full-grid point (SL_KQ_FULL_GRID_WAVES resident waves); one of the two is
 * the default launch. */
static bool grid_rows(sl_bench_t *b, op_t op, int T) {
  const char *g = getenv("SL_KQ_GRID");
  return g && strcmp(g, "1") == 0 && !is_router(op) && T >= 1024 && sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA;
}
#define SL_BENCH_FULL_GRID 1 /* knobs_t.waves: the full grid past one resident wave */

/* The row with each QPAIR choice 0 .. npairs - 1 but the table's (`table`), the other knobs as in `kn`. */
static sl_status_t bench_other_pairs(sl_bench_t *b, op_t op, int T, int H, knobs_t kn, int table, int npairs) {
  for (kn.pair = 0; kn.pair < npairs; kn.pair++)
    if (kn.pair != table) SL_CHECK(bench_one_at(b, op, T, H, kn));
  return SL_OK;
}

/* SL_KQ_TUNE_ROWS=w8u1s4mb8,w4u1s0mb16,...: after each act/quant/dequant row at T >= 1024 one row per
 * listed launch, each token the knobs it names (w warps per block, u unroll, s segment length -- 0 the
 * item layout --, mb blocks per SM the kernel is compiled for; the others the table's): a sweep of chosen launches in one run, without the full SL_KQ_TUNE set. */
static sl_status_t bench_tune_rows(sl_bench_t *b, op_t op, int T, int H) {
  const char *list = getenv("SL_KQ_TUNE_ROWS");
  if (!list || !*list || is_router(op) || T < 1024) return SL_OK;
  for (const char *p = list; *p;) {
    knobs_t kn = knobs_table;
    while (*p && *p != ',') {
      char key[3] = {0};
      int n = 0;
      while (*p >= 'a' && *p <= 'z' && n < 2) key[n++] = *p++;
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p || !n)
        return SL_ERR(SL_ERR_INVALID, "SL_KQ_TUNE_ROWS=%s: bad token before \"%s\" (want e.g. w8u1s4mb8,w4u1s0mb16)",
                      list, p);
      p = end;
      if (!strcmp(key, "w")) kn.warps = (int)v;
      else if (!strcmp(key, "u")) kn.unroll = (int)v;
      else if (!strcmp(key, "s")) kn.seg = (int)v;
      else if (!strcmp(key, "mb") && (op == OP_DEQUANT_FP8 || op == OP_DEQUANT_NVFP4)) kn.deq_blocks = (int)v;
      else if (!strcmp(key, "mb")) kn.min_blocks = (int)v;
      else return SL_ERR(SL_ERR_INVALID, "SL_KQ_TUNE_ROWS: unknown knob \"%s\" (w, u, s, mb)", key);
    }
    if (*p == ',') p++;
    if (sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA) SL_CHECK(bench_one_at(b, op, T, H, kn));
  }
  return SL_OK;
}

static sl_status_t bench_one(sl_bench_t *b, op_t op, int T, int H) {
  if (!sl_bench_selected(b, op_names[op])) return SL_OK;
  knobs_t kn = knobs_table, res = knobs_table, full = knobs_table;
  res.waves = SL_BENCH_RESIDENT;
  full.waves = SL_BENCH_FULL_GRID;
  SL_CHECK(bench_one_at(b, op, T, H, kn));
  if (grid_rows(b, op, T)) SL_CHECK(bench_one_at(b, op, T, H, res));
  if (grid_rows(b, op, T)) SL_CHECK(bench_one_at(b, op, T, H, full));
  SL_CHECK(bench_staged(b, op, T, H));
  const bool gpu = sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA;
  /* the FP4 quantizers with the other choices of QPAIR (a whole block per lane, "w8 pair"; one packet,
   * "w8 single"; MXFP4's half block, "w8 half") */
  const bool fp4q = op == OP_QUANT_NVFP4 || op == OP_QUANT_MXFP4;
  const int arch = gpu ? sl_device_info(b->rt->dev)->arch : 0;
  const int pair_table = sl_kq_qpair(arch, op == OP_QUANT_MXFP4 ? SL_QFMT_MXFP4 : SL_QFMT_NVFP4, (H + 255) / 256);
  const int npairs = op == OP_QUANT_MXFP4 ? 3 : 2;
  knobs_t pr = knobs_table;
  if (fp4q && T >= 1024 && gpu) SL_CHECK(bench_other_pairs(b, op, T, H, pr, pair_table, npairs));
  if (op == OP_ACT_FP8 && T >= 1024 && gpu) { /* SiLU into FP8 with the other exp: "w8 ex2" / "w8 expf" */
    knobs_t fe = knobs_table;
    fe.fexp = !sl_kq_act8_fast_exp(sl_device_info(b->rt->dev)->arch);
    SL_CHECK(bench_one_at(b, op, T, H, fe));
  }
  /* GELU with the other form of 1 + tanh: "w8 ex2" / "w8 tanhf" */
  if ((op == OP_ACT_GELU_BF16 || op == OP_ACT_GELU_FP8) && T >= 1024 && gpu) {
    knobs_t ge = knobs_table;
    ge.gexp = !sl_kq_gelu_fast_exp(sl_device_info(b->rt->dev)->arch);
    SL_CHECK(bench_one_at(b, op, T, H, ge));
  }
  /* The 16-bit activation's decode (one-item) kernel at the lane widths the table did not take: "w1 p16" etc. */
  if ((op == OP_ACT_BF16 || op == OP_ACT_GELU_BF16) && T <= 16 && gpu) {
    static const int packs[] = {16, 8, 4};
    for (int i = 0; i < 3; i++) {
      knobs_t pk = knobs_table;
      pk.pack = packs[i];
      if (packs[i] != sl_kq_act16_pack(arch)) SL_CHECK(bench_one_at(b, op, T, H, pk));
    }
  }
  /* The FP8 group quantizer's decode launch with the other hot path (quant.cu QLINE; kq_launch.h q8_line_rows):
   * "w4 line" where the table keeps the branchy one, "w4 branchy" where it takes the straight line */
  if (op == OP_QUANT_FP8 && T <= 16 && gpu) {
    knobs_t ln = knobs_table;
    ln.line = !sl_kq_q8_line(arch, T, H);
    SL_CHECK(bench_one_at(b, op, T, H, ln));
  }
  if (op == OP_DEQUANT_NVFP4 && T >= 1024 && gpu) {
    knobs_t mb = knobs_table; /* the FP4 dequantizer at 8 blocks per SM (32 registers) */
    mb.deq_blocks = SL_BENCH_DEQ_BLOCKS;
    SL_CHECK(bench_one_at(b, op, T, H, mb));
  }
  kn.linear = res.linear = full.linear = true;
  if (has_layouts(op)) SL_CHECK(bench_one_at(b, op, T, H, kn));
  pr.linear = true;
  if (fp4q && T >= 1024 && gpu) SL_CHECK(bench_other_pairs(b, op, T, H, pr, pair_table, npairs));
  if (has_layouts(op) && grid_rows(b, op, T)) SL_CHECK(bench_one_at(b, op, T, H, res));
  if (has_layouts(op) && grid_rows(b, op, T)) SL_CHECK(bench_one_at(b, op, T, H, full));
  SL_CHECK(bench_tune_rows(b, op, T, H));
  const char *tune = getenv("SL_KQ_TUNE");
  const bool tune_mb = tune && strcmp(tune, "mb") == 0; /* SL_KQ_TUNE=mb: only the "mb" rows below */
  if (!tune || (strcmp(tune, "1") != 0 && !tune_mb) || is_router(op) || T < 1024 ||
      sl_device_backend(b->rt->dev) != SL_BACKEND_CUDA)
    return SL_OK;
  sl_status_t s = SL_OK;
  for (size_t i = 0; i < sizeof tune_unrolls / sizeof tune_unrolls[0] && s == SL_OK && !tune_mb; i++) {
    kn = knobs_table;
    kn.unroll = tune_unrolls[i];
    s = bench_one_at(b, op, T, H, kn);
  }
  for (size_t i = 0; i < sizeof tune_segs / sizeof tune_segs[0] && s == SL_OK && !tune_mb; i++) {
    kn = knobs_table;
    kn.seg = tune_segs[i]; /* at each kind's own unroll (kq_launch.h) */
    s = bench_one_at(b, op, T, H, kn);
  }
  for (size_t i = 0; i < sizeof tune_warps / sizeof tune_warps[0] && s == SL_OK && !tune_mb; i++) {
    kn = knobs_table;
    kn.warps = tune_warps[i];
    s = bench_one_at(b, op, T, H, kn);
  }
  /* the 40-register kernels (FP8-out activation, FP8 / MXFP4 quantizers, the linear NVFP4 one; the
   * staged swizzled NVFP4 quantizer is at 8 blocks already, its row a repeat) at the full 2048 threads
   * per SM (32 registers: ptxas spills a few words there) */
  if (s == SL_OK && (act_fp8(op) || op == OP_QUANT_FP8 || op == OP_QUANT_MXFP4 || op == OP_QUANT_NVFP4)) {
    kn = knobs_table;
    kn.min_blocks = SL_BENCH_MIN_BLOCKS;
    s = bench_one_at(b, op, T, H, kn);
    kn.linear = true;
    if (s == SL_OK && has_layouts(op)) s = bench_one_at(b, op, T, H, kn);
  }
  return s;
}

static sl_status_t bench_one_at(sl_bench_t *b, op_t op, int T, int H, knobs_t kn) {
  int unroll = kn.unroll, seg = kn.seg, stage = kn.stage;
  bool linear = kn.linear;
  sl_kq_set_unroll_override(unroll);
  sl_kq_set_seg_override(seg);
  sl_kq_set_swz_stage_override(stage);
  sl_kq_set_full_grid_waves_override(kn.waves);
  sl_kq_set_warps_override(kn.warps);
  sl_kq_set_deq_blocks_override(kn.deq_blocks);
  sl_kq_set_qpair_override(kn.pair);
  sl_kq_set_act8_fast_exp_override(kn.fexp);
  sl_kq_set_gelu_fast_exp_override(kn.gexp);
  sl_kq_set_min_blocks_override(kn.min_blocks);
  sl_kq_set_act16_pack_override(kn.pack);
  sl_kq_set_q8_line_override(kn.line);
  sl_device_t *dev = b->rt->dev;
  bool gpu = sl_device_backend(dev) == SL_BACKEND_CUDA;
  ctx_t c = {.dev = dev, .op = op, .T = T, .H = H, .linear = linear};
  sizes(&c);
  size_t set = c.in_bytes + c.out_bytes + c.scale_bytes;
  /* Rotate through enough input/output sets that L2 (H200: 60 MB) can't hold them between
   * repetitions: >= 256 MB touched per rotation, at most MAX_SETS sets. */
  c.sets = gpu ? (int)((((size_t)256 << 20) + set - 1) / set) : 1;
  if (c.sets > MAX_SETS) c.sets = MAX_SETS;
  if (c.sets < 1) c.sets = 1;
  sl_status_t s = SL_OK;
  bool in_bf16 = op <= OP_QUANT_NVFP4 || op == OP_ROUTER_SOFTMAX;
  for (int i = 0; i < c.sets && s == SL_OK; i++) {
    s = sl_device_malloc(dev, c.in_bytes, &c.in[i]);
    if (s == SL_OK) s = sl_device_malloc(dev, c.out_bytes, &c.out[i]);
    if (s == SL_OK && c.scale_bytes) s = sl_device_malloc(dev, c.scale_bytes, &c.scales[i]);
    if (s == SL_OK) s = fill(dev, c.in[i], c.in_bytes, in_bf16, op == OP_ROUTER_GROUPED);
    if (s == SL_OK && c.scale_bytes) s = fill(dev, c.scales[i], c.scale_bytes, false, false);
  }
  if (s == SL_OK && op == OP_ROUTER_GROUPED) {
    s = sl_device_malloc(dev, 256 * sizeof(float), (void **)&c.bias);
    if (s == SL_OK) s = sl_memset(dev, c.bias, 0, 256 * sizeof(float), NULL);
  }
  double us = 0, graph_us = -1;
  if (s == SL_OK) s = sl_device_sync(dev);
  if (s == SL_OK) s = sl_bench_time(b, run_once, &c, false, &us);
  /* decode sizes: the latency that matters is inside a CUDA graph */
  if (s == SL_OK && gpu && T <= 1024) s = sl_bench_time(b, run_once, &c, true, &graph_us); /* plain = host gap below ~8192 */
  if (s == SL_OK && gpu) s = sl_bench_time_kernel(b, run_once, &c); /* the row's kern_us (CUPTI) */
  if (s == SL_OK) {
    char shape[48], path[24], extra[64] = "";
    if (is_router(op))
      snprintf(shape, sizeof shape, "T=%d E=%d", T, op == OP_ROUTER_GROUPED ? 256 : 128);
    else
      snprintf(shape, sizeof shape, "T=%d %s=%d", T, is_act(op) ? "I" : "H", H);
    const sl_device_info_t *info = sl_device_info(dev);
    const int wl = gpu ? row_warps(&c, info->arch, info->sm_count) : 0; /* the warps the launch took */
    const char *staged = stage ? "staged" : "unstaged";
    if (gpu && stage != SL_KQ_SWZ_STAGE_TABLE && seg != SL_KQ_SEG_TABLE)
      snprintf(path, sizeof path, "w%ds%d %s", wl, seg, staged);
    else if (gpu && stage != SL_KQ_SWZ_STAGE_TABLE)
      snprintf(path, sizeof path, "w%d %s", wl, staged);
    else if (gpu && unroll && seg != SL_KQ_SEG_TABLE)
      snprintf(path, sizeof path, "w%du%ds%d", wl, unroll, seg);
    else if (gpu && seg != SL_KQ_SEG_TABLE)
      snprintf(path, sizeof path, "w%ds%d", wl, seg);
    else if (gpu && unroll)
      snprintf(path, sizeof path, "w%du%d", wl, unroll);
    else if (gpu)
      snprintf(path, sizeof path, "w%d", wl);
    else
      snprintf(path, sizeof path, "cpu");
    if (gpu && kn.waves)
      strncat(path, kn.waves == SL_BENCH_RESIDENT ? " res" : " full", sizeof path - strlen(path) - 1);
    if (gpu && kn.deq_blocks) snprintf(path + strlen(path), sizeof path - strlen(path), " mb%d", kn.deq_blocks);
    if (gpu && kn.min_blocks) snprintf(path + strlen(path), sizeof path - strlen(path), " mb%d", kn.min_blocks);
    if (gpu && kn.pair != SL_KQ_QPAIR_TABLE)
      strncat(path, kn.pair == 2 ? " half" : kn.pair ? " pair" : " single", sizeof path - strlen(path) - 1);
    if (gpu && kn.fexp != SL_KQ_ACT8_EXP_TABLE) strncat(path, kn.fexp ? " ex2" : " expf", sizeof path - strlen(path) - 1);
    if (gpu && kn.gexp != SL_KQ_ACT8_EXP_TABLE) strncat(path, kn.gexp ? " ex2" : " tanhf", sizeof path - strlen(path) - 1);
    if (gpu && kn.pack) snprintf(path + strlen(path), sizeof path - strlen(path), " p%d", kn.pack);
    if (gpu && kn.line != SL_KQ_Q8_LINE_TABLE)
      strncat(path, kn.line ? " line" : " branchy", sizeof path - strlen(path) - 1);
    if (gpu && T >= 8192 && !is_router(op)) snprintf(extra, sizeof extra, "target >= 92%% copy");
    if (gpu && T <= 16) snprintf(extra, sizeof extra, "target graph <= 3 us");
    char name[32];
    snprintf(name, sizeof name, "%s", op_names[op]);
    if (linear) memcpy(name + strlen(name) - 3, "lin", 3); /* "..._swz" -> "..._lin" */
    sl_bench_row(b, name, shape, path, us, (double)set, graph_us, extra[0] ? extra : NULL);
  }
  free_ctx(&c);
  sl_kq_set_unroll_override(0);
  sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
  sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
  sl_kq_set_full_grid_waves_override(0);
  sl_kq_set_deq_blocks_override(0);
  sl_kq_set_warps_override(0);
  sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
  sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
  sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
  sl_kq_set_min_blocks_override(0);
  sl_kq_set_act16_pack_override(0);
  sl_kq_set_q8_line_override(SL_KQ_Q8_LINE_TABLE);
  return s;
}

sl_status_t sl_bench_kernels_quant(sl_bench_t *b) {
  bool gpu = sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA;
  static const int full_t[] = {1, 16, 128, 1024, 8192, 32768}, full_h[] = {2048, 4096, 7168};
  static const int quick_gpu_t[] = {1, 16, 8192}, quick_gpu_h[] = {7168};
  static const int cpu_t[] = {1, 16}, cpu_h[] = {2048};
  const int *ts = full_t, *hs = full_h;
  int nt = 6, nh = 3;
  if (b->quick) {
    ts = gpu ? quick_gpu_t : cpu_t, nt = gpu ? 3 : 2;
    hs = gpu ? quick_gpu_h : cpu_h, nh = 1;
  }
  sl_bench_header(b, "Activations, quantization, router (bf16 inputs; act: [T, 2I] -> [T, I]; quant: "
                     "MX/NV scales swizzled (_swz) and linear (_lin); bytes = inputs read once + outputs and scales "
                     "written once)");
  for (int op = 0; op < OP_COUNT; op++)
    for (int h = 0; h < nh; h++) {
      if (is_router((op_t)op) && h > 0) continue; /* the router's shape is T x experts */
      for (int t = 0; t < nt; t++)
        if (sl_bench_tokens_selected(b, ts[t]) && sl_bench_hidden_selected(b, hs[h])) SL_CHECK(bench_one(b, (op_t)op, ts[t], hs[h]));
    }
  return SL_OK;
}
