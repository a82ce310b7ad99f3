/* The local MoE layer: buffers, and router GEMM -> router -> dispatch -> FFN -> combine. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_combine.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"
#include "runtime/sl_config.h"
#include "runtime/sl_log.h"

struct sl_moe_layer {
  sl_device_t *dev;
  sl_moe_layer_config_t cfg;
  int max_tokens, local;
  float *logits;          /* [Tmax, E] */
  int32_t *topk_ids;      /* [Tmax, K] */
  float *topk_weights;    /* [Tmax, K] */
  void *expert_x, *expert_y; /* [E_local, Tmax, H] bf16 */
  int32_t *counts;        /* [E_local] */
  int32_t *slots;         /* [Tmax, K] */
  void *act;              /* [K, I] 32-bit words: the decode kernel's activations (bf16, or tagged words) */
  uint64_t *tagged;       /* [E] (launch tag << 32 | fp32 logit): the decode kernel's router logits */
  uint32_t *calls;        /* the decode kernel's launch counter (the tag of the last launch) */
  void *dispatch_ws, *ffn_ws;
  size_t dispatch_ws_bytes, ffn_ws_bytes;
  const int32_t *last_ids;
  const float *last_weights;
};

void sl_moe_layer_destroy(sl_moe_layer_t *l) {
  if (!l) return;
  void *bufs[] = {l->logits, l->topk_ids, l->topk_weights, l->expert_x, l->expert_y,  l->counts,
                  l->slots,  l->act,      l->tagged,       l->calls,    l->dispatch_ws, l->ffn_ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) sl_device_free(l->dev, bufs[i]);
  free(l);
}

sl_status_t sl_moe_layer_create(sl_device_t *dev, const sl_moe_layer_config_t *cfg, int max_tokens,
                                sl_moe_layer_t **out) {
  *out = NULL;
  const int local = cfg->expert_end - cfg->expert_begin;
  if (max_tokens < 1 || cfg->num_experts < 1 || cfg->top_k < 1 || cfg->top_k > cfg->num_experts || local < 1 ||
      cfg->expert_begin < 0 || cfg->expert_end > cfg->num_experts || cfg->hidden % 8 || cfg->inter % 8 ||
      !cfg->w_gate_up || !cfg->w_down)
    return SL_ERR(SL_ERR_INVALID,
                  "moe layer: bad config (E %d, K %d, H %d, I %d, experts [%d, %d), max_tokens %d, weights %s)",
                  cfg->num_experts, cfg->top_k, cfg->hidden, cfg->inter, cfg->expert_begin, cfg->expert_end,
                  max_tokens, cfg->w_gate_up && cfg->w_down ? "set" : "missing");
  sl_moe_layer_t *l = calloc(1, sizeof *l);
  if (!l) return SL_ERR(SL_ERR_NOMEM, "moe layer");
  l->dev = dev;
  l->cfg = *cfg;
  l->max_tokens = max_tokens;
  l->local = local;
  const size_t T = (size_t)max_tokens, K = (size_t)cfg->top_k, H = (size_t)cfg->hidden;
  const size_t rows = (size_t)local * T;
  l->dispatch_ws_bytes = sl_moe_dispatch_workspace_bytes(max_tokens, cfg->top_k, local);
  l->ffn_ws_bytes = sl_moe_ffn_workspace_bytes(local, max_tokens, max_tokens, cfg->top_k, cfg->hidden, cfg->inter);
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(sl_device_malloc(dev, T * cfg->num_experts * 4, (void **)&l->logits), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, T * K * 4, (void **)&l->topk_ids), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, T * K * 4, (void **)&l->topk_weights), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * H * 2, &l->expert_x), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * H * 2, &l->expert_y), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)local * 4, (void **)&l->counts), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, T * K * 4, (void **)&l->slots), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, K * (size_t)cfg->inter * 4, &l->act), s, fail);
  SL_CHECK_GOTO(sl_memset(dev, l->act, 0, K * (size_t)cfg->inter * 4, NULL), s, fail); /* tag 0: none */
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)cfg->num_experts * 8, (void **)&l->tagged), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, 4, (void **)&l->calls), s, fail);
  SL_CHECK_GOTO(sl_memset(dev, l->tagged, 0, (size_t)cfg->num_experts * 8, NULL), s, fail); /* tag 0: none */
  SL_CHECK_GOTO(sl_memset(dev, l->calls, 0, 4, NULL), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, l->dispatch_ws_bytes, &l->dispatch_ws), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, l->ffn_ws_bytes, &l->ffn_ws), s, fail);
  SL_CHECK_GOTO(sl_moe_dispatch_workspace_init(dev, l->dispatch_ws, l->dispatch_ws_bytes, NULL), s, fail);
  SL_CHECK_GOTO(sl_device_sync(dev), s, fail);
  *out = l;
  return SL_OK;
fail:
  sl_moe_layer_destroy(l);
  return s;
}

/* ---- the one-kernel decode layer (kernels/moe_layer_decode.cu) ------------------------------ */

/* The decode kernel's shapes (kernels/moe_layer_decode.cu has the constants' meaning). */
typedef struct {
  int warps, pairs, xsmem; /* compute warps, pairs per step, x in shared memory */
  int tag;                 /* ACTTAG: tagged activations (0: the grid barrier) */
  int dmma;                /* the down phase on the tensor cores (with tag) */
  int prodrem;             /* PRODREM: up to this many pairs past the last full round on the copy warp */
  int idsfirst;            /* IDSFIRST: the top-k's ids before the stream, its weights on the copy warp */
  int dlate;               /* DLATE: the down rows asked for once gate_up is done, by the last compute warp */
  int dlw;                 /* DLW: down-row copies in flight per block (DLATE; 0 = all) */
} decode_shape_t;
static const decode_shape_t decode_shapes[SL_MOE_DECODE_VARIANTS] = {
    {15, 1, 1, 1, 0, 2, 1, 1, 6}, {12, 1, 0, 0, 0, 0, 0, 0, 0}, {7, 2, 0, 0, 0, 0, 0, 0, 0},
    {15, 1, 1, 0, 0, 0, 0, 0, 0}, {15, 1, 1, 1, 1, 0, 0, 0, 0}, {15, 1, 1, 1, 0, 0, 0, 0, 0},
    {15, 1, 1, 1, 0, 2, 0, 0, 0}, {15, 1, 1, 1, 0, 0, 1, 0, 0}, {15, 1, 1, 1, 0, 2, 1, 0, 0},
    {15, 1, 1, 1, 0, 2, 1, 1, 0}};

static sl_router_args_t router_of(const sl_moe_layer_config_t *c, int T) {
  return (sl_router_args_t){.kind = c->router_kind, .num_tokens = T, .num_experts = c->num_experts,
                            .top_k = c->top_k, .renormalize = c->renormalize, .num_groups = c->num_groups,
                            .topk_groups = c->topk_groups, .routed_scaling = c->routed_scaling,
                            .logits_dtype = SL_DTYPE_F32, .correction_bias = c->correction_bias};
}

static int decode_cut = 0;
bool sl_moe_layer_set_decode_cut(int mask) {
  if (mask < 0 || mask > 15 || ((mask & 8) && !(mask & 4))) return false;
  decode_cut = mask;
  return true;
}

static sl_status_t decode_spec(const sl_moe_layer_config_t *c, int variant, bool prof, sl_jit_spec_t *spec);
sl_status_t sl_moe_layer_decode_spec(const sl_moe_layer_config_t *c, int variant, sl_jit_spec_t *spec) {
  return decode_spec(c, variant, false, spec);
}
static sl_status_t decode_spec(const sl_moe_layer_config_t *c, int variant, bool prof, sl_jit_spec_t *spec) {
  if (variant < 0 || variant >= SL_MOE_DECODE_VARIANTS)
    return SL_ERR(SL_ERR_INVALID, "moe layer: decode variant %d (0..%d)", variant, SL_MOE_DECODE_VARIANTS - 1);
  if (decode_shapes[variant].dmma && c->inter % 64)
    return SL_ERR(SL_ERR_UNSUPPORTED, "moe layer: decode variant %d (tensor-core down phase) needs I %% 64 == 0, I = %d",
                  variant, c->inter);
  sl_router_args_t r = router_of(c, 1);
  sl_jit_spec_init(spec, "kernels/moe_layer_decode.cu", "sl_moe_decode_layer");
  SL_CHECK(sl_jit_spec_define(spec, "HIDDEN", "%d", c->hidden));
  SL_CHECK(sl_jit_spec_define(spec, "INTER", "%d", c->inter));
  const decode_shape_t *d = &decode_shapes[variant];
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", d->warps));
  SL_CHECK(sl_jit_spec_define(spec, "PP", "%d", d->pairs));
  if (d->xsmem) SL_CHECK(sl_jit_spec_define(spec, "XSMEM", "1"));
  if (d->tag) SL_CHECK(sl_jit_spec_define(spec, "ACTTAG", "1"));
  if (d->dmma) SL_CHECK(sl_jit_spec_define(spec, "DMMA", "1"));
  if (d->prodrem) SL_CHECK(sl_jit_spec_define(spec, "PRODREM", "%d", d->prodrem));
  if (d->idsfirst) SL_CHECK(sl_jit_spec_define(spec, "IDSFIRST", "1"));
  if (d->dlate) SL_CHECK(sl_jit_spec_define(spec, "DLATE", "%d", d->dlate));
  if (d->dlw > 0) SL_CHECK(sl_jit_spec_define(spec, "DLW", "%d", d->dlw));
  if (prof) SL_CHECK(sl_jit_spec_define(spec, "PROF", "1"));
  if (decode_cut) SL_CHECK(sl_jit_spec_define(spec, "CUT", "%d", decode_cut));
  return sl_router_define_constants(&r, spec);
}

/* Dynamic shared memory of the decode kernel on `sms` blocks (kernels/moe_layer_decode.cu):
 * down rows [K][cmax][I] bf16 (cmax = ceil(H / sms) columns per block), residual [cmax4] f32,
 * expert outputs [K][cmax4][split] f32 (cmax4 = cmax rounded up to 4; split = 1, or in the DMMA
 * shapes the parts of I), in the XSMEM shapes x as fp32 packets (ceil(H / 256) x 256 floats),
 * and in the DMMA shapes each warp's activations (64 x windows per part, bf16). */
static size_t decode_smem(const sl_moe_layer_config_t *c, int variant, int sms) {
  const decode_shape_t *d = &decode_shapes[variant];
  const size_t K = (size_t)c->top_k, cmax = (size_t)((c->hidden + sms - 1) / sms), cmax4 = (cmax + 3) & ~(size_t)3;
  const size_t nwin = (size_t)c->inter / 64, split = d->dmma ? (nwin + 5) / 6 : 1, wph = (nwin + split - 1) / split;
  const size_t xs = d->xsmem ? (size_t)((c->hidden + 255) / 256) * 256 * 4 : 0;
  const size_t acts = d->dmma ? (size_t)(d->warps + 1) * 64 * wph * 2 : 0;
  return K * cmax * c->inter * 2 + cmax4 * 4 + K * cmax4 * split * 4 + xs + acts;
}

/* Why the decode kernel does not apply to this call (NULL: it does). */
static const char *decode_refusal(const sl_moe_layer_t *l, const sl_moe_layer_args_t *a, unsigned stages) {
  const sl_moe_layer_config_t *c = &l->cfg;
  const sl_device_info_t *info = sl_device_info(l->dev);
  if (sl_device_backend(l->dev) != SL_BACKEND_CUDA) return "not a GPU";
  if (info->arch < SL_ARCH_HOPPER) return "needs sm_90+ (bulk copies)";
  if (a->num_tokens != 1) return "T != 1";
  if (a->topk_ids) return "routing given by the caller";
  if (stages != SL_MOE_STAGE_ALL) return "a subset of stages";
  if (c->hidden > 2048) return "H > 2048";
  if (decode_shapes[a->decode_variant].dmma && c->inter % 64) return "this variant needs I % 64 == 0";
  if (((uintptr_t)a->x & 15) != 0) return "x not 16-byte aligned";
  if (c->router_kind == SL_ROUTER_SIGMOID_GROUPED) {
    const int NE = (c->num_experts + 31) / 32, GS = c->num_groups > 0 ? c->num_experts / c->num_groups : 0;
    if (c->num_groups < 1 || c->num_experts % c->num_groups || GS % NE || ((GS / NE) & (GS / NE - 1)))
      return "grouping the GPU router does not support";
  }
  /* + the static shared memory: the logits (4 E bytes) and < 1 KB of small arrays */
  if (decode_smem(c, a->decode_variant, info->sm_count) + 1024 + (size_t)c->num_experts * 4 >
      info->shared_mem_per_block_optin)
    return "shared memory";
  return NULL;
}

static sl_status_t decode_launch(sl_moe_layer_t *l, const sl_moe_layer_args_t *a, sl_stream_t *stream) {
  const sl_moe_layer_config_t *c = &l->cfg;
  const int sms = sl_device_info(l->dev)->sm_count;
  sl_jit_spec_t spec;
  SL_CHECK(decode_spec(c, a->decode_variant, a->decode_profile != NULL, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(l->dev, &spec, &k));
  const unsigned smem = (unsigned)decode_smem(c, a->decode_variant, sms);
  SL_CHECK(sl_kernel_set_max_shared(k, smem));
  const int threads = (decode_shapes[a->decode_variant].warps + 1) * 32; /* + the copy-issuing warp */
  int per_sm = 0;
  SL_CHECK(sl_kernel_occupancy(k, threads, smem, &per_sm));
  if (per_sm < 1)
    return SL_ERR(SL_ERR_UNSUPPORTED, "moe layer: the decode kernel does not fit an SM (%u bytes of shared memory)",
                  smem);
  const void *x = a->x, *wr = c->w_router, *bias = c->router_kind == SL_ROUTER_SIGMOID_GROUPED ? c->correction_bias : NULL;
  int renorm = c->renormalize;
  const sl_router_args_t r = router_of(c, 1);
  float scaling = sl_router_scaling(&r);
  const void *wgu = c->w_gate_up, *wd = c->w_down, *res = a->residual;
  int begin = c->expert_begin, end = c->expert_end;
  void *out = a->out, *tagged = l->tagged, *calls = l->calls, *ids = l->topk_ids, *wts = l->topk_weights,
       *counts = l->counts, *act = l->act, *state = l->dispatch_ws;
  unsigned long long timeout_ns = (unsigned long long)sl_config()->timeout_ms * 1000000ull;
  unsigned long long *prof = a->decode_profile;
  int absent = a->decode_absent_block - 1; /* tests: 0 none */
  void *args[] = {&x,   &wr,     &bias,  &renorm, &scaling, &wgu,    &wd,  &begin, &end,       &res,
                  &out, &tagged, &calls, &ids,    &wts,     &counts, &act, &state, &timeout_ns, &absent, &prof};
  const int pdl = a->decode_pdl == SL_MOE_FUSE_AUTO ? (SL_MOE_LAYER_DECODE_PDL_AUTO ? SL_MOE_FUSE_ON : SL_MOE_FUSE_OFF)
                                                    : a->decode_pdl;
  sl_launch_t launch = {.grid = {(unsigned)sms}, .block = {(unsigned)threads}, .shared_bytes = smem,
                        .stream = stream, .cooperative = true, .pdl = pdl == SL_MOE_FUSE_ON};
  return sl_kernel_launch(k, &launch, args);
}

sl_status_t sl_moe_layer_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  if (arch < SL_ARCH_HOPPER) return SL_OK;
  /* Qwen3-30B-A3B (every variant, each with its PROF build), and the grouped-router shapes of
   * tests/gpu/test_moe_layer_decode.c */
  sl_moe_layer_config_t q = {.num_experts = 128, .top_k = 8, .hidden = 2048, .inter = 768, .expert_end = 128,
                             .router_kind = SL_ROUTER_SOFTMAX_TOPK, .renormalize = true};
  sl_jit_spec_t spec;
  for (int v = 0; v < SL_MOE_DECODE_VARIANTS; v++) {
    SL_CHECK(sl_moe_layer_decode_spec(&q, v, &spec));
    SL_CHECK(fn(&spec, user));
    SL_CHECK(decode_spec(&q, v, true, &spec)); /* the benchmark's phase-stamping builds */
    SL_CHECK(fn(&spec, user));
  }
  sl_moe_layer_config_t g = {.num_experts = 64, .top_k = 6, .hidden = 1024, .inter = 384, .expert_end = 64,
                             .router_kind = SL_ROUTER_SIGMOID_GROUPED, .num_groups = 8, .topk_groups = 3,
                             .routed_scaling = 2.5f};
  SL_CHECK(sl_moe_layer_decode_spec(&g, SL_MOE_DECODE_15X1_XS_BAR, &spec));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_moe_layer_decode_spec(&g, SL_MOE_DECODE_15X1_XS_TAG, &spec));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_moe_layer_decode_spec(&g, SL_MOE_DECODE_15X1_XS_TAG_PR_IF, &spec));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_moe_layer_decode_spec(&g, SL_MOE_DECODE_15X1_XS_TAG_MMA, &spec));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_moe_layer_decode_spec(&g, SL_MOE_DECODE_15X1_XS_TAG_PR_IF_DL, &spec));
  return fn(&spec, user);
}

sl_status_t sl_moe_layer_forward(sl_moe_layer_t *l, const sl_moe_layer_args_t *a, sl_stream_t *stream) {
  const sl_moe_layer_config_t *c = &l->cfg;
  const int T = a->num_tokens;
  if (T < 0 || T > l->max_tokens)
    return SL_ERR(SL_ERR_INVALID, "moe layer: %d tokens outside [0, %d] (max_tokens at creation)", T, l->max_tokens);
  const int capacity = a->capacity ? a->capacity : sl_moe_dropless_capacity(T);
  if (capacity < 1 || capacity > l->max_tokens)
    return SL_ERR(SL_ERR_INVALID, "moe layer: capacity %d outside [1, %d]", capacity, l->max_tokens);
  if ((a->topk_ids == NULL) != (a->topk_weights == NULL))
    return SL_ERR(SL_ERR_INVALID, "moe layer: pass both topk_ids and topk_weights, or neither");
  if (!a->topk_ids && !c->w_router) return SL_ERR(SL_ERR_INVALID, "moe layer: no router weights and no routing given");
  if (a->fuse_small < SL_MOE_FUSE_AUTO || a->fuse_small > SL_MOE_FUSE_ON)
    return SL_ERR(SL_ERR_INVALID, "moe layer: fuse_small %d (0 auto, 1 off, 2 on)", a->fuse_small);
  if (a->decode_kernel < SL_MOE_FUSE_AUTO || a->decode_kernel > SL_MOE_FUSE_ON || a->decode_variant < 0 ||
      a->decode_variant >= SL_MOE_DECODE_VARIANTS || a->decode_pdl < SL_MOE_FUSE_AUTO || a->decode_pdl > SL_MOE_FUSE_ON)
    return SL_ERR(SL_ERR_INVALID,
                  "moe layer: decode_kernel %d (0 auto, 1 off, 2 on), decode_variant %d (0..%d), decode_pdl %d (0..2)",
                  a->decode_kernel, a->decode_variant, SL_MOE_DECODE_VARIANTS - 1, a->decode_pdl);
  const bool cpu = sl_device_backend(l->dev) != SL_BACKEND_CUDA;
  const int32_t *ids = a->topk_ids;
  const float *weights = a->topk_weights;
  sl_moe_dispatch_args_t da = {.num_tokens = T, .hidden = c->hidden, .top_k = c->top_k,
                               .num_experts = c->num_experts, .expert_begin = c->expert_begin,
                               .expert_end = c->expert_end, .capacity = capacity, .x = a->x, .topk_ids = ids,
                               .expert_x = l->expert_x, .expert_counts = l->counts, .slots = l->slots,
                               .workspace = l->dispatch_ws, .workspace_bytes = l->dispatch_ws_bytes,
                               .force_path = a->force_path, .path_taken = a->path_taken};
  /* Small-T fusion (the header says what; kernels/NOTES.md "Expert FFN and layer" why). */
  const int fuse = a->fuse_small == SL_MOE_FUSE_AUTO ? (SL_MOE_LAYER_FUSE_SMALL_AUTO ? SL_MOE_FUSE_ON : SL_MOE_FUSE_OFF)
                                                     : a->fuse_small;
  bool fused = false;
  sl_router_args_t ra = {0};
  const unsigned stages = a->stages ? a->stages : SL_MOE_STAGE_ALL;
  if (stages & ~(unsigned)SL_MOE_STAGE_ALL) return SL_ERR(SL_ERR_INVALID, "moe layer: stages 0x%x", stages);
  const int decode = a->decode_kernel == SL_MOE_FUSE_AUTO
                         ? (SL_MOE_LAYER_DECODE_KERNEL_AUTO ? SL_MOE_FUSE_ON : SL_MOE_FUSE_OFF)
                         : a->decode_kernel;
  const char *refusal = decode == SL_MOE_FUSE_ON ? decode_refusal(l, a, stages) : "off";
  const bool one_kernel = refusal == NULL;
  if (a->decode_kernel == SL_MOE_FUSE_ON && refusal) /* asked for explicitly: say why not */
    SL_LOG_DEBUG("moe layer: decode_kernel on, but the one-kernel layer does not apply (%s): the launch chain runs",
                 refusal);
  if (a->decode_taken) *a->decode_taken = one_kernel;
  if (one_kernel) {
    if (a->fused_taken) *a->fused_taken = false;
    if (a->path_taken) *a->path_taken = SL_MOE_PATH_NONE; /* no dispatch */
    l->last_ids = l->topk_ids;
    l->last_weights = l->topk_weights;
    return decode_launch(l, a, stream);
  }
  if (!ids) {
    if (stages & SL_MOE_STAGE_LOGITS)
        SL_CHECK(sl_moe_gate_logits(l->dev, T, c->num_experts, c->hidden, a->x, c->w_router, l->logits, stream));
    ra = (sl_router_args_t){.kind = c->router_kind, .num_tokens = T, .num_experts = c->num_experts,
                            .top_k = c->top_k, .renormalize = c->renormalize, .num_groups = c->num_groups,
                            .topk_groups = c->topk_groups, .routed_scaling = c->routed_scaling,
                            .logits_dtype = SL_DTYPE_F32, .logits = l->logits, .correction_bias = c->correction_bias,
                            .topk_ids = l->topk_ids, .topk_weights = l->topk_weights};
    ids = l->topk_ids;
    weights = l->topk_weights;
    da.topk_ids = ids;
    da.route = &ra;
    fused = !cpu && fuse == SL_MOE_FUSE_ON &&
            sl_moe_dispatch_route_fusable(&da, sl_device_info(l->dev)->sm_count);
    if (!fused) {
      da.route = NULL;
      if (T > 0 && (stages & SL_MOE_STAGE_TOPK)) SL_CHECK(sl_router(l->dev, &ra, stream));
    }
  }
  if (a->fused_taken) *a->fused_taken = fused;
  l->last_ids = ids;
  l->last_weights = weights;
  /* Fused: the dispatch kernel follows the router logits kernel directly (PDL edge 1). */
  da.route_pdl = fused;
  if (stages & SL_MOE_STAGE_DISPATCH) SL_CHECK(sl_moe_dispatch(l->dev, &da, stream));
  if (cpu && (stages & SL_MOE_STAGE_DISPATCH)) SL_CHECK(sl_moe_dispatch_check(l->dev, l->dispatch_ws, stream)); /* free on the CPU */
  sl_moe_ffn_args_t fa = {.num_local_experts = l->local, .capacity = capacity, .hidden = c->hidden,
                          .inter = c->inter, .num_tokens = T, .top_k = c->top_k, .x = l->expert_x,
                          .expert_counts = l->counts, .w_gate_up = c->w_gate_up, .w_down = c->w_down,
                          .y = l->expert_y, .workspace = l->ffn_ws, .workspace_bytes = l->ffn_ws_bytes,
                          .exact_rows = a->allow_host_sync && capacity > SL_MOE_FFN_PADDED_MAX_ROWS,
                          .small_rows = a->ffn_small_rows, .gemv_variant = a->ffn_gemv_variant,
                          /* the bulk kernels' timeout record: sl_moe_layer_check reads it */
                          .error = &((sl_grid_barrier_state_t *)l->dispatch_ws)->error};
  if (stages & SL_MOE_STAGE_FFN) SL_CHECK(sl_moe_ffn(l->dev, &fa, stream));
  sl_moe_combine_args_t ca = {.num_tokens = T, .hidden = c->hidden, .top_k = c->top_k, .expert_out = l->expert_y,
                              .slots = l->slots, .topk_weights = weights, .residual = a->residual, .out = a->out,
                              .pdl = fused}; /* PDL edge 2: its slot/weight loads overlap the FFN's drain */
  return stages & SL_MOE_STAGE_COMBINE ? sl_moe_combine(l->dev, &ca, stream) : SL_OK;
}

sl_status_t sl_moe_layer_check(sl_moe_layer_t *l, sl_stream_t *stream) {
  return sl_moe_dispatch_check(l->dev, l->dispatch_ws, stream);
}

void sl_moe_layer_last_routing(const sl_moe_layer_t *l, const int32_t **topk_ids, const float **topk_weights) {
  *topk_ids = l->last_ids;
  *topk_weights = l->last_weights;
}

const int32_t *sl_moe_layer_expert_counts(const sl_moe_layer_t *l) { return l->counts; }
