/* The replicated dispatch computing the router top-k itself (sl_moe_dispatch_args_t.route,
 * kernels/router_topk.cuh) against the CPU: ids and weights equal sl_router_ref on the same
 * fp32 logits bit for bit (two NaN weights count as equal, as in test_router), and counts, slots and the dispatched rows equal
 * sl_moe_dispatch_ref on those ids. Qwen3-MoE softmax (128 experts, top 8, renormalized) and
 * DeepSeek-V3 grouped sigmoid (256 experts, 8 groups, top 4 groups, top 8, correction bias,
 * scaling 2.5) at T = 1, 5, 16, all experts local and an expert range (EP-style: pairs of
 * other ranks get slot -1); logits with exact ties (tie to the lower id) and a NaN; the
 * programmatic-dependent launch flag (eager: a plain serialised launch, same results); T = 17
 * (not fusable: sl_router then dispatch, same results); both replicated rankings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/moe_dispatch.h"
#include "kernels/router.h"
#include "unit/moe_test_util.h"

static sl_device_t *gpu;
static int g_rank;  /* sl_moe_dispatch_args_t.force_repl_rank for route_case */
static int g_warps; /* sl_moe_dispatch_args_t.force_repl_warps for route_case */

static int setup(void **s) {
  gpu = sl_test_open_gpu_or_skip(0);
  return 0;
}

static int teardown(void **s) {
  sl_device_close(gpu);
  return 0;
}

typedef struct {
  sl_router_kind_t kind;
  int E, K, G, TG, H;
  float scaling;
  bool bias;
} cfg_t;

static void route_case(const cfg_t *cf, int T, int begin, int end, bool pdl, bool want_fused, bool ties) {
  uint64_t rng = sl_test_seed() * 17 + (uint64_t)T * 101 + (uint64_t)cf->E + (uint64_t)begin + (ties ? 7 : 0);
  const int E = cf->E, K = cf->K, H = cf->H, local = end - begin, cap = T;
  const size_t nl = (size_t)T * E, np = (size_t)T * K, rows = (size_t)local * cap;
  float *logits = malloc(nl * 4), *bias = malloc((size_t)E * 4), *w_ref = malloc(np * 4), *w = malloc(np * 4);
  int32_t *ids_ref = malloc(np * 4), *ids = malloc(np * 4), *slots_ref = malloc(np * 4), *slots = malloc(np * 4);
  int32_t *counts_ref = malloc((size_t)local * 4), *counts = malloc((size_t)local * 4);
  uint16_t *x = malloc((size_t)T * H * 2), *ex_ref = calloc(rows * H, 2), *ex = malloc(rows * H * 2);
  assert_true(logits && bias && w_ref && w && ids_ref && ids && slots_ref && slots && counts_ref && counts && x &&
              ex_ref && ex);
  for (size_t i = 0; i < nl; i++) logits[i] = sl_test_rand_normal(&rng);
  for (int e = 0; e < E; e++) bias[e] = 0.1f * sl_test_rand_normal(&rng);
  if (ties && T > 1) {
    /* Token 0: every logit equal (ids 0..K-1 by the tie rule); token 1: one NaN, pairs of equal
     * values around the top. */
    for (int e = 0; e < E; e++) logits[e] = 0.5f;
    float *l1 = logits + E;
    l1[3] = NAN;
    for (int e = 10; e < 10 + 2 * K; e += 2) l1[e] = l1[e + 1] = 4.0f + (float)e * 0.01f;
  }
  moe_rand_bf16(&rng, (size_t)T * H, x);
  /* CPU: router then dispatch. */
  sl_router_args_t hr = {.kind = cf->kind, .num_tokens = T, .num_experts = E, .top_k = K, .renormalize = true,
                         .num_groups = cf->G, .topk_groups = cf->TG, .routed_scaling = cf->scaling,
                         .logits_dtype = SL_DTYPE_F32, .logits = logits, .correction_bias = cf->bias ? bias : NULL,
                         .topk_ids = ids_ref, .topk_weights = w_ref};
  SL_ASSERT_OK(sl_router_ref(&hr));
  const size_t ws_bytes = sl_moe_dispatch_workspace_bytes(T, K, local);
  void *hws = calloc(1, ws_bytes);
  assert_non_null(hws);
  sl_moe_dispatch_args_t hd = {.num_tokens = T, .hidden = H, .top_k = K, .num_experts = E, .expert_begin = begin,
                               .expert_end = end, .capacity = cap, .x = x, .topk_ids = ids_ref, .expert_x = ex_ref,
                               .expert_counts = counts_ref, .slots = slots_ref, .workspace = hws,
                               .workspace_bytes = ws_bytes};
  SL_ASSERT_OK(sl_moe_dispatch_ref(&hd));
  /* GPU: one dispatch with the route. */
  void *dl = moe_dev_copy(gpu, logits, nl * 4), *db = moe_dev_copy(gpu, bias, (size_t)E * 4);
  void *dx = moe_dev_copy(gpu, x, (size_t)T * H * 2), *dids = moe_dev_copy(gpu, NULL, np * 4);
  void *dw = moe_dev_copy(gpu, NULL, np * 4), *dslots = moe_dev_copy(gpu, NULL, np * 4);
  void *dcounts = moe_dev_copy(gpu, NULL, (size_t)local * 4), *dex = moe_dev_copy(gpu, NULL, rows * H * 2);
  void *ws = moe_dev_copy(gpu, NULL, ws_bytes);
  SL_ASSERT_OK(sl_moe_dispatch_workspace_init(gpu, ws, ws_bytes, NULL));
  sl_test_poison(gpu, dids, np * 4);
  sl_test_poison(gpu, dw, np * 4);
  sl_test_poison(gpu, dslots, np * 4);
  sl_test_poison(gpu, dcounts, (size_t)local * 4);
  sl_test_poison(gpu, dex, rows * H * 2);
  sl_router_args_t gr = hr;
  gr.logits = dl;
  gr.correction_bias = cf->bias ? db : NULL;
  gr.topk_ids = dids;
  gr.topk_weights = dw;
  bool fused = !want_fused;
  sl_moe_path_t path = SL_MOE_PATH_NONE;
  sl_moe_dispatch_args_t gd = {.num_tokens = T, .hidden = H, .top_k = K, .num_experts = E, .expert_begin = begin,
                               .expert_end = end, .capacity = cap, .x = dx, .topk_ids = dids, .expert_x = dex,
                               .expert_counts = dcounts, .slots = dslots, .workspace = ws,
                               .workspace_bytes = ws_bytes, .path_taken = &path, .route = &gr, .route_pdl = pdl,
                               .route_fused = &fused, .force_repl_rank = g_rank,
                               .force_repl_warps = g_warps};
  assert_int_equal(sl_moe_dispatch_route_fusable(&gd, sl_device_info(gpu)->sm_count), want_fused);
  SL_ASSERT_OK(sl_moe_dispatch(gpu, &gd, NULL));
  SL_ASSERT_OK(sl_moe_dispatch_check(gpu, ws, NULL));
  assert_int_equal(fused, want_fused);
  assert_int_equal(path, SL_MOE_PATH_REPLICATED);
  SL_ASSERT_OK(sl_memcpy(gpu, ids, dids, np * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, w, dw, np * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, slots, dslots, np * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, counts, dcounts, (size_t)local * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, ex, dex, rows * H * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(gpu));
  printf("  %s E=%d T=%d experts [%d, %d)%s%s: %s\n", cf->kind == SL_ROUTER_SOFTMAX_TOPK ? "softmax" : "grouped", E, T,
         begin, end, pdl ? " pdl" : "", ties ? " ties" : "", fused ? "fused" : "router + dispatch");
  assert_memory_equal(ids, ids_ref, np * 4);
  for (size_t p = 0; p < np; p++) /* bit for bit; two NaNs count as equal (payloads are not specified) */
    if (!(isnan(w[p]) && isnan(w_ref[p]))) assert_memory_equal(&w[p], &w_ref[p], 4);
  assert_memory_equal(slots, slots_ref, np * 4);
  assert_memory_equal(counts, counts_ref, (size_t)local * 4);
  for (size_t p = 0; p < np; p++) /* the rows that were written (the rest stays poisoned) */
    if (slots_ref[p] >= 0)
      assert_memory_equal(ex + (size_t)slots_ref[p] * H, ex_ref + (size_t)slots_ref[p] * H, (size_t)H * 2);
  void *bufs[] = {dl, db, dx, dids, dw, dslots, dcounts, dex, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_device_free(gpu, bufs[i]);
  free(hws);
  free(logits);
  free(bias);
  free(w_ref);
  free(w);
  free(ids_ref);
  free(ids);
  free(slots_ref);
  free(slots);
  free(counts_ref);
  free(counts);
  free(x);
  free(ex_ref);
  free(ex);
}

static const cfg_t qwen = {SL_ROUTER_SOFTMAX_TOPK, 128, 8, 1, 1, 2048, 0.0f, false};
static const cfg_t dsv3 = {SL_ROUTER_SIGMOID_GROUPED, 256, 8, 8, 4, 7168, 2.5f, true};

static void test_qwen3(void **s) {
  const int Ts[] = {1, 5, 16};
  for (int i = 0; i < 3; i++) {
    route_case(&qwen, Ts[i], 0, 128, false, true, false);
    route_case(&qwen, Ts[i], 0, 128, true, true, false);
    route_case(&qwen, Ts[i], 16, 32, true, true, false); /* an eighth of the experts */
  }
  route_case(&qwen, 16, 0, 128, true, true, true);
  g_rank = SL_MOE_REPL_RANK_SCAN; /* the replicated kernel's other ranking, with the top-k inside */
  route_case(&qwen, 5, 16, 32, true, true, false);
  route_case(&qwen, 16, 0, 128, false, true, true);
  g_rank = 0;
  g_warps = 4; /* forced warps per block (the host's choice at H=2048: 8) */
  route_case(&qwen, 16, 0, 128, true, true, false);
  g_warps = 0;
  route_case(&qwen, 17, 0, 128, true, false, false); /* not fusable: router, then dispatch */
}

static void test_deepseek(void **s) {
  const int Ts[] = {1, 5, 16};
  for (int i = 0; i < 3; i++) {
    route_case(&dsv3, Ts[i], 0, 256, true, true, false);
    route_case(&dsv3, Ts[i], 32, 64, false, true, false);
  }
  route_case(&dsv3, 5, 0, 256, true, true, true);
  g_warps = 8; /* the host picks 7 at H=7168 (28 chunks): 8 warps' blocks straddle two tokens */
  route_case(&dsv3, 16, 0, 256, true, true, false);
  g_warps = 3;
  route_case(&dsv3, 5, 32, 64, true, true, false);
  g_warps = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qwen3),
      cmocka_unit_test(test_deepseek),
  };
  return SL_RUN_SELECTED(tests, setup, teardown);
}
