/* Helpers shared by the MoE tests (unit and gpu): random routing, and one dispatch +
 * combine run on any device with host-side inputs and outputs. */
#ifndef MOE_TEST_UTIL_H
#define MOE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_combine.h"
#include "kernels/moe_dispatch.h"
#include "sl_test.h"

/* K distinct experts per token out of E (partial Fisher-Yates), positive weights. */
static inline void moe_rand_routing(uint64_t *rng, int T, int K, int E, int32_t *ids, float *weights) {
  int *perm = malloc((size_t)E * sizeof *perm);
  assert_non_null(perm);
  for (int t = 0; t < T; t++) {
    for (int e = 0; e < E; e++) perm[e] = e;
    for (int k = 0; k < K; k++) {
      int j = k + (int)(sl_test_rand_u64(rng) % (uint64_t)(E - k));
      int tmp = perm[k];
      perm[k] = perm[j];
      perm[j] = tmp;
      ids[(size_t)t * K + k] = perm[k];
      if (weights) weights[(size_t)t * K + k] = sl_test_rand_uniform(rng, 0.05f, 1.0f);
    }
  }
  free(perm);
}

static inline void moe_rand_bf16(uint64_t *rng, size_t n, uint16_t *out) {
  for (size_t i = 0; i < n; i++) out[i] = sl_f32_to_bf16(sl_test_rand_normal(rng));
}

/* Weights uniform in [-amp, amp): four 16-bit draws per random word. */
static inline void moe_uniform_bf16(uint64_t *rng, uint16_t *w, size_t n, float amp) {
  for (size_t i = 0; i < n; i += 4) {
    uint64_t r = sl_test_rand_u64(rng);
    for (size_t j = 0; j < 4 && i + j < n; j++) {
      float u = (float)((r >> (16 * j)) & 0xFFFF) * (1.0f / 32768.0f) - 1.0f; /* [-1, 1) */
      w[i + j] = sl_f32_to_bf16(amp * u);
    }
  }
}

/* One problem and its outputs, all host memory. */
typedef struct {
  int T, H, K, E, begin, end, capacity, max_tokens;
  uint16_t *x;          /* [T, H] */
  int32_t *ids;         /* [T, K] */
  float *weights;       /* [T, K] */
  uint16_t *residual;   /* [T, H] or NULL */
  sl_moe_payload_t payload; /* bf16 unless set; quantized payloads skip combine */
  int rule;
  float gscale;
  int route_rounds, repl_rank, no_pdl; /* dispatch variants (force_route_rounds, force_repl_rank,
                                        * split_no_pdl); 0 = default */
  int repl_bal;                        /* force_repl_balance; 0 = off */
  int repl_warps;                      /* force_repl_warps; 0 = the host's choice */
  int copy, staged_seg, staged_stages; /* force_copy, force_staged_seg, force_staged_stages; 0 = host */
  int staged_scale_bulk;               /* staged_scale_bulk; 0 = the scales by the lanes' stores */
  int launches;                        /* dispatches on one workspace, outputs poisoned before each; 0 = 1.
                                        * The last one's outputs are compared: what a launch leaves in the
                                        * workspace for the next (the counters) is checked too */
  /* outputs */
  uint16_t *expert_x;   /* [E_local * capacity + guard rows] x row bytes, poisoned before the run */
  uint8_t *scales;      /* [E_local * capacity + guard rows] x scales per row (quantized payloads) */
  int32_t *counts;      /* [E_local] */
  int32_t *slots;       /* [T, K] */
  uint16_t *out;        /* [T, H] combine of expert_x rows (the identity "expert") */
  sl_status_t check;    /* sl_moe_dispatch_check's status */
  sl_moe_path_t path;
} moe_case_t;

enum { MOE_GUARD_ROWS = 2 };

static inline size_t moe_case_rows(const moe_case_t *c) {
  return (size_t)(c->end - c->begin) * c->capacity + MOE_GUARD_ROWS;
}
static inline size_t moe_case_row_bytes(const moe_case_t *c) { return sl_moe_payload_row_bytes(c->payload, c->H); }
static inline size_t moe_case_scale_row_bytes(const moe_case_t *c) {
  return (size_t)sl_moe_payload_scales_per_row(c->payload, c->H) * sl_moe_payload_scale_bytes(c->payload);
}

static inline void moe_case_alloc(moe_case_t *c) {
  size_t T = (size_t)(c->T ? c->T : 1), local = (size_t)(c->end - c->begin);
  c->x = calloc(T * c->H, 2);
  c->ids = calloc(T * c->K, 4);
  c->weights = calloc(T * c->K, 4);
  c->expert_x = calloc(moe_case_rows(c) * c->H, 2); /* bf16 rows: enough for any payload */
  c->scales = calloc(moe_case_rows(c) * moe_case_scale_row_bytes(c) + 1, 1);
  c->counts = calloc(local, 4);
  c->slots = calloc(T * c->K, 4);
  c->out = calloc(T * c->H, 2);
  assert_true(c->x && c->ids && c->weights && c->expert_x && c->scales && c->counts && c->slots && c->out);
}

static inline void moe_case_free(moe_case_t *c) {
  free(c->x);
  free(c->ids);
  free(c->weights);
  free(c->residual);
  free(c->expert_x);
  free(c->scales);
  free(c->counts);
  free(c->slots);
  free(c->out);
}

static inline void *moe_dev_copy(sl_device_t *dev, const void *host, size_t bytes) {
  void *p = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, bytes ? bytes : 16, &p));
  if (host && bytes) {
    SL_ASSERT_OK(sl_memcpy(dev, p, host, bytes, NULL));
    /* The copy is on the legacy default stream, which the streams of sl_stream_create
     * (cudaStreamNonBlocking) are not ordered after, and a pageable host -> device copy may
     * still be in flight when it returns: wait, or a test's first kernel on its own stream
     * can read a partly copied input (a prefix of the buffer new, the rest stale). */
    SL_ASSERT_OK(sl_device_sync(dev));
  }
  return p;
}

/* Dispatch then combine (with the dispatched rows standing for the expert outputs) on
 * `dev`; force_path as in sl_moe_dispatch_args_t. Fills the case's outputs. */
static inline void moe_case_run(sl_device_t *dev, moe_case_t *c, int force_path) {
  const size_t T = (size_t)c->T, local = (size_t)(c->end - c->begin);
  const int max_tokens = c->max_tokens > c->T ? c->max_tokens : c->T;
  void *dx = moe_dev_copy(dev, c->x, T * c->H * 2);
  void *dids = moe_dev_copy(dev, c->ids, T * c->K * 4);
  void *dw = moe_dev_copy(dev, c->weights, T * c->K * 4);
  void *dres = c->residual ? moe_dev_copy(dev, c->residual, T * c->H * 2) : NULL;
  const size_t ex_bytes = moe_case_rows(c) * moe_case_row_bytes(c);
  const size_t sc_bytes = moe_case_rows(c) * moe_case_scale_row_bytes(c);
  void *dex = moe_dev_copy(dev, NULL, ex_bytes);
  void *dsc = moe_dev_copy(dev, NULL, sc_bytes);
  void *dcounts = moe_dev_copy(dev, NULL, local * 4);
  void *dslots = moe_dev_copy(dev, NULL, T * c->K * 4);
  void *dout = moe_dev_copy(dev, NULL, T * c->H * 2);
  const size_t ws_bytes = sl_moe_dispatch_workspace_bytes(max_tokens, c->K, (int)local);
  void *ws = moe_dev_copy(dev, NULL, ws_bytes);
  SL_ASSERT_OK(sl_moe_dispatch_workspace_init(dev, ws, ws_bytes, NULL));
  sl_moe_dispatch_args_t da = {.num_tokens = c->T, .hidden = c->H, .top_k = c->K, .num_experts = c->E,
                               .expert_begin = c->begin, .expert_end = c->end, .capacity = c->capacity,
                               .payload = c->payload, .quant_rule = c->rule, .global_scale = c->gscale,
                               .x = dx, .topk_ids = dids, .expert_x = dex, .expert_scales = dsc,
                               .expert_counts = dcounts,
                               .slots = dslots, .workspace = ws, .workspace_bytes = ws_bytes,
                               .force_path = force_path, .path_taken = &c->path,
                               .force_route_rounds = c->route_rounds, .force_repl_rank = c->repl_rank,
                               .split_no_pdl = c->no_pdl, .force_repl_balance = c->repl_bal,
                               .force_repl_warps = c->repl_warps, .force_copy = c->copy,
                               .force_staged_seg = c->staged_seg, .force_staged_stages = c->staged_stages,
                               .staged_scale_bulk = c->staged_scale_bulk};
  for (int l = 0; l < (c->launches > 1 ? c->launches : 1); l++) {
    sl_test_poison(dev, dex, ex_bytes);
    if (sc_bytes) sl_test_poison(dev, dsc, sc_bytes);
    sl_test_poison(dev, dcounts, local * 4);
    if (T) sl_test_poison(dev, dslots, T * c->K * 4);
    if (T) sl_test_poison(dev, dout, T * c->H * 2);
    SL_ASSERT_OK(sl_moe_dispatch(dev, &da, NULL));
  }
  c->check = sl_moe_dispatch_check(dev, ws, NULL);
  sl_moe_combine_args_t ca = {.num_tokens = c->T, .hidden = c->H, .top_k = c->K, .expert_out = dex,
                              .slots = dslots, .topk_weights = dw, .residual = dres, .out = dout};
  if (c->payload == SL_MOE_PAYLOAD_BF16) SL_ASSERT_OK(sl_moe_combine(dev, &ca, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, c->expert_x, dex, ex_bytes, NULL));
  if (sc_bytes) SL_ASSERT_OK(sl_memcpy(dev, c->scales, dsc, sc_bytes, NULL));
  SL_ASSERT_OK(sl_memcpy(dev, c->counts, dcounts, local * 4, NULL));
  if (T) SL_ASSERT_OK(sl_memcpy(dev, c->slots, dslots, T * c->K * 4, NULL));
  if (T) SL_ASSERT_OK(sl_memcpy(dev, c->out, dout, T * c->H * 2, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  /* The error record is cleared by the check: a second check passes. */
  SL_ASSERT_OK(sl_moe_dispatch_check(dev, ws, NULL));
  void *bufs[] = {dx, dids, dw, dres, dex, dsc, dcounts, dslots, dout, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) sl_device_free(dev, bufs[i]);
}

#endif
