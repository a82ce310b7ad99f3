/* MoE router host side: argument checks, JIT spec and launch, and the CPU reference. The
 * reference is the definition: scores are ordered by the uint32 keys of kernels/router_order.h
 * (fp32 order; -0 ties +0; NaN below -inf; ties to the lower id), and its floating-point
 * operations are the kernel's, in the kernel's order (the per-lane partial sums and the
 * butterfly of the softmax denominator included), with the reproducible expf of
 * kernels/quant_formats.h, so ids and weights agree bit for bit with the GPU. */
#include "kernels/router.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kq_launch.h"
#include "kernels/quant_formats.h"
#include "kernels/router_order.h"

static bool float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}

static sl_status_t check_args(const sl_router_args_t *a) {
  if (a->kind != SL_ROUTER_SOFTMAX_TOPK && a->kind != SL_ROUTER_SIGMOID_GROUPED)
    return SL_ERR(SL_ERR_INVALID, "router: unknown kind %d", (int)a->kind);
  if (a->num_tokens < 0 || a->num_experts < 1 || a->num_experts > 1024)
    return SL_ERR(SL_ERR_INVALID, "router: %d tokens x %d experts (1..1024 experts)", a->num_tokens, a->num_experts);
  if (a->top_k < 1 || a->top_k > 32 || a->top_k > a->num_experts)
    return SL_ERR(SL_ERR_INVALID, "router: top_k %d must be in 1..min(32, experts %d)", a->top_k, a->num_experts);
  if (!float_dtype(a->logits_dtype))
    return SL_ERR(SL_ERR_INVALID, "router: logits dtype %s not supported (bf16, f16, f32)",
                  sl_dtype_name(a->logits_dtype));
  if (a->kind == SL_ROUTER_SIGMOID_GROUPED) {
    int ng = a->num_groups;
    if (ng < 1 || ng > 32 || a->num_experts % ng || a->num_experts / ng < 2)
      return SL_ERR(SL_ERR_INVALID, "router: %d experts can't form %d groups (1..32) of >= 2 experts",
                    a->num_experts, ng);
    if (a->topk_groups < 1 || a->topk_groups > ng || a->top_k > a->topk_groups * (a->num_experts / ng))
      return SL_ERR(SL_ERR_INVALID, "router: topk_groups %d of %d groups can't hold top_k %d experts", a->topk_groups,
                    ng, a->top_k);
  }
  return SL_OK;
}

static float scaling_of(const sl_router_args_t *a) {
  return a->routed_scaling == 0.0f ? 1.0f : a->routed_scaling;
}

float sl_router_scaling(const sl_router_args_t *a) {
  return scaling_of(a);
}

/* The k largest keys, ties to the lower index, in descending order. Entries taken are set to
 * SL_ROUTER_KEY_NONE (below every score), so `key` is consumed; callers guarantee at least k
 * entries above SL_ROUTER_KEY_NONE, hence every pick is a real, distinct entry. */
static void select_topk(uint32_t *key, int n, int k, int32_t *ids) {
  for (int r = 0; r < k; r++) {
    int bi = 0;
    for (int e = 1; e < n; e++)
      if (key[e] > key[bi]) bi = e;
    ids[r] = bi;
    key[bi] = SL_ROUTER_KEY_NONE;
  }
}

sl_status_t sl_router_ref(const sl_router_args_t *a) {
  SL_CHECK(check_args(a));
  const int E = a->num_experts, K = a->top_k, NE = SL_ROUTER_NE(E);
  float *x = malloc(sizeof(float) * E * 3);
  uint32_t *key = malloc(sizeof(uint32_t) * E);
  if (!x || !key) {
    free(x), free(key);
    return SL_ERR(SL_ERR_NOMEM, "router reference: %d experts", E);
  }
  float *p = x + E, *b = x + 2 * E;
  for (int t = 0; t < a->num_tokens; t++) {
    int32_t *ids = a->topk_ids + (size_t)t * K;
    float *w = a->topk_weights + (size_t)t * K;
    for (int e = 0; e < E; e++)
      x[e] = sl_load_f32(a->logits, a->logits_dtype, (size_t)t * E + e);
    if (a->kind == SL_ROUTER_SOFTMAX_TOPK) {
      /* the maximum by key; softmax is monotone, so the ids are the top-k logits */
      uint32_t kmax = SL_ROUTER_KEY_NONE;
      for (int e = 0; e < E; e++) {
        key[e] = sl_router_key(x[e]);
        if (key[e] > kmax) kmax = key[e];
      }
      const float mx = sl_router_key_value(kmax);
      /* The kernel's sum: lane l adds its NE experts in order, then a butterfly over 32 lanes. */
      float lane_sum[32];
      for (int l = 0; l < 32; l++) {
        lane_sum[l] = 0.0f;
        for (int j = 0; j < NE; j++) {
          int e = l * NE + j;
          float ex = e < E ? sl_qf_expf(x[e] - mx) : 0.0f;
          if (e < E) p[e] = ex;
          lane_sum[l] = SL_QF_ADD(lane_sum[l], ex);
        }
      }
      for (int m = 16; m >= 1; m >>= 1) {
        float nxt[32];
        for (int l = 0; l < 32; l++)
          nxt[l] = SL_QF_ADD(lane_sum[l], lane_sum[l ^ m]);
        for (int l = 0; l < 32; l++)
          lane_sum[l] = nxt[l];
      }
      select_topk(key, E, K, ids);
      for (int r = 0; r < K; r++)
        w[r] = SL_QF_DIV(p[ids[r]], lane_sum[0]);
    } else {
      const int G = a->num_groups, GS = E / G;
      for (int e = 0; e < E; e++) {
        p[e] = sl_qf_sigmoidf(x[e]);
        b[e] = a->correction_bias ? SL_QF_ADD(p[e], a->correction_bias[e]) : p[e];
        key[e] = sl_router_key(b[e]);
      }
      /* group score: the values of the group's two largest keys, added */
      uint32_t gkey[32];
      for (int g = 0; g < G; g++) {
        uint32_t t1 = SL_ROUTER_KEY_NONE, t2 = SL_ROUTER_KEY_NONE;
        for (int e = g * GS; e < (g + 1) * GS; e++) {
          if (key[e] > t1)
            t2 = t1, t1 = key[e];
          else if (key[e] > t2)
            t2 = key[e];
        }
        gkey[g] = sl_router_key(SL_QF_ADD(sl_router_key_value(t1), sl_router_key_value(t2)));
      }
      int32_t gids[32];
      select_topk(gkey, G, a->topk_groups, gids);
      bool keep[32] = {false};
      for (int r = 0; r < a->topk_groups; r++)
        keep[gids[r]] = true;
      for (int e = 0; e < E; e++)
        if (!keep[e / GS]) key[e] = SL_ROUTER_KEY_NONE;
      select_topk(key, E, K, ids);
      for (int r = 0; r < K; r++)
        w[r] = p[ids[r]]; /* the unbiased scores */
    }
    float norm = 0.0f, sc = scaling_of(a);
    for (int r = 0; r < K; r++)
      norm = SL_QF_ADD(norm, w[r]);
    for (int r = 0; r < K; r++)
      w[r] = SL_QF_MUL(a->renormalize ? SL_QF_DIV(w[r], norm) : w[r], sc);
  }
  free(x), free(key);
  return SL_OK;
}

/* ---- GPU ------------------------------------------------------------------------------------ */

static sl_status_t define_constants(int kind, int E, int K, int G, int TG, sl_dtype_t dt, sl_jit_spec_t *spec) {
  if (kind == SL_ROUTER_SOFTMAX_TOPK) G = TG = 1;
  SL_CHECK(sl_jit_spec_define(spec, "KIND", "%d", kind));
  SL_CHECK(sl_jit_spec_define(spec, "NUM_EXPERTS", "%d", E));
  SL_CHECK(sl_jit_spec_define(spec, "TOPK", "%d", K));
  SL_CHECK(sl_jit_spec_define(spec, "NUM_GROUPS", "%d", G));
  SL_CHECK(sl_jit_spec_define(spec, "TOPK_GROUPS", "%d", TG));
  return sl_jit_spec_define(spec, "DTYPE", "%d", (int)dt);
}

sl_status_t sl_router_define_constants(const sl_router_args_t *a, sl_jit_spec_t *spec) {
  return define_constants((int)a->kind, a->num_experts, a->top_k, a->num_groups, a->topk_groups, a->logits_dtype,
                          spec);
}

static sl_status_t spec_at(int kind, int E, int K, int G, int TG, sl_dtype_t dt, int warps, sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "kernels/router.cu", "sl_router_kernel");
  SL_CHECK(define_constants(kind, E, K, G, TG, dt, spec));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", warps));
  return SL_OK;
}

sl_status_t sl_router_spec(const sl_router_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec) {
  SL_CHECK(spec_at((int)a->kind, a->num_experts, a->top_k, a->num_groups, a->topk_groups, a->logits_dtype,
                   sl_kq_table_warps(arch, sm_count, a->num_tokens), spec));
  return sl_kq_pdl_define(spec, a->pdl, arch);
}

sl_status_t sl_router_check_gpu(const sl_router_args_t *a) {
  SL_CHECK(check_args(a));
  if (a->kind == SL_ROUTER_SIGMOID_GROUPED) {
    int NE = (a->num_experts + 31) / 32, GS = a->num_experts / a->num_groups, lpg = GS / NE;
    if (GS % NE || (lpg & (lpg - 1)))
      return SL_ERR(SL_ERR_UNSUPPORTED,
                    "router on the GPU: groups of %d experts must be a power of two of lanes of %d experts "
                    "(%d experts, %d groups); use the CPU backend or another grouping",
                    GS, NE, a->num_experts, a->num_groups);
  }
  return SL_OK;
}

sl_status_t sl_router(sl_device_t *dev, const sl_router_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_router_ref(a);
  SL_CHECK(sl_router_check_gpu(a));
  if (a->num_tokens == 0) return SL_OK;
  const sl_device_info_t *info = sl_device_info(dev);
  sl_jit_spec_t spec;
  SL_CHECK(sl_router_spec(a, info->arch, info->sm_count, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  const void *logits = a->logits;
  const float *bias = a->kind == SL_ROUTER_SIGMOID_GROUPED ? a->correction_bias : NULL;
  int32_t *ids = a->topk_ids;
  float *w = a->topk_weights, sc = scaling_of(a);
  int t = a->num_tokens, renorm = a->renormalize;
  void *args[] = {&logits, &bias, &ids, &w, &t, &renorm, &sc};
  return sl_kq_launch_waves(dev, k, sl_kq_table_warps(info->arch, info->sm_count, t), 1, t,
                            SL_KQ_FULL_GRID_WAVES_ROUTER, sl_kq_pdl(a->pdl, info->arch), stream, args);
}

/* Configuration points: Qwen3-MoE (128 experts, top 8), Mixtral (8, top 2), DeepSeek-V2-Lite
 * (64, top 6) softmax; DeepSeek-V3 (256 experts, 8 groups, top 4 groups, top 8) sigmoid;
 * bf16/f16/f32 logits; decode and prefill warps. */
sl_status_t sl_router_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const struct {
    int kind, E, K, G, TG;
  } cfgs[] = {
      {SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1},
      {SL_ROUTER_SOFTMAX_TOPK, 8, 2, 1, 1},
      {SL_ROUTER_SOFTMAX_TOPK, 64, 6, 1, 1},
      {SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4},
  };
  static const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const sl_kq_arch_cfg_t *ac = sl_kq_arch_cfg(arch);
  int warps[2] = {ac->decode_warps, ac->prefill_warps};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
    for (int d = 0; d < 3; d++)
      for (int w = 0; w < 2; w++) {
        sl_jit_spec_t spec;
        SL_CHECK(spec_at(cfgs[c].kind, cfgs[c].E, cfgs[c].K, cfgs[c].G, cfgs[c].TG, dtypes[d], warps[w], &spec));
        SL_CHECK(fn(&spec, user));
        if (w == 0 && arch >= SL_ARCH_HOPPER) { /* decode as a programmatic dependent (`pdl`) */
          SL_CHECK(sl_kq_pdl_define(&spec, true, arch));
          SL_CHECK(fn(&spec, user));
        }
      }
  return SL_OK;
}
