/* The local MoE layer: buffers, and router GEMM -> router -> dispatch -> FFN -> combine. */
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_combine.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"

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
  void *dispatch_ws, *ffn_ws;
  size_t dispatch_ws_bytes, ffn_ws_bytes;
  const int32_t *last_ids;
  const float *last_weights;
};

void sl_moe_layer_destroy(sl_moe_layer_t *l) {
  if (!l) return;
  void *bufs[] = {l->logits, l->topk_ids, l->topk_weights, l->expert_x, l->expert_y,
                  l->counts, l->slots, l->dispatch_ws, l->ffn_ws};
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
