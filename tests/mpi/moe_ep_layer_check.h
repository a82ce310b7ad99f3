/* Shared by tests/mpi/test_moe_ep_layer.c (CPU) and tests/gpu/mpi_moe_ep.c: the node-level
 * dispatch -> moe's expert FFN (kernels/moe_ffn.h, real SwiGLU experts) -> combine, against
 * moe's single-rank layer (sl_moe_layer_forward with every expert, same routing) on the same
 * tokens. The FFN's GEMMs may sum in a different order for a different number of rows, so
 * the comparison allows 2 bf16 ulps; the fraction of bit-identical outputs is printed. */
#ifndef SL_TEST_MOE_EP_LAYER_CHECK_H
#define SL_TEST_MOE_EP_LAYER_CHECK_H

#include <math.h>

#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"
#include "moe_ep_check.h"

static inline void moe_fill_bf16(uint64_t *rng, uint16_t *w, size_t n, float scale) {
  for (size_t i = 0; i < n; i++)
    w[i] = sl_f32_to_bf16(scale * sl_test_rand_normal(rng));
}

/* Returns the number of mismatches on this rank. */
static inline size_t moe_run_layer_case(moe_harness_t *H, sl_moe_deploy_t deploy, int epr, int K, int Hd, int I, int T,
                                        sl_moe_comm_path_t path, uint64_t seed) {
  sl_device_t *dev = H->dev;
  int E = epr * H->size;
  /* weights: the same on every rank */
  uint64_t wr = seed;
  MPI_Bcast(&wr, 1, MPI_UINT64_T, 0, H->comm);
  size_t gu_n = (size_t)E * 2 * I * Hd, dn_n = (size_t)E * Hd * I;
  uint16_t *gu = malloc(gu_n * 2), *dn = malloc(dn_n * 2);
  moe_fill_bf16(&wr, gu, gu_n, 1.0f / 16.0f);
  moe_fill_bf16(&wr, dn, dn_n, 1.0f / 8.0f);
  /* tokens and routing: per rank (EP) or replicated (TP) */
  uint64_t tr = wr ^ (deploy == SL_MOE_DEPLOY_TP ? 0u : 0x9e3779b97f4a7c15ull * (uint64_t)(H->rank + 1));
  uint16_t *x = malloc((size_t)T * Hd * 2 + 16);
  int32_t *ids = malloc((size_t)T * K * 4 + 16);
  float *w = malloc((size_t)T * K * 4 + 16);
  moe_fill_bf16(&tr, x, (size_t)T * Hd, 1.0f);
  for (int t = 0; t < T; t++) {
    moe_pick_experts(&tr, E, K, 0, E, ids + (size_t)t * K);
    for (int k = 0; k < K; k++)
      w[(size_t)t * K + k] = sl_test_rand_uniform(&tr, 0.1f, 1.0f);
  }
  void *dgu = moe_dev_alloc(dev, gu_n * 2), *ddn = moe_dev_alloc(dev, dn_n * 2);
  void *dx = moe_dev_alloc(dev, (size_t)T * Hd * 2), *dids = moe_dev_alloc(dev, (size_t)T * K * 4);
  void *dw = moe_dev_alloc(dev, (size_t)T * K * 4), *dref = moe_dev_alloc(dev, (size_t)T * Hd * 2);
  void *dout = moe_dev_alloc(dev, (size_t)T * Hd * 2);
  SL_ASSERT_OK(sl_memcpy(dev, dgu, gu, gu_n * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, ddn, dn, dn_n * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, dx, x, (size_t)T * Hd * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, dids, ids, (size_t)T * K * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, dw, w, (size_t)T * K * 4, NULL));
  sl_test_poison(dev, dref, (size_t)T * Hd * 2 + (T ? 0 : 16));
  sl_test_poison(dev, dout, (size_t)T * Hd * 2 + (T ? 0 : 16));

  /* the single-rank layer over every expert */
  sl_moe_layer_config_t lc = {.num_experts = E,
                              .top_k = K,
                              .hidden = Hd,
                              .inter = I,
                              .expert_begin = 0,
                              .expert_end = E,
                              .router_kind = SL_ROUTER_SOFTMAX_TOPK,
                              .w_gate_up = dgu,
                              .w_down = ddn};
  sl_moe_layer_t *layer = NULL;
  SL_ASSERT_OK(sl_moe_layer_create(dev, &lc, T > 0 ? T : 1, &layer));
  sl_moe_layer_args_t la = {
      .num_tokens = T, .x = dx, .out = dref, .topk_ids = dids, .topk_weights = dw, .allow_host_sync = true};
  SL_ASSERT_OK(sl_moe_layer_forward(layer, &la, H->stream));
  SL_ASSERT_OK(sl_moe_layer_check(layer, H->stream));

  /* the node: dispatch -> moe's FFN on this rank's experts -> combine */
  sl_moe_comm_config_t cfg = {.deploy = deploy,
                              .num_experts = E,
                              .top_k = K,
                              .hidden = Hd,
                              .payload = SL_MOE_EP_PAYLOAD_BF16,
                              .max_tokens = T > 0 ? T : 1};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create(dev, H->comm, &cfg, &h));
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  const sl_moe_ep_layout_t *l = sl_moe_comm_layout(h);
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  void *dy = moe_dev_alloc(dev, rows * Hd * 2);
  int recv_tokens = l->nsenders * l->max_tokens;
  size_t ffn_ws_bytes = sl_moe_ffn_workspace_bytes(ex->num_local_experts, ex->capacity, recv_tokens, K, Hd, I);
  void *ffn_ws = moe_dev_alloc(dev, ffn_ws_bytes);
  sl_moe_comm_dispatch_args_t da = {.num_tokens = T, .x = dx, .topk_ids = dids, .topk_weights = dw, .force_path = path};
  SL_ASSERT_OK(sl_moe_comm_dispatch(h, &da, H->stream));
  sl_moe_ffn_args_t fa = {.num_local_experts = ex->num_local_experts,
                          .capacity = ex->capacity,
                          .hidden = Hd,
                          .inter = I,
                          .num_tokens = recv_tokens,
                          .top_k = K,
                          .x = ex->expert_x,
                          .expert_counts = ex->expert_counts,
                          .w_gate_up = (const uint16_t *)dgu + (size_t)ex->expert_begin * 2 * I * Hd,
                          .w_down = (const uint16_t *)ddn + (size_t)ex->expert_begin * Hd * I,
                          .y = dy,
                          .workspace = ffn_ws,
                          .workspace_bytes = ffn_ws_bytes,
                          .exact_rows = false};
  SL_ASSERT_OK(sl_moe_ffn(dev, &fa, H->stream));
  sl_moe_comm_combine_args_t ca = {
      .num_tokens = T, .topk_ids = dids, .topk_weights = dw, .expert_out = dy, .out = dout, .force_path = path};
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, H->stream));
  SL_ASSERT_OK(sl_moe_comm_check(h, H->stream));

  uint16_t *got = malloc((size_t)T * Hd * 2 + 16), *ref = malloc((size_t)T * Hd * 2 + 16);
  SL_ASSERT_OK(sl_memcpy(dev, got, dout, (size_t)T * Hd * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, ref, dref, (size_t)T * Hd * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  float *gf = malloc((size_t)T * Hd * 4 + 16), *rf = malloc((size_t)T * Hd * 4 + 16);
  size_t same = 0, n = (size_t)T * Hd;
  for (size_t i = 0; i < n; i++) {
    gf[i] = sl_bf16_to_f32(got[i]);
    rf[i] = sl_bf16_to_f32(ref[i]);
    same += got[i] == ref[i];
  }
  /* Each output sums K expert rows that were each rounded to bf16 after a GEMM whose fp32
   * summation order depends on the rows per expert, so a one-ulp change in an expert row can
   * survive cancellation in the sum: the absolute bound scales with the outputs' RMS (a few
   * bf16 ulps of a typical term), not with the (possibly cancelled) value itself. */
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (double)rf[i] * rf[i];
  float rms = n ? (float)sqrt(ss / (double)n) : 0.0f;
  float atol = rms / 32 > 1e-3f ? rms / 32 : 1e-3f;
  size_t bad = sl_test_compare_f32("node vs single-rank layer", gf, rf, n, atol, 1.0f / 64);
  if (H->rank == 0 && n)
    printf("  %s %s: %zu of %zu outputs bit-identical to sl_moe_layer_forward\n",
           deploy == SL_MOE_DEPLOY_TP ? "TP" : "EP", sl_moe_comm_path_name(path), same, n);
  sl_moe_comm_destroy(h);
  sl_moe_layer_destroy(layer);
  void *bufs[] = {dgu, ddn, dx, dids, dw, dref, dout, dy, ffn_ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    sl_device_free(dev, bufs[i]);
  free(gu), free(dn), free(x), free(ids), free(w), free(got), free(ref), free(gf), free(rf);
  return bad;
}

#endif
