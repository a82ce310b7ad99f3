/* `sluice bench kernels [--tune]`: RMSNorm (plain, fused residual), QK-norm (vs two generic
 * per-head RMSNorm launches, and with fused RoPE) and embedding lookup over prefill and decode
 * shapes, then the quantization benches (launch/bench_quant.c). Device time by events, median;
 * inputs rotated over copies so L2 does not serve them; small T also inside a CUDA graph.
 * GB/s counts each input read once and each output written once. --tune times every
 * configuration per shape and prints the best (copy it into the table in kernels/<op>.c):
 * RMSNorm elements per thread x rows per block x weight placement x grid policy (decode:
 * elements x weight placement, in a graph), then table lines; QK-norm warps x items x grid
 * (with and without RoPE), then a table line per RoPE setting; embedding warps per block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_kernels.h"
#include "kernels/act.h"
#include "kernels/embedding.h"
#include "kernels/qknorm.h"
#include "kernels/quant.h"
#include "kernels/rmsnorm.h"
#include "sl_cmd.h"

/* Inputs rotate over copies whose total is at least this, so a repetition never finds its
 * inputs in L2 (H200: 60 MB L2); large T already exceeds it with one copy. */
/* graph timing up to 1024 tokens: below ~8192 the plain time is the host's enqueue gap, not the kernel */
enum { ROTATE_BYTES = 128 << 20, MAX_COPIES = 4096, GRAPH_MAX_T = 1024 };

/* ---- a buffer of `copies` equal slots, 256-byte aligned ---------------------------------- */
typedef struct {
  char *base;
  size_t stride;
  int copies;
} pool_t;

static sl_status_t pool_alloc(sl_bench_t *b, size_t bytes, pool_t *p) {
  bool gpu = sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA;
  p->stride = (bytes + 255) / 256 * 256;
  size_t want = gpu ? (ROTATE_BYTES + p->stride - 1) / p->stride : 1;
  p->copies = (int)(want < 1 ? 1 : want > MAX_COPIES ? MAX_COPIES : want);
  SL_CHECK(sl_device_malloc(b->rt->dev, p->stride * (size_t)p->copies, (void **)&p->base));
  return SL_OK;
}
static void pool_free(sl_bench_t *b, pool_t *p) {
  sl_device_free(b->rt->dev, p->base);
  p->base = NULL;
}
static void *pool_slot(const pool_t *p, int iter) {
  return p->base + (size_t)(iter % p->copies) * p->stride;
}

/* Fill every slot with random values of `dt` in [-scale, scale] (NaN-free, so timing does not
 * depend on special values). One host buffer, copied into each slot. */
static sl_status_t pool_fill(sl_bench_t *b, pool_t *p, sl_dtype_t dt, size_t n, float scale, uint32_t seed) {
  size_t bytes = sl_dtype_bytes(dt, n);
  void *h = malloc(bytes ? bytes : 1);
  if (!h) return SL_ERR(SL_ERR_NOMEM, "bench input of %zu bytes", bytes);
  uint32_t st = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    st = st * 1664525u + 1013904223u;
    sl_store_f32(h, dt, i, scale * ((float)(st >> 8) * (2.0f / 16777216.0f) - 1.0f));
  }
  sl_status_t s = SL_OK;
  for (int c = 0; c < p->copies && s == SL_OK; c++)
    s = sl_memcpy(b->rt->dev, pool_slot(p, c), h, bytes, b->stream);
  if (s == SL_OK) s = sl_stream_sync(b->rt->dev, b->stream);
  free(h);
  return s;
}

static sl_status_t fill_const(sl_bench_t *b, void *dst, sl_dtype_t dt, size_t n, float v) {
  size_t bytes = sl_dtype_bytes(dt, n);
  void *h = malloc(bytes);
  if (!h) return SL_ERR(SL_ERR_NOMEM, "bench weights");
  for (size_t i = 0; i < n; i++)
    sl_store_f32(h, dt, i, v);
  sl_status_t s = sl_memcpy(b->rt->dev, dst, h, bytes, b->stream);
  if (s == SL_OK) s = sl_stream_sync(b->rt->dev, b->stream);
  free(h);
  return s;
}

/* The path column: the warps per block the op chose, or the CPU reference. */
static void path_name(const sl_bench_t *b, int warps, char *path, size_t len) {
  if (sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA)
    snprintf(path, len, "w=%d", warps);
  else
    snprintf(path, len, "cpu-ref");
}

/* Time `fn` plainly and (small T, or `graph_too`; GPU) inside a graph; graph_us < 0 when not
 * measured. */
static sl_status_t time_both_g(sl_bench_t *b, sl_bench_fn fn, void *ctx, int tokens, bool graph_too, double *us,
                               double *graph_us) {
  SL_CHECK(sl_bench_time(b, fn, ctx, false, us));
  *graph_us = -1;
  if ((tokens <= GRAPH_MAX_T || graph_too) && sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA)
    SL_CHECK(sl_bench_time(b, fn, ctx, true, graph_us));
  return sl_bench_time_kernel(b, fn, ctx); /* the row's kern_us (CUPTI; "-" without it) */
}
static sl_status_t time_both(sl_bench_t *b, sl_bench_fn fn, void *ctx, int tokens, double *us, double *graph_us) {
  return time_both_g(b, fn, ctx, tokens, false, us, graph_us);
}

typedef struct {
  int tokens_n, hidden_n;
  const int *tokens, *hidden;
} shapes_t;

static shapes_t bench_shapes(const sl_bench_t *b) {
  static const int t_full[] = {1, 16, 128, 1024, 8192, 32768}, h_full[] = {2048, 4096, 7168};
  static const int t_quick[] = {1, 16}, h_quick[] = {2048};
  if (b->quick) return (shapes_t){2, 1, t_quick, h_quick};
  return (shapes_t){6, 3, t_full, h_full};
}

/* ---- RMSNorm ------------------------------------------------------------------------------ */
typedef struct {
  sl_device_t *dev;
  sl_rmsnorm_args_t a;
  pool_t x, y, res;
} rms_ctx_t;

static sl_status_t rms_run(void *p, int iter, sl_stream_t *stream) {
  rms_ctx_t *c = p;
  c->a.x = pool_slot(&c->x, iter);
  c->a.y = pool_slot(&c->y, iter);
  if (c->a.residual) c->a.residual = pool_slot(&c->res, iter);
  return sl_rmsnorm(c->dev, &c->a, stream);
}

/* --tune for RMSNorm: every knob per shape -- elements per thread (8, 16, 32) x warps per block
 * (the row's warps x 1, 2, 4, 8, <= 32) x weight in registers or re-read x grid policy
 * (resident, full) at prefill (T >= SMs), and on a full grid of one row per block the one-row
 * kernel (SL_RMSNORM_LOOP_OFF) where the AUTO rule would run the loop (fused, h > 4096);
 * and either row factor (1/sqrtf, rsqrtf); elements x weight placement at one row per block at
 * decode (T <= 16). Up to T=1024 each point is timed in a CUDA graph (by events the host's launch
 * gap would hide the kernel there). The best of each shape is kept and printed at the end of the
 * RMSNorm section as lines of kernels/rmsnorm.c's table. */
typedef struct {
  int hidden, fused, tokens, elts, rows_per_block, grid, wreg, rsq, onerow;
  double us;
} rms_tune_t;
enum { RMS_TUNE_MAX = 128 };
static rms_tune_t rms_tuned[RMS_TUNE_MAX];
static int rms_tuned_n;

static sl_status_t tune_rmsnorm_shape(sl_bench_t *b, rms_ctx_t *c, const char *op, const char *shape, double moved,
                                      const sl_rmsnorm_point_t *chosen) {
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  const int tokens = c->a.rows, hidden = c->a.hidden;
  const bool decode = tokens < info->sm_count;
  if (decode && tokens > 16) return SL_OK; /* T = 128: neither decode (graph) nor a full prefill */
  static const int elts[] = {8, 16, 32};
  const bool graph = tokens <= GRAPH_MAX_T && sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA;
  const bool auto_one_row = c->a.residual == NULL && hidden <= 4096; /* kernels/rmsnorm.c's AUTO rule */
  rms_tune_t best = {0};
  char path[64];
  double us;
  for (int e = 0; e < 3; e++) {
    int cand[8], nc = sl_rmsnorm_warp_candidates_e(hidden, elts[e], cand);
    if (decode && nc > 1) nc = 1; /* one row per block */
    for (int i = 0; i < nc; i++)
      for (int wreg = 0; wreg < 2; wreg++)
        for (int grid = SL_RMSNORM_GRID_RESIDENT; grid <= SL_RMSNORM_GRID_FULL; grid++)
          for (int rsq = 0; rsq < (decode ? 1 : 2); rsq++) /* decode: rsqrtf always (AUTO) */
            for (int onerow = 0; onerow < 2; onerow++) {
              if (decode && grid == SL_RMSNORM_GRID_FULL) continue; /* the same launch at T < SMs */
              if (onerow && (decode || grid != SL_RMSNORM_GRID_FULL || i > 0 || auto_one_row)) continue;
              c->a.elts = elts[e];
              c->a.warps = cand[i];
              c->a.grid_policy = grid;
              c->a.weight_regs = wreg ? SL_RMSNORM_WEIGHT_REGS : SL_RMSNORM_WEIGHT_RELOAD;
              c->a.fast_rsqrt = decode ? SL_RMSNORM_RSQ_AUTO : rsq ? SL_RMSNORM_RSQ_ON : SL_RMSNORM_RSQ_OFF;
              c->a.row_loop = onerow ? SL_RMSNORM_LOOP_OFF : SL_RMSNORM_LOOP_AUTO;
              SL_CHECK(sl_bench_time(b, rms_run, c, graph, &us));
              snprintf(path, sizeof path, "tune e=%d w=%d%s%s%s%s%s", elts[e], cand[i], wreg ? " wr" : "",
                       grid == SL_RMSNORM_GRID_FULL ? " full" : "", rsq ? " rsq" : "", onerow ? " one" : "",
                       graph ? " graph" : "");
              sl_bench_row(b, op, shape, path, graph ? 0 : us, moved, graph ? us : -1, NULL);
              if (best.us == 0 || us < best.us)
                best = (rms_tune_t){hidden, c->a.residual != NULL, tokens, elts[e],
                                    cand[i] / SL_RMSNORM_ROW_WARPS_E(hidden, elts[e]), grid, wreg, rsq, onerow, us};
            }
  }
  c->a.elts = c->a.warps = 0;
  c->a.grid_policy = SL_RMSNORM_GRID_AUTO;
  c->a.weight_regs = SL_RMSNORM_WEIGHT_AUTO;
  c->a.fast_rsqrt = SL_RMSNORM_RSQ_AUTO;
  c->a.row_loop = SL_RMSNORM_LOOP_AUTO;
  if (b->rt->boot.rank == 0)
    printf("tune %s %s: best e=%d w=%d%s %s%s%s (%.2f us%s); table chose e=%d w=%d%s %s%s%s\n", op, shape,
           best.elts, best.rows_per_block * SL_RMSNORM_ROW_WARPS_E(hidden, best.elts), best.wreg ? " wr" : "",
           best.grid == SL_RMSNORM_GRID_FULL ? "full" : "resident", best.rsq ? " rsq" : "", best.onerow ? " one" : "",
           best.us, graph ? " in a graph" : "", chosen->elts, chosen->warps, chosen->wreg ? " wr" : "",
           chosen->full_grid ? "full" : "resident", chosen->rsq && !decode ? " rsq" : "",
           chosen->one_row && !decode && !auto_one_row ? " one" : "");
  if (rms_tuned_n < RMS_TUNE_MAX) rms_tuned[rms_tuned_n++] = best;
  return SL_OK;
}

static int rms_tune_order(const void *pa, const void *pb) {
  const rms_tune_t *x = pa, *y = pb;
  const bool dx = x->tokens <= 16, dy = y->tokens <= 16;
  if (dx != dy) return dx ? -1 : 1;                  /* decode entries first */
  if (x->hidden != y->hidden) return x->hidden - y->hidden;
  if (x->fused != y->fused) return x->fused - y->fused;
  return y->tokens - x->tokens; /* larger row counts first (first match wins) */
}

/* The tuned best per shape as lines of hopper_table/blackwell_table (kernels/rmsnorm.c). Decode:
 * one entry per (hidden, variant), the elements that won at the most decode shapes (ties: the
 * smaller total time); prefill: one per measured T with min_rows = T, the smallest T's with
 * min_rows 1 so it also covers SMs <= rows < that T. Hidden classes apply to hidden <=
 * max_hidden in order; the table's SL_RMSNORM_MAX_HIDDEN catch-alls stay last. */
static void print_rmsnorm_table(const sl_bench_t *b) {
  if (rms_tuned_n == 0 || b->rt->boot.rank != 0) return;
  qsort(rms_tuned, (size_t)rms_tuned_n, sizeof *rms_tuned, rms_tune_order);
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  printf("# --tune: RMSNorm table lines for sm_%d (paste into kernels/rmsnorm.c, above the catch-alls):\n", info->arch);
  printf("#   {max_hidden, fused, min_rows, elts, rows_per_block, grid, wreg, rsq, onerow}\n");
  for (int i = 0; i < rms_tuned_n; i++) {
    const rms_tune_t *t = &rms_tuned[i];
    if (t->tokens <= 16) {
      if (i > 0 && rms_tuned[i - 1].tokens <= 16 && rms_tuned[i - 1].hidden == t->hidden &&
          rms_tuned[i - 1].fused == t->fused)
        continue; /* one entry per (hidden, variant), from its group's vote below */
      /* votes per (elts, wreg): index elts + wreg */
      int votes[34] = {0};
      double total[34] = {0};
      for (int j = i; j < rms_tuned_n && rms_tuned[j].tokens <= 16 && rms_tuned[j].hidden == t->hidden &&
                      rms_tuned[j].fused == t->fused;
           j++)
        votes[rms_tuned[j].elts + rms_tuned[j].wreg]++, total[rms_tuned[j].elts + rms_tuned[j].wreg] += rms_tuned[j].us;
      int k_best = 33; /* 32 elements, weight in registers: v2's decode */
      for (int k = 8; k <= 33; k++)
        if (votes[k] > votes[k_best] || (votes[k] == votes[k_best] && votes[k] > 0 && total[k] < total[k_best]))
          k_best = k;
      printf("    {%d, %d, 0, %d, 1, SL_RMSNORM_GRID_RESIDENT, %d, 0, 0}, /* decode */\n", t->hidden, t->fused,
             k_best & ~1, k_best & 1);
      continue;
    }
    const bool smallest = i + 1 == rms_tuned_n || rms_tuned[i + 1].tokens <= 16 ||
                          rms_tuned[i + 1].hidden != t->hidden || rms_tuned[i + 1].fused != t->fused;
    printf("    {%d, %d, %d, %d, %d, %s, %d, %d, %d}, /* T=%d: %.2f us */\n", t->hidden, t->fused,
           smallest ? 1 : t->tokens, t->elts, t->rows_per_block,
           t->grid == SL_RMSNORM_GRID_FULL ? "SL_RMSNORM_GRID_FULL" : "SL_RMSNORM_GRID_RESIDENT", t->wreg, t->rsq,
           t->onerow, t->tokens, t->us);
  }
}

static sl_status_t bench_rmsnorm_shape(sl_bench_t *b, int tokens, int hidden, bool residual, bool tune) {
  if (!sl_bench_tokens_selected(b, tokens) || !sl_bench_hidden_selected(b, hidden)) return SL_OK;
  const char *op = residual ? "rmsnorm+residual" : "rmsnorm";
  if (!sl_bench_selected(b, op)) return SL_OK;
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  rms_ctx_t c = {.dev = b->rt->dev};
  size_t n = (size_t)tokens * (size_t)hidden, bytes = sl_dtype_bytes(SL_DTYPE_BF16, n);
  void *w = NULL;
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(pool_alloc(b, bytes, &c.x), s, out);
  SL_CHECK_GOTO(pool_alloc(b, bytes, &c.y), s, out);
  if (residual) SL_CHECK_GOTO(pool_alloc(b, bytes, &c.res), s, out);
  SL_CHECK_GOTO(sl_device_malloc(b->rt->dev, sl_dtype_bytes(SL_DTYPE_BF16, (size_t)hidden), &w), s, out);
  SL_CHECK_GOTO(pool_fill(b, &c.x, SL_DTYPE_BF16, n, 2.0f, 1), s, out);
  if (residual) SL_CHECK_GOTO(pool_fill(b, &c.res, SL_DTYPE_BF16, n, 2.0f, 2), s, out);
  SL_CHECK_GOTO(fill_const(b, w, SL_DTYPE_BF16, (size_t)hidden, 1.0f), s, out);
  c.a = (sl_rmsnorm_args_t){.weight = w,
                            .residual = residual ? c.res.base : NULL,
                            .rows = tokens,
                            .hidden = hidden,
                            .in_dtype = SL_DTYPE_BF16,
                            .out_dtype = SL_DTYPE_BF16,
                            .w_dtype = SL_DTYPE_BF16,
                            .res_dtype = SL_DTYPE_BF16,
                            .eps = 1e-6f};
  /* x read + y written (+ residual read and written) + the weight once. */
  double moved = (double)bytes * (residual ? 4 : 2) + 2.0 * hidden;
  char shape[64], path[32];
  snprintf(shape, sizeof shape, "T=%d h=%d bf16", tokens, hidden);
  sl_rmsnorm_point_t pt;
  SL_CHECK_GOTO(sl_rmsnorm_choose(&c.a, info->arch, info->sm_count, &pt), s, out);
  path_name(b, pt.warps, path, sizeof path);
  if (sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA)
    snprintf(path, sizeof path, "e=%d w=%d%s%s", pt.elts, pt.warps, pt.full_grid ? " full" : "", pt.rsq ? " rsq" : "");
  double us, gus;
  SL_CHECK_GOTO(time_both(b, rms_run, &c, tokens, &us, &gus), s, out);
  sl_bench_row(b, op, shape, path, us, moved, gus, NULL);
  if (tokens <= GRAPH_MAX_T && sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA) {
    /* Decode and T=1024: the other row factor (kernels/rmsnorm.cu "The row's factor"), same launch. */
    c.a.fast_rsqrt = pt.rsq ? SL_RMSNORM_RSQ_OFF : SL_RMSNORM_RSQ_ON;
    SL_CHECK_GOTO(time_both(b, rms_run, &c, tokens, &us, &gus), s, out);
    snprintf(path, sizeof path, "e=%d w=%d%s", pt.elts, pt.warps, pt.rsq ? " ieee" : " rsq");
    sl_bench_row(b, op, shape, path, us, moved, gus, "other row factor (comparison)");
    c.a.fast_rsqrt = SL_RMSNORM_RSQ_AUTO;
  }
  if (tokens >= 1024) {
    /* The other grid policy at the same warps, so the AUTO rule stays checked by measurement. */
    c.a.grid_policy = pt.full_grid ? SL_RMSNORM_GRID_RESIDENT : SL_RMSNORM_GRID_FULL;
    c.a.warps = pt.warps;
    c.a.elts = pt.elts;
    SL_CHECK_GOTO(sl_bench_time(b, rms_run, &c, false, &us), s, out);
    snprintf(path, sizeof path, "%s e=%d w=%d", pt.full_grid ? "resident" : "full", pt.elts, pt.warps);
    sl_bench_row(b, op, shape, path, us, moved, -1, "other grid policy (comparison)");
    c.a.grid_policy = SL_RMSNORM_GRID_AUTO;
    c.a.warps = 0;
    c.a.elts = 0;
    if (pt.one_row) { /* the strided kernel at the same launch (kernels/rmsnorm.cu "One row, one block") */
      c.a.row_loop = SL_RMSNORM_LOOP_ON;
      SL_CHECK_GOTO(time_both(b, rms_run, &c, tokens, &us, &gus), s, out);
      snprintf(path, sizeof path, "loop e=%d w=%d", pt.elts, pt.warps);
      sl_bench_row(b, op, shape, path, us, moved, gus, "the row loop (comparison)");
      c.a.row_loop = SL_RMSNORM_LOOP_AUTO;
    }
  }
  if (tune) SL_CHECK_GOTO(tune_rmsnorm_shape(b, &c, op, shape, moved, &pt), s, out);
out:
  sl_device_free(b->rt->dev, w);
  pool_free(b, &c.x);
  pool_free(b, &c.y);
  if (residual) pool_free(b, &c.res);
  return s;
}

/* ---- QK-norm ------------------------------------------------------------------------------ */
/* The reference figure, NOT measured by this benchmark: PyTorch F.rms_norm applied per
 * head (Q then K) for Qwen3-30B-A3B's QK-norm (32+4 heads x 128, bf16) at T = 4096 took 98.6 us
 * on an H200 (18% of copy bandwidth). The ≥ 5x goal is against that; the row at T = 4096 prints
 * our fused kernel's ratio to it, next to the ratio against our own generic per-head RMSNorm
 * (two launches of the vectorized kernel), which is measured in the same run. */
#define PYTORCH_QKNORM_T 4096
#define PYTORCH_QKNORM_US 98.6

typedef struct {
  sl_device_t *dev;
  sl_qknorm_args_t a;
  sl_rmsnorm_args_t rq, rk; /* the generic baseline: per-head RMSNorm of Q, then of K */
  pool_t q, k, qo, ko;      /* separate Q and K (+ outputs of the generic norm) */
  pool_t qkv;               /* packed QKV rows, for the RoPE variant */
  size_t k_offset;          /* bytes from a QKV row's start to its K slice */
} qk_ctx_t;

static sl_status_t qk_fused(void *p, int iter, sl_stream_t *stream) {
  qk_ctx_t *c = p;
  c->a.q = pool_slot(&c->q, iter);
  c->a.k = pool_slot(&c->k, iter);
  return sl_qknorm(c->dev, &c->a, stream);
}
static sl_status_t qk_generic(void *p, int iter, sl_stream_t *stream) {
  qk_ctx_t *c = p;
  c->rq.x = pool_slot(&c->q, iter);
  c->rq.y = pool_slot(&c->qo, iter);
  c->rk.x = pool_slot(&c->k, iter);
  c->rk.y = pool_slot(&c->ko, iter);
  SL_CHECK(sl_rmsnorm(c->dev, &c->rq, stream));
  return sl_rmsnorm(c->dev, &c->rk, stream);
}
static sl_status_t qk_rope(void *p, int iter, sl_stream_t *stream) {
  qk_ctx_t *c = p;
  sl_qknorm_args_t a = c->a;
  a.q = pool_slot(&c->qkv, iter);
  a.k = (char *)a.q + c->k_offset;
  return sl_qknorm(c->dev, &a, stream);
}

/* --tune for QK-norm, in two parts measured at every tuned shape:
 *  A. warps per block (1..32) x head groups per warp (1, 2, 4; RoPE 1, 2: 4 spills) x grid
 *     policy (resident, full), the layout knobs off (the measured v3 kernel): 36 / 24 configs;
 *  B. the layout knobs (kernels/qknorm.cu: CACHE 0-2 x RSQ x WF32, and PIPE on resident grids
 *     at <= 2 items without RoPE, RLAYOUT 0-2 with RoPE) around the configurations that measured
 *     best in 2026-11-29-s2-h200-tune (plain: 1x4, 2x2, 2x4, 4x2 full; 2x2, 8x2 resident;
 *     RoPE: 1x2, 2x2 resident, 2x2 full): 90 / 105 configs.
 * Grid is a launch choice; ~100-130 JIT variants per RoPE setting. Besides each shape's best, the
 * bench prints at the end of the QK-norm section the configuration with the smallest mean
 * slowdown against each shape's best, as a line of kernels/qknorm.c's table. */
enum { QK_TUNE_SHAPES = 16, QK_TUNE_CONFIGS = 160 };
typedef struct {
  int warps, items, grid; /* grid: SL_QKNORM_GRID_RESIDENT / _FULL */
  int cache;              /* JIT CACHE 0..2 */
  int rsq, wf32, pipe;
  int rlayout; /* JIT RLAYOUT: 0 shuffle, 1 split, 2 pairs in a lane */
} qk_cfg_t;
typedef struct {
  int n_cfg, n_shapes;
  qk_cfg_t cfg[QK_TUNE_CONFIGS];
  double us[QK_TUNE_SHAPES][QK_TUNE_CONFIGS]; /* 0: not measured */
} qk_tune_t;
static qk_tune_t qk_tuned[2]; /* [rope] */

/* Shapes where kernels/qknorm.c uses its table: more than one wave of 32 warps per SM at 2 head
 * groups of 2 heads (head_dim 128) per warp (T > ~470 for 36 heads on 132 SMs); smaller
 * prefill and decode are sized by rule. */
static bool qk_tuned_shape(const sl_device_info_t *info, int tokens, int heads) {
  return (long)tokens * heads > 4L * 32 * info->sm_count;
}

static void qk_add(qk_tune_t *t, qk_cfg_t c) {
  if (t->n_cfg < QK_TUNE_CONFIGS) t->cfg[t->n_cfg++] = c;
}

static void qk_build_configs(qk_tune_t *t, bool rope) {
  if (t->n_cfg) return;
  for (int w = 1; w <= 32; w *= 2)
    for (int it = 1; it <= (rope ? 2 : 4); it *= 2)
      for (int g = SL_QKNORM_GRID_RESIDENT; g <= SL_QKNORM_GRID_FULL; g++)
        qk_add(t, (qk_cfg_t){.warps = w, .items = it, .grid = g});
  static const int plain[][3] = {{1, 4, SL_QKNORM_GRID_FULL},     {2, 2, SL_QKNORM_GRID_FULL},
                                 {2, 4, SL_QKNORM_GRID_FULL},     {4, 2, SL_QKNORM_GRID_FULL},
                                 {2, 2, SL_QKNORM_GRID_RESIDENT}, {8, 2, SL_QKNORM_GRID_RESIDENT}};
  static const int roped[][3] = {
      {1, 2, SL_QKNORM_GRID_RESIDENT}, {2, 2, SL_QKNORM_GRID_RESIDENT}, {2, 2, SL_QKNORM_GRID_FULL}};
  const int nb = rope ? 3 : 6;
  for (int b = 0; b < nb; b++) {
    const int *base = rope ? roped[b] : plain[b];
    /* the 4th knob: RLAYOUT with RoPE; PIPE on a resident grid at <= 2 items without */
    const int last = rope ? 2 : (base[2] == SL_QKNORM_GRID_RESIDENT && base[1] <= 2);
    for (int cache = 0; cache < 3; cache++)
      for (int rsq = 0; rsq < 2; rsq++)
        for (int wf32 = 0; wf32 < 2; wf32++)
          for (int k4 = 0; k4 <= last; k4++) {
            if (!cache && !rsq && !wf32 && !k4) continue; /* part A has it */
            qk_add(t, (qk_cfg_t){.warps = base[0],
                                 .items = base[1],
                                 .grid = base[2],
                                 .cache = cache,
                                 .rsq = rsq,
                                 .wf32 = wf32,
                                 .pipe = rope ? 0 : k4,
                                 .rlayout = rope ? k4 : 0});
          }
  }
}

static void qk_cfg_name(const qk_cfg_t *c, char *buf, size_t n) {
  snprintf(buf, n, "w=%d i=%d%s%s%s%s%s%s", c->warps, c->items, c->grid == SL_QKNORM_GRID_FULL ? " full" : "",
           c->cache == 1 ? " st.cs" : c->cache == 2 ? " cs" : "", c->rsq ? " rsq" : "", c->wf32 ? " wf32" : "",
           c->pipe ? " pipe" : "", c->rlayout == 1 ? " split" : c->rlayout == 2 ? " pairs" : "");
}

static void qk_cfg_args(const qk_cfg_t *c, sl_qknorm_args_t *a) {
  a->warps = c->warps;
  a->items = c->items;
  a->grid_policy = c->grid;
  a->cache = c->cache + 1; /* SL_QKNORM_CACHE_NONE + JIT value */
  a->fast_rsqrt = c->rsq ? SL_QKNORM_ON : SL_QKNORM_OFF;
  a->weights_f32 = c->wf32 ? SL_QKNORM_ON : SL_QKNORM_OFF;
  a->pipeline = c->pipe ? SL_QKNORM_ON : SL_QKNORM_OFF;
  a->rope_layout = SL_QKNORM_ROPE_SHUFFLE + c->rlayout;
}

static qk_cfg_t qk_point_cfg(const sl_qknorm_point_t *pt) {
  return (qk_cfg_t){.warps = pt->warps,
                    .items = pt->items,
                    .grid = pt->full_grid ? SL_QKNORM_GRID_FULL : SL_QKNORM_GRID_RESIDENT,
                    .cache = pt->cache,
                    .rsq = pt->rsq,
                    .wf32 = pt->wf32,
                    .pipe = pt->pipe,
                    .rlayout = pt->rlayout};
}
static const char *qk_point_name(const sl_qknorm_point_t *pt, char *buf, size_t n) {
  qk_cfg_t c = qk_point_cfg(pt);
  qk_cfg_name(&c, buf, n);
  return buf;
}

static sl_status_t tune_qknorm_shape(sl_bench_t *b, qk_ctx_t *c, sl_bench_fn fn, const char *op, const char *shape,
                                     double moved, const sl_qknorm_point_t *chosen) {
  const bool rope = c->a.rope;
  qk_tune_t *t = &qk_tuned[rope];
  qk_build_configs(t, rope);
  const int si = t->n_shapes < QK_TUNE_SHAPES ? t->n_shapes++ : QK_TUNE_SHAPES - 1;
  int best = -1;
  char name[96], path[112];
  const sl_qknorm_args_t saved = c->a;
  for (int i = 0; i < t->n_cfg; i++) {
    qk_cfg_args(&t->cfg[i], &c->a);
    double us;
    sl_status_t s = sl_bench_time(b, fn, c, false, &us);
    /* and the kernel time (CUPTI; kern_us), the device time without the per-repetition event gap */
    if (s == SL_OK) s = sl_bench_time_kernel(b, fn, c);
    if (s != SL_OK) {
      c->a = saved;
      return s;
    }
    t->us[si][i] = us;
    qk_cfg_name(&t->cfg[i], name, sizeof name);
    snprintf(path, sizeof path, "tune %s", name);
    sl_bench_row(b, op, shape, path, us, moved, -1, NULL);
    if (best < 0 || us < t->us[si][best]) best = i;
  }
  c->a = saved;
  qk_cfg_name(&t->cfg[best], name, sizeof name);
  const qk_cfg_t ch = qk_point_cfg(chosen);
  char cname[96];
  qk_cfg_name(&ch, cname, sizeof cname);
  if (b->rt->boot.rank == 0)
    printf("tune %s %s: best %s%s (%.2f us); table chose %s%s\n", op, shape, name,
           t->cfg[best].grid == SL_QKNORM_GRID_FULL ? "" : " resident", t->us[si][best], cname,
           ch.grid == SL_QKNORM_GRID_FULL ? "" : " resident");
  return SL_OK;
}

static void print_qknorm_table(const sl_bench_t *b) {
  if (b->rt->boot.rank != 0) return;
  for (int rope = 0; rope < 2; rope++) {
    const qk_tune_t *t = &qk_tuned[rope];
    if (t->n_shapes == 0) continue;
    int best = -1;
    double best_score = 0;
    for (int i = 0; i < t->n_cfg; i++) {
      double score = 0;
      int n = 0;
      for (int s = 0; s < t->n_shapes; s++) {
        double lo = 0;
        for (int j = 0; j < t->n_cfg; j++)
          if (t->us[s][j] > 0 && (lo == 0 || t->us[s][j] < lo)) lo = t->us[s][j];
        if (t->us[s][i] > 0 && lo > 0) score += t->us[s][i] / lo, n++;
      }
      if (n != t->n_shapes) continue; /* not measured at every shape */
      score /= n;
      if (best < 0 || score < best_score) best = i, best_score = score;
    }
    if (best < 0) continue;
    const qk_cfg_t *c = &t->cfg[best];
    printf("# --tune: QK-norm table line for sm_%d (head_dim 128, %s; mean slowdown vs each shape's best "
           "%.3f over %d shapes):\n    {128, %d, %d, %d, %s, %d, %d, %d, %d, %d},\n",
           sl_device_info(b->rt->dev)->arch, rope ? "RoPE" : "no RoPE", best_score, t->n_shapes, rope, c->warps,
           c->items, c->grid == SL_QKNORM_GRID_FULL ? "SL_QKNORM_GRID_FULL" : "SL_QKNORM_GRID_RESIDENT", c->cache,
           c->rsq, c->wf32, c->pipe, c->rlayout);
  }
}

static sl_status_t bench_qknorm_shape(sl_bench_t *b, int tokens, int q_heads, int kv_heads, bool tune) {
  if (!sl_bench_tokens_selected(b, tokens)) return SL_OK;
  const int D = 128, max_pos = 40960;
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  sl_device_t *dev = b->rt->dev;
  qk_ctx_t c = {.dev = dev};
  size_t qn = (size_t)tokens * q_heads * D, kn = (size_t)tokens * kv_heads * D;
  size_t rown = (size_t)(q_heads + 2 * kv_heads) * D;
  void *w = NULL, *pos = NULL, *cs = NULL, *sn = NULL;
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(pool_alloc(b, qn * 2, &c.q), s, out);
  SL_CHECK_GOTO(pool_alloc(b, kn * 2, &c.k), s, out);
  SL_CHECK_GOTO(pool_alloc(b, qn * 2, &c.qo), s, out);
  SL_CHECK_GOTO(pool_alloc(b, kn * 2, &c.ko), s, out);
  SL_CHECK_GOTO(pool_alloc(b, (size_t)tokens * rown * 2, &c.qkv), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, D * 2, &w), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)tokens * 4, &pos), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)max_pos * D / 2 * 4, &cs), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)max_pos * D / 2 * 4, &sn), s, out);
  SL_CHECK_GOTO(pool_fill(b, &c.q, SL_DTYPE_BF16, qn, 2.0f, 3), s, out);
  SL_CHECK_GOTO(pool_fill(b, &c.k, SL_DTYPE_BF16, kn, 2.0f, 4), s, out);
  SL_CHECK_GOTO(pool_fill(b, &c.qkv, SL_DTYPE_BF16, (size_t)tokens * rown, 2.0f, 5), s, out);
  SL_CHECK_GOTO(fill_const(b, w, SL_DTYPE_BF16, D, 1.0f), s, out);
  SL_CHECK_GOTO(fill_const(b, cs, SL_DTYPE_F32, (size_t)max_pos * D / 2, 0.6f), s, out);
  SL_CHECK_GOTO(fill_const(b, sn, SL_DTYPE_F32, (size_t)max_pos * D / 2, 0.8f), s, out);
  {
    int32_t *hp = malloc((size_t)tokens * 4);
    if (!hp) {
      s = SL_ERR(SL_ERR_NOMEM, "positions");
      goto out;
    }
    for (int t = 0; t < tokens; t++)
      hp[t] = (int32_t)((t * 7919) % max_pos);
    s = sl_memcpy(dev, pos, hp, (size_t)tokens * 4, b->stream);
    if (s == SL_OK) s = sl_stream_sync(dev, b->stream);
    free(hp);
    SL_CHECK_GOTO(s, s, out);
  }
  c.a = (sl_qknorm_args_t){.q_row_stride = (long)q_heads * D,
                           .k_row_stride = (long)kv_heads * D,
                           .tokens = tokens,
                           .q_heads = q_heads,
                           .kv_heads = kv_heads,
                           .head_dim = D,
                           .q_weight = w,
                           .k_weight = w,
                           .dtype = SL_DTYPE_BF16,
                           .w_dtype = SL_DTYPE_BF16,
                           .eps = 1e-6f};
  c.rq = (sl_rmsnorm_args_t){.weight = w,
                             .rows = tokens * q_heads,
                             .hidden = D,
                             .in_dtype = SL_DTYPE_BF16,
                             .out_dtype = SL_DTYPE_BF16,
                             .w_dtype = SL_DTYPE_BF16,
                             .res_dtype = SL_DTYPE_BF16,
                             .eps = 1e-6f};
  c.rk = c.rq;
  c.rk.rows = tokens * kv_heads;
  double moved = 2.0 * (double)(qn + kn) * 2; /* Q and K read and written */
  char shape[64], path[112], extra[160], name[96];
  snprintf(shape, sizeof shape, "T=%d %d+%dx%d bf16", tokens, q_heads, kv_heads, D);
  sl_qknorm_point_t pt;
  SL_CHECK_GOTO(sl_qknorm_choose(&c.a, info->arch, info->sm_count, &pt), s, out);
  path_name(b, pt.warps, path, sizeof path);
  if (sl_device_backend(dev) == SL_BACKEND_CUDA)
    snprintf(path, sizeof path, "%s", qk_point_name(&pt, name, sizeof name));
  double us = 0, gus = -1, gen_us = 0, gen_gus = -1;
  if (sl_bench_selected(b, "qknorm")) {
    /* At the reference shape also in a graph: device time without the per-launch overhead that
     * the plain figure carries (see kernels/NOTES.md). */
    const bool ref_shape = tokens == PYTORCH_QKNORM_T && q_heads == 32 && kv_heads == 4;
    SL_CHECK_GOTO(time_both_g(b, qk_fused, &c, tokens, ref_shape, &us, &gus), s, out);
    const double fused_kernel_us = b->row_kernel_us; /* each row its own kern_us */
    SL_CHECK_GOTO(time_both_g(b, qk_generic, &c, tokens, ref_shape, &gen_us, &gen_gus), s, out);
    const double generic_kernel_us = b->row_kernel_us;
    snprintf(extra, sizeof extra, "2x rmsnorm/fused: %.2fx%s", us > 0 ? gen_us / us : 0.0, "");
    if (gus > 0 && gen_gus > 0)
      snprintf(extra, sizeof extra, "2x rmsnorm/fused: %.2fx (graph %.2fx)", us > 0 ? gen_us / us : 0.0, gen_gus / gus);
    if (ref_shape && us > 0)
      snprintf(extra, sizeof extra,
               "2x rmsnorm/fused: %.2fx; PyTorch/fused: %.1fx, graph %.1fx (issue figure %.1f us, not measured here)",
               gen_us / us, PYTORCH_QKNORM_US / us, gus > 0 ? PYTORCH_QKNORM_US / gus : 0.0, PYTORCH_QKNORM_US);
    b->row_kernel_us = fused_kernel_us;
    sl_bench_row(b, "qknorm", shape, path, us, moved, gus, extra);
    b->row_kernel_us = generic_kernel_us;
    sl_bench_row(b, "qknorm/2x-rmsnorm", shape, "generic", gen_us, moved, gen_gus, NULL);
    if (tune && qk_tuned_shape(info, tokens, q_heads + kv_heads))
      SL_CHECK_GOTO(tune_qknorm_shape(b, &c, qk_fused, "qknorm", shape, moved, &pt), s, out);
    if (ref_shape && sl_device_backend(dev) == SL_BACKEND_CUDA) {
      /* The per-head knobs next to the table's launch (kern_us decides at this shape: the
       * per-repetition events carry ~2.5 us of launch gap): the other factor, streaming stores,
       * both. */
      const sl_qknorm_args_t saved = c.a;
      for (int v = 1; v < 4; v++) {
        qk_cfg_t cfg = qk_point_cfg(&pt);
        if (v & 1) cfg.rsq = !cfg.rsq;
        if (v & 2) cfg.cache = cfg.cache ? 0 : 1;
        qk_cfg_args(&cfg, &c.a);
        SL_CHECK_GOTO(time_both_g(b, qk_fused, &c, tokens, true, &us, &gus), s, out);
        qk_cfg_name(&cfg, name, sizeof name);
        sl_bench_row(b, "qknorm", shape, name, us, moved, gus, "layout knobs (comparison)");
        c.a = saved;
      }
    }
  }
  if (sl_bench_selected(b, "qknorm+rope")) {
    /* Packed QKV rows, Q and K strided in place, neox RoPE over the whole head. */
    c.a.q_row_stride = c.a.k_row_stride = (long)rown;
    c.k_offset = (size_t)q_heads * D * 2;
    c.a.rope = true;
    c.a.rot_dim = D;
    c.a.positions = pos;
    c.a.cos_cache = cs;
    c.a.sin_cache = sn;
    c.a.max_pos = max_pos;
    SL_CHECK_GOTO(time_both(b, qk_rope, &c, tokens, &us, &gus), s, out);
    /* + positions and the cos/sin rows each token reads */
    const double rope_moved = moved + (double)tokens * (4 + 2 * (D / 2) * 4);
    sl_qknorm_point_t rpt;
    SL_CHECK_GOTO(sl_qknorm_choose(&c.a, info->arch, info->sm_count, &rpt), s, out);
    if (sl_device_backend(dev) == SL_BACKEND_CUDA)
      snprintf(path, sizeof path, "qkv %s", qk_point_name(&rpt, name, sizeof name));
    else
      snprintf(path, sizeof path, "qkv-packed");
    sl_bench_row(b, "qknorm+rope", shape, path, us, rope_moved, gus, NULL);
    if (tune && qk_tuned_shape(info, tokens, q_heads + kv_heads))
      SL_CHECK_GOTO(tune_qknorm_shape(b, &c, qk_rope, "qknorm+rope", shape, rope_moved, &rpt), s, out);
  }
out:
  sl_device_free(dev, w);
  sl_device_free(dev, pos);
  sl_device_free(dev, cs);
  sl_device_free(dev, sn);
  pool_free(b, &c.q);
  pool_free(b, &c.k);
  pool_free(b, &c.qo);
  pool_free(b, &c.ko);
  pool_free(b, &c.qkv);
  return s;
}

/* ---- embedding ---------------------------------------------------------------------------- */
typedef struct {
  sl_device_t *dev;
  sl_embedding_args_t a;
  pool_t ids, out;
} emb_ctx_t;

static sl_status_t emb_run(void *p, int iter, sl_stream_t *stream) {
  emb_ctx_t *c = p;
  c->a.ids = pool_slot(&c->ids, iter);
  c->a.out = pool_slot(&c->out, iter);
  return sl_embedding(c->dev, &c->a, stream);
}

static sl_status_t bench_embedding_shape(sl_bench_t *b, int tokens, int hidden, bool tune) {
  if (!sl_bench_tokens_selected(b, tokens) || !sl_bench_hidden_selected(b, hidden)) return SL_OK;
  if (!sl_bench_selected(b, "embedding")) return SL_OK;
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  sl_device_t *dev = b->rt->dev;
  const int vocab = b->quick ? 4096 : 151936; /* Qwen3's vocabulary */
  emb_ctx_t c = {.dev = dev};
  void *table = NULL, *err = NULL;
  int32_t *hids = NULL;
  sl_status_t s = SL_OK;
  size_t row = sl_dtype_bytes(SL_DTYPE_BF16, (size_t)hidden);
  SL_CHECK_GOTO(sl_device_malloc(dev, row * (size_t)vocab, &table), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, sizeof(unsigned long long), &err), s, out);
  SL_CHECK_GOTO(pool_alloc(b, (size_t)tokens * 4, &c.ids), s, out);
  SL_CHECK_GOTO(pool_alloc(b, row * (size_t)tokens, &c.out), s, out);
  SL_CHECK_GOTO(sl_memset(dev, table, 0x3c, row * (size_t)vocab, b->stream), s, out);
  SL_CHECK_GOTO(sl_embedding_error_reset(dev, err, b->stream), s, out);
  hids = malloc((size_t)tokens * 4);
  if (!hids) {
    s = SL_ERR(SL_ERR_NOMEM, "token ids");
    goto out;
  }
  uint32_t st = 12345;
  for (int cpy = 0; cpy < c.ids.copies; cpy++) {
    for (int t = 0; t < tokens; t++) {
      st = st * 1664525u + 1013904223u;
      hids[t] = (int32_t)(st % (uint32_t)vocab);
    }
    SL_CHECK_GOTO(sl_memcpy(dev, pool_slot(&c.ids, cpy), hids, (size_t)tokens * 4, b->stream), s, out);
  }
  SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, out);
  c.a = (sl_embedding_args_t){
      .table = table, .error = err, .tokens = tokens, .vocab = vocab, .hidden = hidden, .dtype = SL_DTYPE_BF16};
  double moved = 2.0 * (double)row * tokens + 4.0 * tokens;
  char shape[64], path[32];
  snprintf(shape, sizeof shape, "T=%d h=%d bf16", tokens, hidden);
  sl_embedding_point_t pt;
  SL_CHECK_GOTO(sl_embedding_choose(&c.a, info->arch, info->sm_count, &pt), s, out);
  path_name(b, pt.warps, path, sizeof path);
  if (sl_device_backend(dev) == SL_BACKEND_CUDA) snprintf(path, sizeof path, "w=%d p=%d", pt.warps, pt.lane_packets);
  double us, gus;
  SL_CHECK_GOTO(time_both(b, emb_run, &c, tokens, &us, &gus), s, out);
  sl_bench_row(b, "embedding", shape, path, us, moved, gus, NULL);
  if (tune && tokens >= info->sm_count) {
    int best = 1;
    double best_us = 0;
    for (int wp = 1; wp <= 32; wp *= 2) {
      c.a.warps = wp;
      SL_CHECK_GOTO(sl_bench_time(b, emb_run, &c, false, &us), s, out);
      snprintf(path, sizeof path, "tune w=%d", wp);
      sl_bench_row(b, "embedding", shape, path, us, moved, -1, NULL);
      if (wp == 1 || us < best_us) best_us = us, best = wp;
    }
    if (b->rt->boot.rank == 0)
      printf("tune embedding %s: best warps %d (%.2f us); table chose %d\n", shape, best, best_us, pt.warps);
  }
  SL_CHECK_GOTO(sl_embedding_check(dev, err, vocab, b->stream), s, out); /* every id was valid */
out:
  free(hids);
  sl_device_free(dev, table);
  sl_device_free(dev, err);
  pool_free(b, &c.ids);
  pool_free(b, &c.out);
  return s;
}

/* A dense decode layer's small kernels, Qwen3-30B-A3B-shaped (hidden 2048, 32 + 4 heads x 128, intermediate 768),
 * one after another on the stream as an engine's decode graph runs them between its GEMMs: RMSNorm + residual, the
 * FP8 group quantizer, QK-norm + RoPE, SiLU-and-mul into FP8 groups, the FP8 dequantizer. Timed in a CUDA graph
 * (graph_us per chain of five), every stage launched plainly and every stage as a programmatic dependent (`pdl`):
 * the difference is what PDL saves a decode graph per node (launch gap and the launch state's share, bench_util.c). */
enum { CH_H = 2048, CH_QH = 32, CH_KH = 4, CH_HD = 128, CH_I = 768, CH_POS = 4096 };
typedef struct {
  sl_device_t *dev;
  int T;
  bool pdl;
  void *x, *res, *y, *w, *codes, *scales, *qkv, *qw, *kw, *pos, *cs, *sn, *gu, *a8, *as, *z;
} chain_ctx_t;

static sl_status_t chain_once(void *p, int iter, sl_stream_t *st) {
  (void)iter;
  chain_ctx_t *c = p;
  const sl_rmsnorm_args_t n = {.x = c->x,
                               .y = c->y,
                               .residual = c->res,
                               .weight = c->w,
                               .rows = c->T,
                               .hidden = CH_H,
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .res_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f,
                               .pdl = c->pdl};
  SL_CHECK(sl_rmsnorm(c->dev, &n, st));
  const sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                             .rule = SL_QUANT_RULE_IEEE,
                             .layout = SL_QUANT_LAYOUT_LINEAR,
                             .num_tokens = c->T,
                             .hidden = CH_H,
                             .in_dtype = SL_DTYPE_BF16,
                             .in = c->y,
                             .codes = c->codes,
                             .scales = c->scales,
                             .global_scale = 1.0f,
                             .pdl = c->pdl};
  SL_CHECK(sl_quant(c->dev, &q, st));
  const long row = (CH_QH + 2 * CH_KH) * CH_HD; /* a packed QKV row */
  const sl_qknorm_args_t k = {.q = c->qkv,
                              .k = (char *)c->qkv + CH_QH * CH_HD * 2,
                              .q_row_stride = row,
                              .k_row_stride = row,
                              .tokens = c->T,
                              .q_heads = CH_QH,
                              .kv_heads = CH_KH,
                              .head_dim = CH_HD,
                              .q_weight = c->qw,
                              .k_weight = c->kw,
                              .dtype = SL_DTYPE_BF16,
                              .w_dtype = SL_DTYPE_BF16,
                              .eps = 1e-6f,
                              .rope = true,
                              .rot_dim = CH_HD,
                              .positions = c->pos,
                              .cos_cache = c->cs,
                              .sin_cache = c->sn,
                              .max_pos = CH_POS,
                              .pdl = c->pdl};
  SL_CHECK(sl_qknorm(c->dev, &k, st));
  const sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                           .num_tokens = c->T,
                           .inter = CH_I,
                           .in_dtype = SL_DTYPE_BF16,
                           .out_dtype = SL_DTYPE_FP8_E4M3,
                           .in = c->gu,
                           .out = c->a8,
                           .out_scales = c->as,
                           .pdl = c->pdl};
  SL_CHECK(sl_act(c->dev, &a, st));
  const sl_dequant_args_t d = {.format = SL_QUANT_FP8_GROUP,
                               .layout = SL_QUANT_LAYOUT_LINEAR,
                               .num_tokens = c->T,
                               .hidden = CH_H,
                               .codes = c->codes,
                               .scales = c->scales,
                               .global_scale = 1.0f,
                               .out_dtype = SL_DTYPE_BF16,
                               .out = c->z,
                               .pdl = c->pdl};
  return sl_dequant(c->dev, &d, st);
}

static sl_status_t bench_chain(sl_bench_t *b, int T) {
  sl_device_t *dev = b->rt->dev;
  if (sl_device_backend(dev) != SL_BACKEND_CUDA || sl_device_info(dev)->arch < SL_ARCH_HOPPER) return SL_OK;
  chain_ctx_t c = {.dev = dev, .T = T};
  const size_t act = (size_t)T * CH_H * 2, qkv = (size_t)T * (CH_QH + 2 * CH_KH) * CH_HD * 2;
  struct {
    void **p;
    size_t bytes;
  } bufs[] = {{&c.x, act},
              {&c.res, act},
              {&c.y, act},
              {&c.w, CH_H * 2},
              {&c.codes, (size_t)T * CH_H},
              {&c.scales, (size_t)T * (CH_H / 128) * 4},
              {&c.qkv, qkv},
              {&c.qw, CH_HD * 2},
              {&c.kw, CH_HD * 2},
              {&c.pos, (size_t)T * 4},
              {&c.cs, (size_t)CH_POS * CH_HD / 2 * 4},
              {&c.sn, (size_t)CH_POS * CH_HD / 2 * 4},
              {&c.gu, (size_t)T * 2 * CH_I * 2},
              {&c.a8, (size_t)T * CH_I},
              {&c.as, (size_t)T * (CH_I / 128) * 4},
              {&c.z, act}};
  const int nb = (int)(sizeof bufs / sizeof bufs[0]);
  sl_status_t s = SL_OK;
  for (int i = 0; i < nb && s == SL_OK; i++) {
    s = sl_device_malloc(dev, bufs[i].bytes, bufs[i].p);
    /* 0x3c bytes: finite bf16 (0.0115) and fp32 values; positions set to 0 below */
    if (s == SL_OK) s = sl_memset(dev, *bufs[i].p, 0x3c, bufs[i].bytes, b->stream);
  }
  if (s == SL_OK) s = sl_memset(dev, c.pos, 0, (size_t)T * 4, b->stream); /* positions 0 (< max_pos) */
  if (s == SL_OK) s = sl_stream_sync(dev, b->stream);
  char shape[32];
  snprintf(shape, sizeof shape, "T=%d qwen3-30b", T);
  for (int pdl = 0; pdl < 2 && s == SL_OK; pdl++) {
    double us = 0;
    c.pdl = pdl;
    s = sl_bench_time(b, chain_once, &c, true, &us);
    if (s == SL_OK)
      sl_bench_row(b, "decode-chain/5", shape, pdl ? "pdl" : "plain", 0, 0, us,
                   pdl ? "every stage a programmatic dependent"
                       : "rmsnorm+res, fp8 quant, qknorm+rope, silu->fp8, "
                         "dequant");
  }
  for (int i = 0; i < nb; i++)
    sl_device_free(dev, *bufs[i].p);
  return s;
}

static sl_status_t run_all(sl_bench_t *b, bool tune) {
  shapes_t sh = bench_shapes(b);
  sl_bench_header(b, "RMSNorm (bf16 in/out/weight; fused: residual = x + residual, y = norm(residual))");
  for (int r = 0; r < 2; r++)
    for (int h = 0; h < sh.hidden_n; h++)
      for (int t = 0; t < sh.tokens_n; t++)
        SL_CHECK(bench_rmsnorm_shape(b, sh.tokens[t], sh.hidden[h], r == 1, tune));
  print_rmsnorm_table(b);
  sl_bench_header(b, "QK-norm (in place, head_dim 128; baseline: rmsnorm over [T*heads, 128] for Q then K)");
  static const int qh[] = {32, 64};
  /* + T = 4096, the shape of the PyTorch reference figure */
  static const int qk_t_full[] = {1, 16, 128, 1024, PYTORCH_QKNORM_T, 8192, 32768};
  const int *qk_t = b->quick ? sh.tokens : qk_t_full;
  const int qk_tn = b->quick ? sh.tokens_n : (int)(sizeof qk_t_full / sizeof *qk_t_full);
  for (int q = 0; q < (b->quick ? 1 : 2); q++)
    for (int t = 0; t < qk_tn; t++)
      SL_CHECK(bench_qknorm_shape(b, qk_t[t], qh[q], 4, tune));
  print_qknorm_table(b);
  sl_bench_header(b, "Embedding lookup (bf16 table, int32 ids)");
  for (int h = 0; h < sh.hidden_n; h++)
    for (int t = 0; t < sh.tokens_n; t++)
      SL_CHECK(bench_embedding_shape(b, sh.tokens[t], sh.hidden[h], tune));
  const sl_device_info_t *info = sl_device_info(b->rt->dev);
  if (sl_bench_selected(b, "decode-chain") && info->backend == SL_BACKEND_CUDA && info->arch >= SL_ARCH_HOPPER) {
    sl_bench_header(b,
                    "Decode chain: five small kernels in a CUDA graph, plain and as programmatic dependents (sm_90+)");
    static const int chain_t[] = {1, 16};
    for (int t = 0; t < 2; t++)
      if (sl_bench_tokens_selected(b, chain_t[t])) SL_CHECK(bench_chain(b, chain_t[t]));
  }
  return SL_OK;
}

int sl_cmd_bench_kernels(sl_runtime_t *rt, int argc, char **argv) {
  sl_bench_t b;
  if (sl_bench_init(rt, &argc, argv, &b) != SL_OK) return 1;
  bool tune = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tune") == 0) {
      tune = true;
    } else {
      if (rt->boot.rank == 0)
        fprintf(stderr,
                "usage: sluice bench kernels [--tune] [--iters N] [--graph-reps N] [--json FILE] [--quick|--full]\n"
                "                            [--only OP] [--tokens N,...] [--hidden N,...] [--flush]\n"
                "unknown option '%s'\n",
                argv[i]);
      sl_bench_finish(&b);
      return 2;
    }
  }
  if (tune && sl_device_backend(rt->dev) != SL_BACKEND_CUDA) {
    if (rt->boot.rank == 0)
      printf("# --tune measures warps per block of the GPU kernels: skipped on the CPU backend\n");
    tune = false;
  }
  sl_status_t s = run_all(&b, tune);
  if (s == SL_OK) s = sl_bench_kernels_quant(&b);
  sl_bench_finish(&b);
  if (s != SL_OK && rt->boot.rank == 0) fprintf(stderr, "sluice bench kernels: %s\n", sl_last_error());
  return s == SL_OK ? 0 : 1;
}
