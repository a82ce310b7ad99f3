/* Shared by tests/mpi/test_moe_ep*.c, test_moe_tp.c (CPU backend) and tests/gpu/mpi_moe_ep.c:
 * one MoE call (dispatch, a test expert FFN on the host, combine) checked against a
 * single-rank reference computed without any communication.
 *
 * The test FFN of global expert e: y = bf16(fmaf(v, a_e, b_e)) on the dequantized row.
 * The reference: each token quantized/dequantized by kquant's CPU reference (sl_quant_ref /
 * sl_dequant_ref, independent of the dispatch's packing code), the same FFN, and
 * out[t] = bf16(sum_k fmaf(w[t,k], y_k, acc)) in k order: the single-rank MoE layer.
 * EP results must equal it bit for bit; TP sums per-rank partials (rank order), so it is
 * compared within a bf16 ulp, and must be bit-identical on every rank. */
#ifndef SL_TEST_MOE_EP_CHECK_H
#define SL_TEST_MOE_EP_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_ep.h"
#include "kernels/quant.h"
#include "sl_test.h"

typedef enum {
  ROUTE_RANDOM = 0,     /* K distinct experts anywhere */
  ROUTE_SKEW = 1,       /* every token's experts on rank 0 */
  ROUTE_ONE_RANK = 2,   /* every token's K experts on one (random) rank */
  ROUTE_INVALID = 3,    /* random, plus one id out of range in some tokens */
  ROUTE_OTHER_NODE = 4, /* every token's K experts on the ranks of the next node (harness
                           ranks_per_node; one node: like RANDOM) */
  ROUTE_LAST_RANK = 5,  /* every token's experts on the last rank (remote for node 0) */
} moe_route_t;

static inline const char *moe_route_name(moe_route_t r) {
  static const char *n[] = {"random",      "skew-to-rank0",      "topk-on-one-rank",
                            "invalid-ids", "topk-on-other-node", "skew-to-last-rank"};
  return n[r];
}

static inline float moe_ffn_a(int e) {
  return 1.0f + 0.0625f * (float)(e % 7);
}
static inline float moe_ffn_b(int e) {
  return 0.03125f * (float)(e % 5) - 0.0625f;
}

/* K distinct experts for one token. */
static inline void moe_pick_experts(uint64_t *rng, int E, int K, int lo, int hi, int32_t *ids) {
  for (int k = 0; k < K; k++) {
    int e, dup;
    do {
      e = lo + (int)(sl_test_rand_u64(rng) % (uint64_t)(hi - lo));
      dup = 0;
      for (int j = 0; j < k; j++)
        dup |= ids[j] == e;
    } while (dup);
    ids[k] = e;
  }
  (void)E;
}

/* Dequantized tokens by kquant's reference: v[T, H] fp32. */
static inline void moe_ref_dequant(const sl_moe_ep_layout_t *l, float gs, int T, const uint16_t *x, float *v) {
  size_t n = (size_t)T * l->hidden;
  if (l->payload == SL_MOE_EP_PAYLOAD_BF16 || T == 0) {
    for (size_t i = 0; i < n; i++)
      v[i] = sl_bf16_to_f32(x[i]);
    return;
  }
  sl_quant_format_t fmt = l->payload == SL_MOE_EP_PAYLOAD_FP8     ? SL_QUANT_FP8_GROUP
                          : l->payload == SL_MOE_EP_PAYLOAD_MXFP8 ? SL_QUANT_MXFP8
                                                                  : SL_QUANT_NVFP4;
  sl_quant_rule_t rule = fmt == SL_QUANT_FP8_GROUP ? SL_QUANT_RULE_IEEE : SL_QUANT_RULE_CEIL;
  void *codes = malloc(sl_quant_codes_bytes(fmt, T, l->hidden));
  void *scales = malloc(sl_quant_scales_bytes(fmt, SL_QUANT_LAYOUT_LINEAR, T, l->hidden));
  sl_quant_args_t q = {.format = fmt,
                       .rule = rule,
                       .layout = SL_QUANT_LAYOUT_LINEAR,
                       .num_tokens = T,
                       .hidden = l->hidden,
                       .in_dtype = SL_DTYPE_BF16,
                       .in = x,
                       .codes = codes,
                       .scales = scales,
                       .global_scale = gs};
  SL_ASSERT_OK(sl_quant_ref(&q));
  sl_dequant_args_t d = {.format = fmt,
                         .layout = SL_QUANT_LAYOUT_LINEAR,
                         .num_tokens = T,
                         .hidden = l->hidden,
                         .codes = codes,
                         .scales = scales,
                         .global_scale = gs,
                         .out_dtype = SL_DTYPE_F32,
                         .out = v};
  SL_ASSERT_OK(sl_dequant_ref(&d));
  free(codes);
  free(scales);
}

typedef struct {
  sl_device_t *dev;
  MPI_Comm comm; /* the group (a node) */
  int rank, size;
  sl_stream_t *stream;
  int ranks_per_node; /* ROUTE_OTHER_NODE; 0: the whole group is one node */
} moe_harness_t;

typedef struct {
  int T; /* this rank's tokens */
  moe_route_t route;
  sl_moe_comm_path_t path;       /* forced path (AUTO / DECODE / PREFILL) */
  sl_status_t expect_dispatch;   /* SL_OK, or the error dispatch (or check) must report */
  size_t mismatches;             /* out */
  sl_moe_comm_path_t path_taken; /* out */
  sl_moe_net_mode_t net;         /* inter-node handles: dispatch mode (AUTO / DIRECT / NODE_AGG) */
  sl_moe_net_mode_t net_taken;   /* out */
} moe_case_t;

static inline void *moe_dev_alloc(sl_device_t *dev, size_t bytes) {
  void *p = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, bytes ? bytes : 16, &p));
  return p;
}

/* One collective MoE call through `h`, checked. Every rank of the group calls it. */
static inline void moe_run_case(moe_harness_t *H, sl_moe_comm_t *h, uint64_t *rng, moe_case_t *c) {
  const sl_moe_ep_layout_t *l = sl_moe_comm_layout(h);
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  int T = c->T, K = l->top_k, E = l->num_experts, Hd = l->hidden, epr = l->experts_per_rank;
  bool tp = l->tp;
  sl_device_t *dev = H->dev;
  /* inputs (TP: identical on every rank: one seed from rank 0) */
  uint64_t r = sl_test_rand_u64(rng);
  if (tp) MPI_Bcast(&r, 1, MPI_UINT64_T, 0, H->comm);
  uint64_t lr = r ^ 0x5bd1e995u;
  uint16_t *x = malloc((size_t)T * Hd * 2 + 16);
  int32_t *ids = malloc((size_t)T * K * 4 + 16);
  float *w = malloc((size_t)T * K * 4 + 16);
  for (int t = 0; t < T; t++) {
    float mag = sl_test_rand_uniform(&lr, 0.05f, 4.0f);
    for (int i = 0; i < Hd; i++)
      x[(size_t)t * Hd + i] = sl_f32_to_bf16(mag * sl_test_rand_normal(&lr));
    int32_t *id = ids + (size_t)t * K;
    if (c->route == ROUTE_SKEW) {
      moe_pick_experts(&lr, E, K, 0, epr, id);
    } else if (c->route == ROUTE_LAST_RANK) {
      moe_pick_experts(&lr, E, K, E - epr, E, id);
    } else if (c->route == ROUTE_OTHER_NODE) {
      int L = H->ranks_per_node > 0 ? H->ranks_per_node : l->nranks, nodes = l->nranks / L;
      int other = (H->rank / L + 1) % nodes;
      moe_pick_experts(&lr, E, K, other * L * epr, (other + 1) * L * epr, id);
    } else if (c->route == ROUTE_ONE_RANK) {
      int d = (int)(sl_test_rand_u64(&lr) % (uint64_t)l->nranks);
      moe_pick_experts(&lr, E, K, d * epr, (d + 1) * epr, id);
    } else {
      moe_pick_experts(&lr, E, K, 0, E, id);
      if (c->route == ROUTE_INVALID && t % 3 == 1) id[sl_test_rand_u64(&lr) % (uint64_t)K] = t % 2 ? E + t : -1;
    }
    for (int k = 0; k < K; k++)
      w[(size_t)t * K + k] = sl_test_rand_uniform(&lr, 0.05f, 1.0f);
  }
  /* expected rows per local expert: pairs routed to each expert, summed over the group */
  int *want_counts = calloc((size_t)E, sizeof(int)), *all_counts = calloc((size_t)E, sizeof(int));
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e = ids[(size_t)t * K + k];
      if (e >= 0 && e < E) want_counts[e]++;
    }
  if (tp)
    memcpy(all_counts, want_counts, (size_t)E * sizeof(int));
  else
    MPI_Allreduce(want_counts, all_counts, E, MPI_INT, MPI_SUM, H->comm);

  void *dx = moe_dev_alloc(dev, (size_t)T * Hd * 2), *dids = moe_dev_alloc(dev, (size_t)T * K * 4);
  void *dw = moe_dev_alloc(dev, (size_t)T * K * 4), *dout = moe_dev_alloc(dev, (size_t)T * Hd * 2);
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  void *dexp_out = moe_dev_alloc(dev, rows * Hd * 2);
  SL_ASSERT_OK(sl_memcpy(dev, dx, x, (size_t)T * Hd * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, dids, ids, (size_t)T * K * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, dw, w, (size_t)T * K * 4, NULL));
  sl_test_poison(dev, dout, (size_t)T * Hd * 2 + (T ? 0 : 16));
  sl_test_poison(dev, dexp_out, rows * Hd * 2);
  sl_test_poison(dev, ex->expert_x, rows * (size_t)ex->row_bytes);

  /* dispatch */
  sl_moe_comm_dispatch_args_t da = {.num_tokens = T,
                                    .x = dx,
                                    .topk_ids = dids,
                                    .topk_weights = dw,
                                    .force_path = c->path,
                                    .path_taken = &c->path_taken,
                                    .net_mode = c->net,
                                    .net_taken = &c->net_taken};
  sl_status_t s = sl_moe_comm_dispatch(h, &da, H->stream);
  if (s == SL_OK) s = sl_moe_comm_check(h, H->stream);
  if (c->expect_dispatch == SL_OK) {
    if (s != SL_OK) fail_msg("dispatch: %s: %s", sl_status_str(s), sl_last_error());
  } else {
    /* only ranks that had the offending data must report it; others see SL_OK */
    if (s != SL_OK && s != c->expect_dispatch)
      fail_msg("dispatch: want %s or OK, got %s: %s", sl_status_str(c->expect_dispatch), sl_status_str(s),
               sl_last_error());
  }
  /* expert counts: exactly the group's pairs per local expert */
  int nl = ex->num_local_experts;
  int32_t *counts = malloc((size_t)nl * 4);
  SL_ASSERT_OK(sl_memcpy(dev, counts, ex->expert_counts, (size_t)nl * 4, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  for (int le = 0; le < nl; le++)
    if (counts[le] != all_counts[ex->expert_begin + le])
      fail_msg("rank %d local expert %d: %d rows, want %d", H->rank, le, counts[le], all_counts[ex->expert_begin + le]);

  /* the test FFN on the host, over the dispatched rows only; other rows stay NaN */
  unsigned char *hx = malloc(rows * (size_t)ex->row_bytes + 16);
  unsigned char *hs = malloc(rows * (size_t)(ex->scale_row_bytes ? ex->scale_row_bytes : 1) + 16);
  float *hwts = malloc(rows * 4 + 16);
  uint16_t *hout = malloc(rows * Hd * 2 + 16);
  memset(hout, 0xff, rows * Hd * 2);
  SL_ASSERT_OK(sl_memcpy(dev, hx, ex->expert_x, rows * (size_t)ex->row_bytes, NULL));
  if (ex->scale_row_bytes)
    SL_ASSERT_OK(sl_memcpy(dev, hs, ex->expert_scales, rows * (size_t)ex->scale_row_bytes, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, hwts, ex->expert_weights, rows * 4, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  for (int le = 0; le < nl; le++) {
    int e = ex->expert_begin + le, n = counts[le] < ex->capacity ? counts[le] : ex->capacity;
    for (int row = 0; row < n; row++) {
      size_t rr = (size_t)le * ex->capacity + row;
      if (!(hwts[rr] >= 0.05f && hwts[rr] <= 1.0f)) fail_msg("expert %d row %d: weight %g", e, row, (double)hwts[rr]);
      for (int i = 0; i < Hd; i++) {
        float v =
            sl_moe_ep_dequant(ex->payload, hx + rr * ex->row_bytes, hs + rr * ex->scale_row_bytes, i, ex->global_scale);
        hout[rr * Hd + i] = sl_f32_to_bf16(fmaf(v, moe_ffn_a(e), moe_ffn_b(e)));
      }
    }
  }
  SL_ASSERT_OK(sl_memcpy(dev, dexp_out, hout, rows * Hd * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));

  /* combine */
  sl_moe_comm_combine_args_t ca = {.num_tokens = T,
                                   .topk_ids = dids,
                                   .topk_weights = dw,
                                   .expert_out = dexp_out,
                                   .out = dout,
                                   .force_path = c->path};
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, H->stream));
  SL_ASSERT_OK(sl_moe_comm_check(h, H->stream));
  uint16_t *got = malloc((size_t)T * Hd * 2 + 16);
  SL_ASSERT_OK(sl_memcpy(dev, got, dout, (size_t)T * Hd * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));

  /* the single-rank reference */
  float *v = malloc((size_t)T * Hd * 4 + 16), *gotf = malloc((size_t)T * Hd * 4 + 16);
  float *want = malloc((size_t)T * Hd * 4 + 16);
  moe_ref_dequant(l, ex->global_scale, T, x, v);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < Hd; i++) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++) {
        int e = ids[(size_t)t * K + k];
        if (e < 0 || e >= E) continue;
        float y = sl_bf16_to_f32(sl_f32_to_bf16(fmaf(v[(size_t)t * Hd + i], moe_ffn_a(e), moe_ffn_b(e))));
        acc = fmaf(w[(size_t)t * K + k], y, acc);
      }
      want[(size_t)t * Hd + i] = sl_bf16_to_f32(sl_f32_to_bf16(acc));
      gotf[(size_t)t * Hd + i] = sl_bf16_to_f32(got[(size_t)t * Hd + i]);
    }
  /* EP: bit-exact. TP: partials summed in rank order, within one bf16 ulp (2^-8 relative)
   * of the k-order sum, plus a small absolute term for cancellation. */
  c->mismatches = tp ? sl_test_compare_f32("tp out", gotf, want, (size_t)T * Hd, 1e-2f, 1.0f / 128)
                     : sl_test_compare_f32("ep out", gotf, want, (size_t)T * Hd, 0.0f, 0.0f);
  if (tp && T > 0) { /* every rank holds the same bits */
    uint16_t *r0 = malloc((size_t)T * Hd * 2);
    memcpy(r0, got, (size_t)T * Hd * 2);
    MPI_Bcast(r0, T * Hd, MPI_UINT16_T, 0, H->comm);
    if (memcmp(r0, got, (size_t)T * Hd * 2) != 0) fail_msg("TP: rank %d's output differs from rank 0's", H->rank);
    free(r0);
  }
  free(x), free(ids), free(w), free(want_counts), free(all_counts), free(counts);
  free(hx), free(hs), free(hwts), free(hout), free(got), free(v), free(gotf), free(want);
  sl_device_free(dev, dx), sl_device_free(dev, dids), sl_device_free(dev, dw), sl_device_free(dev, dout);
  sl_device_free(dev, dexp_out);
}

#endif
