/* `sluice bench moe-local`: one-GPU MoE dispatch, combine and full layer, for
 * Qwen3-30B-A3B routing (E=128, K=8, H=2048) and DeepSeek-V3 routing (E=256, K=8, H=7168),
 * T in {1, 8, 32, 128, 512, 4096, 16384}; plus the grid barrier. Ceilings: the device copy
 * bandwidth measured in the same run; for the layer, the time to stream the weights of the
 * experts it touched at that bandwidth (the ratio is printed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grid_barrier.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"
#include "sl_bench.h"
#include "sl_cmd.h"

typedef struct {
  const char *name;
  int E, K, H, I;
} model_t;

static const model_t models[] = {{"qwen3-30b-a3b", 128, 8, 2048, 768}, {"deepseek-v3", 256, 8, 7168, 2048}};
static const int token_counts[] = {1, 8, 32, 128, 512, 4096, 16384};

/* Fast deterministic fill (values only matter for not being NaN). */
static void fill_bf16(uint16_t *w, size_t n, float amp, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    w[i] = sl_f32_to_bf16(amp * ((float)(s >> 8) * (1.0f / 8388608.0f) - 1.0f));
  }
}

/* K distinct uniformly random experts per token (balanced in expectation). */
static void fill_routing(int T, int K, int E, int32_t *ids, float *weights, uint32_t seed) {
  uint32_t s = seed * 747796405u + 1u;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e;
      bool dup;
      do {
        s = s * 1664525u + 1013904223u;
        e = (int)((s >> 8) % (uint32_t)E);
        dup = false;
        for (int j = 0; j < k; j++) dup |= ids[(size_t)t * K + j] == e;
      } while (dup);
      ids[(size_t)t * K + k] = e;
      weights[(size_t)t * K + k] = 1.0f / (float)K;
    }
}

/* PyTorch reference (issue text, Qwen3-30B-A3B routing on H200): dispatch and combine µs. */
static const struct {
  int T;
  double dispatch_us, combine_us;
} torch_ref[] = {{1, 96, 27}, {128, 120, 49}, {16384, 442, 3479}};

static void torch_extra(const model_t *m, int T, bool dispatch, double us, double graph_us, char *buf, size_t n) {
  buf[0] = 0;
  if (m->E != 128 || us <= 0) return;
  for (size_t i = 0; i < sizeof torch_ref / sizeof torch_ref[0]; i++)
    if (torch_ref[i].T == T) {
      double ref = dispatch ? torch_ref[i].dispatch_us : torch_ref[i].combine_us;
      double best = graph_us > 0 && graph_us < us ? graph_us : us;
      snprintf(buf, n, "pytorch %.0f us (%.1fx)", ref, best > 0 ? ref / best : 0.0);
    }
}

typedef struct {
  sl_device_t *dev;
  sl_moe_dispatch_args_t da;
  sl_moe_combine_args_t ca;
  sl_moe_layer_t *layer;
  sl_moe_layer_args_t la;
} ctx_t;

static sl_status_t run_dispatch(void *p, int iter, sl_stream_t *st) {
  ctx_t *c = p;
  return sl_moe_dispatch(c->dev, &c->da, st);
}
static sl_status_t run_combine(void *p, int iter, sl_stream_t *st) {
  ctx_t *c = p;
  return sl_moe_combine(c->dev, &c->ca, st);
}
/* The layer benchmark's context: `sets` input batches side by side in x, one per iteration
 * in turn (also inside the captured graph, whose repetitions are captured with their
 * iteration numbers), so consecutive calls route to different experts and L2 (60 MB)
 * cannot serve the weights of the previous call (T=1: 8 experts, 76 MB, would otherwise
 * be partly L2-resident between calls). */
typedef struct {
  sl_moe_layer_t *layer;
  sl_moe_layer_args_t la;
  const char *x;
  size_t set_bytes;
  int sets;
} layer_ctx_t;

static sl_status_t run_layer(void *p, int iter, sl_stream_t *st) {
  layer_ctx_t *c = p;
  sl_moe_layer_args_t a = c->la;
  a.x = c->x + (size_t)(iter % c->sets) * c->set_bytes;
  return sl_moe_layer_forward(c->layer, &a, st);
}

/* SL_BENCH_DECODE_CUT set: only the default decode shape's rows (and its phases) at T = 1, or with
 * SL_BENCH_DECODE_VARIANT=v the forced shape v's. */
static bool decode_cut_only = false;
static int decode_cut_variant = 0;
/* SL_BENCH_PAYLOAD=p (1..4, an sl_moe_payload_t) set: the quantized dispatch rows of that payload only. */
static int payload_only = 0;
/* SL_BENCH_ROUTE_ROUNDS=r (1, 2, 4 or 8) set: the quantized dispatch rows' routing rounds (force_route_rounds). */
static int quant_route_rounds = 0;

/* A benchmark-only integer variable: 0 unset, 1 set (*v in [lo, hi]), -1 invalid (said why). */
static int bench_env(const char *name, long lo, long hi, long *v) {
  const char *e = getenv(name);
  if (!e || !*e) return 0;
  char *end;
  *v = strtol(e, &end, 10);
  if (!*end && *v >= lo && *v <= hi) return 1;
  fprintf(stderr, "sluice bench moe-local: %s='%s' is not valid; accepted: %ld..%ld\n", name, e, lo, hi);
  return -1;
}

static bool gpu_of(const sl_bench_t *b) { return sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA; }

/* Plain and (graph) CUDA-graph times; with the graph, also the kernel device time by CUPTI
 * for the row that follows (b->row_kernel_us; "-" where CUPTI is not available). */
static sl_status_t time_both(sl_bench_t *b, sl_bench_fn fn, void *ctx, bool graph, double *us, double *graph_us) {
  SL_CHECK(sl_bench_time(b, fn, ctx, false, us));
  *graph_us = -1;
  b->row_kernel_us = -1;
  if (graph && gpu_of(b)) {
    SL_CHECK(sl_bench_time(b, fn, ctx, true, graph_us));
    SL_CHECK(sl_bench_time_kernel(b, fn, ctx));
  }
  return SL_OK;
}

/* One comparison row of the quantized dispatch: time `q`'s arguments (a forced variant), check the
 * dispatch's error record, print the row as "<path> <tag>" with "payload <p>, forced<why>". */
static sl_status_t forced_quant_row(sl_bench_t *b, ctx_t *q, void *ws, const char *shape, double qbytes,
                                    sl_moe_path_t path, const char *tag, const char *why) {
  double us = 0, gus = 0;
  SL_CHECK(time_both(b, run_dispatch, q, true, &us, &gus));
  SL_CHECK(sl_moe_dispatch_check(q->dev, ws, b->stream));
  char qpath[48], extra[112];
  snprintf(qpath, sizeof qpath, "%s %s", sl_moe_path_name(path), tag);
  snprintf(extra, sizeof extra, "payload %s, forced%s", sl_moe_payload_name(q->da.payload), why);
  sl_bench_row(b, "moe_dispatch_quant", shape, qpath, us, qbytes, gus, extra);
  return SL_OK;
}

/* The decode kernel's phases (kernels/moe_layer.h, SL_MOE_DECODE_PROF_*): a separate build
 * stamping %globaltimer per block, run eagerly on each input set in turn; for the last run,
 * each stamp's earliest and latest block in us after the earliest start, as one row. */
static sl_status_t decode_phases(sl_bench_t *b, layer_ctx_t *c, const char *shape, const char *name) {
  sl_device_t *dev = b->rt->dev;
  const int sms = sl_device_info(dev)->sm_count;
  const size_t bytes = (size_t)sms * 16 * sizeof(unsigned long long);
  unsigned long long *d = NULL, *h = malloc(bytes);
  if (!h) return SL_ERR(SL_ERR_NOMEM, "decode phases");
  sl_status_t s = sl_device_malloc(dev, bytes, (void **)&d);
  if (s == SL_OK) s = sl_memset(dev, d, 0, bytes, b->stream); /* 0: a stamp the shape never writes */
  layer_ctx_t p = *c;
  p.la.decode_profile = d;
  for (int it = 0; s == SL_OK && it < 2 * p.sets; it++) s = run_layer(&p, it, b->stream);
  if (s == SL_OK) s = sl_memcpy(dev, h, d, bytes, b->stream);
  if (s == SL_OK) s = sl_stream_sync(dev, b->stream);
  if (s == SL_OK) {
    unsigned long long t0 = ~0ull;
    for (int k = 0; k < sms; k++) t0 = h[k * 16] && h[k * 16] < t0 ? h[k * 16] : t0; /* 0: a block that never ran */
    static const char *const stamp[SL_MOE_DECODE_PROF_STAMPS] = {
        "start", "logits", "topk", "gate_up", "bar", "down", "end", "copies", "-", "items0", "comb0", "topk0", "waited"};
    char extra[600];
    int n = snprintf(extra, sizeof extra, "us after the first block's start, min/max over blocks:");
    double end = 0;
    for (int i = 0; i < SL_MOE_DECODE_PROF_STAMPS; i++) {
      if (i == 8) continue; /* unused stamp */
      double lo = 1e30, hi = 0;
      for (int k = 0; k < sms; k++) {
        if (h[k * 16 + i] == 0) continue; /* not written by this block */
        const double v = (double)(h[k * 16 + i] - t0) * 1e-3;
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
      }
      if (lo > hi) continue; /* no block wrote it */
      if (i == 6) end = hi;
      n += snprintf(extra + n, sizeof extra - (size_t)n, " %s %.2f/%.2f", stamp[i], lo, hi);
      if (n >= (int)sizeof extra) break;
    }
    sl_bench_row(b, "moe_layer", shape, name, end, 0, -1, extra);
    /* which SMs end their gate_up share last and first (stamp 3; stamp 8 = SM id) */
    int order[1024], n2 = sms < 1024 ? sms : 1024;
    for (int k = 0; k < n2; k++) order[k] = k;
    for (int k = 1; k < n2; k++) /* insertion sort by stamp 3 */
      for (int j = k; j > 0 && h[order[j] * 16 + 3] < h[order[j - 1] * 16 + 3]; j--) {
        int t = order[j];
        order[j] = order[j - 1], order[j - 1] = t;
      }
    int m = snprintf(extra, sizeof extra, "gate_up end (us) by block/SM, first:");
    for (int k = 0; k < 6 && k < n2; k++)
      m += snprintf(extra + m, sizeof extra - (size_t)m, " %d/%llu %.2f", order[k], h[order[k] * 16 + 8],
                    (double)(h[order[k] * 16 + 3] - t0) * 1e-3);
    m += snprintf(extra + m, sizeof extra - (size_t)m, "; last:");
    for (int k = n2 - 6 > 0 ? n2 - 6 : 0; k < n2 && m < (int)sizeof extra; k++)
      m += snprintf(extra + m, sizeof extra - (size_t)m, " %d/%llu %.2f", order[k], h[order[k] * 16 + 8],
                    (double)(h[order[k] * 16 + 3] - t0) * 1e-3);
    sl_bench_row(b, "moe_layer", shape, name, end, 0, -1, extra);
  }
  if (d) sl_device_free(dev, d);
  free(h);
  return s;
}

/* One forced-variant dispatch row next to the default one (same inputs, same bytes). */
/* A forced dispatch variant for a comparison row (fields 0 = automatic / the default). */
typedef struct {
  int path, span, route_rounds, no_pdl, repl_rank, repl_bal, repl_warps;
} dispatch_force_t;

/* Times the variant and prints its row; label NULL: the name of the path it took. */
static sl_status_t dispatch_variant_row(sl_bench_t *b, const ctx_t *c, const char *shape, double dbytes,
                                        dispatch_force_t v, const char *label, const char *note) {
  ctx_t f = *c;
  sl_moe_path_t fpath = SL_MOE_PATH_NONE;
  f.da.force_path = v.path;
  f.da.force_span = v.span;
  f.da.force_route_rounds = v.route_rounds;
  f.da.split_no_pdl = v.no_pdl;
  f.da.force_repl_rank = v.repl_rank;
  f.da.force_repl_balance = v.repl_bal;
  f.da.force_repl_warps = v.repl_warps;
  f.da.path_taken = &fpath;
  double us = 0, gus = -1;
  SL_CHECK(time_both(b, run_dispatch, &f, true, &us, &gus));
  SL_CHECK(sl_moe_dispatch_check(c->dev, f.da.workspace, b->stream));
  sl_bench_row(b, "moe_dispatch", shape, label ? label : sl_moe_path_name(fpath), us, dbytes, gus, note);
  return SL_OK;
}

/* Dispatch and combine for one model over the token counts. */
static sl_status_t bench_dispatch_combine(sl_bench_t *b, const model_t *m, const int *Ts, int nT) {
  sl_device_t *dev = b->rt->dev;
  const int E = m->E, K = m->K, H = m->H;
  int Tmax = 0;
  for (int i = 0; i < nT; i++) Tmax = Ts[i] > Tmax ? Ts[i] : Tmax;
  sl_status_t s = SL_OK;
  uint16_t *hx = malloc((size_t)Tmax * H * 2);
  int32_t *hids = malloc((size_t)Tmax * K * 4);
  float *hw = malloc((size_t)Tmax * K * 4);
  void *x = NULL, *ids = NULL, *w = NULL, *out = NULL, *counts = NULL, *slots = NULL, *ws = NULL, *ex = NULL;
  if (!hx || !hids || !hw) {
    s = SL_ERR(SL_ERR_NOMEM, "bench inputs");
    goto out;
  }
  fill_bf16(hx, (size_t)Tmax * H, 1.0f, 1);
  fill_routing(Tmax, K, E, hids, hw, 2);
  const size_t ws_bytes = sl_moe_dispatch_workspace_bytes(Tmax, K, E);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * H * 2, &x), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * K * 4, &ids), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * K * 4, &w), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * H * 2, &out), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)E * 4, &counts), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * K * 4, &slots), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, ws_bytes, &ws), s, out);
  SL_CHECK_GOTO(sl_memcpy(dev, x, hx, (size_t)Tmax * H * 2, b->stream), s, out);
  SL_CHECK_GOTO(sl_memcpy(dev, ids, hids, (size_t)Tmax * K * 4, b->stream), s, out);
  SL_CHECK_GOTO(sl_memcpy(dev, w, hw, (size_t)Tmax * K * 4, b->stream), s, out);
  SL_CHECK_GOTO(sl_moe_dispatch_workspace_init(dev, ws, ws_bytes, b->stream), s, out);
  /* Dropless expert buffers for the largest T (DeepSeek-V3 at 16384 tokens: 60 GB), allocated
   * once and (GPU) written once before any timing, as a runtime allocates them at start-up.
   * Session 18: allocated per T, the first row timed after a fresh 60 GB allocation that
   * followed another T's free ran ~10 % slower by events for ~20 ms (DSv3 T=16384 after T=4096:
   * 643 us, alone 580; the graph and CUPTI rows timed right after it were not slowed). On the
   * CPU the pages stay untouched until a dispatch writes its rows. */
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)E * Tmax * H * 2, &ex), s, out);
  if (gpu_of(b)) {
    SL_CHECK_GOTO(sl_memset(dev, ex, 0, (size_t)E * Tmax * H * 2, b->stream), s, out);
    SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, out);
  }
  for (int i = 0; i < nT; i++) {
    const int T = Ts[i];
    sl_moe_path_t path = SL_MOE_PATH_NONE;
    ctx_t c = {.dev = dev};
    c.da = (sl_moe_dispatch_args_t){.num_tokens = T, .hidden = H, .top_k = K, .num_experts = E, .expert_begin = 0,
                                    .expert_end = E, .capacity = sl_moe_dropless_capacity(T), .x = x,
                                    .topk_ids = ids, .expert_x = ex, .expert_counts = counts, .slots = slots,
                                    .workspace = ws, .workspace_bytes = ws_bytes, .path_taken = &path};
    c.ca = (sl_moe_combine_args_t){.num_tokens = T, .hidden = H, .top_k = K, .expert_out = ex, .slots = slots,
                                   .topk_weights = w, .out = out};
    char shape[64];
    snprintf(shape, sizeof shape, "%s T=%d", m->name, T);
    double us = 0, gus = -1;
    /* Bytes that must move: x read once, K copies written (+ ids, counts, slots). */
    double dbytes = (double)T * H * 2 * (1 + K) + (double)T * K * 8 + E * 4;
    double cbytes = (double)T * H * 2 * (1 + K) + (double)T * K * 8;
    /* --only moe_dispatch runs both the bf16 and the quantized rows; --only moe_dispatch_quant (or
     * quant) the quantized ones alone (so a profile's launch count starts at them). */
    if (sl_bench_selected(b, "moe_dispatch_quant")) {
      sl_status_t r = SL_OK;
      if (sl_bench_selected(b, "moe_dispatch")) {
        r = time_both(b, run_dispatch, &c, true, &us, &gus);
        if (r == SL_OK) r = sl_moe_dispatch_check(dev, ws, b->stream);
        if (r != SL_OK) {
          s = r;
          goto out;
        }
        char ref[64];
        torch_extra(m, T, true, gpu_of(b) ? us : 0, gus, ref, sizeof ref);
        sl_bench_row(b, "moe_dispatch", shape, sl_moe_path_name(path), us, dbytes, gus, ref[0] ? ref : NULL);
        if (path == SL_MOE_PATH_REPLICATED && gpu_of(b)) { /* the cooperative path, for comparison */
          r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.path = SL_MOE_PATH_FUSED}, NULL,
                                   "forced (comparison)");
          if (r == SL_OK)
            r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.repl_rank = SL_MOE_REPL_RANK_SCAN},
                                     "replicated scan", "forced (comparison: scan ranking, the previous kernel)");
          /* The plain kernel at 8 and 4 warps per block where the host picks another count, and at
           * 14 and 28 where those divide the row's chunks (DeepSeek-V3: 2 blocks / 1 block per token). */
          static const int warps[] = {8, 4, 14, 28};
          const int chunks = sl_moe_chunks_per_row(H, 1);
          for (int i = 0; r == SL_OK && i < 4; i++) {
            if (warps[i] == sl_moe_repl_warps(H) || (warps[i] > 8 && chunks % warps[i])) continue;
            char label[48], note[96];
            snprintf(label, sizeof label, "replicated w%d", warps[i]);
            snprintf(note, sizeof note, "forced (comparison: %d warps per block; the default %d)", warps[i],
                     sl_moe_repl_warps(H));
            r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.repl_warps = warps[i]}, label, note);
          }
          /* The balanced replicated kernel (force_repl_balance): k x SMs blocks of equal item ranges. */
          for (int bal = 1; r == SL_OK && bal <= SL_MOE_REPL_BAL_LAST; bal++) {
            char label[48];
            snprintf(label, sizeof label, "replicated %s", sl_moe_repl_bal_name(bal));
            r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.repl_bal = bal}, label,
                                     "forced (comparison: balanced, threads x blocks per SM)");
          }
        }
        if (path == SL_MOE_PATH_SPLIT && gpu_of(b)) { /* split-path comparisons */
          r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.span = 1 << 20}, /* clipped to a row */
                                   "route+copy rows", "forced (comparison: whole rows per warp item)");
          if (r == SL_OK)
            r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.no_pdl = 1}, "route+copy nopdl",
                                     "forced (comparison: no PDL between routing and copy)");
          if (r == SL_OK)
            r = dispatch_variant_row(b, &c, shape, dbytes, (dispatch_force_t){.route_rounds = 8, .no_pdl = 1},
                                     "route+copy r8 nopdl",
                                     "forced (comparison: 8-round routing blocks, no PDL: the previous launches)");
        }
      }
      if (r != SL_OK) {
        s = r;
        goto out;
      }
      /* Fused payload quantization: x read once, K quantized rows + scales written. */
      void *scales = NULL;
      r = sl_device_malloc(dev, (size_t)E * T * (H / 16) + 256, &scales);
      for (int p = SL_MOE_PAYLOAD_FP8_GROUP; p <= SL_MOE_PAYLOAD_NVFP4 && r == SL_OK; p++) {
        if (payload_only && p != payload_only) continue;
        ctx_t q = c;
        q.da.payload = (sl_moe_payload_t)p;
        q.da.quant_rule = p == SL_MOE_PAYLOAD_FP8_GROUP ? SL_QRULE_IEEE : SL_QRULE_CEIL;
        q.da.global_scale = 448.0f * 6.0f / 8.0f;
        q.da.expert_scales = scales;
        q.da.force_route_rounds = quant_route_rounds;
        r = time_both(b, run_dispatch, &q, true, &us, &gus);
        if (r == SL_OK) r = sl_moe_dispatch_check(dev, ws, b->stream);
        if (r != SL_OK) break;
        const double qbytes = (double)T * H * 2 + (double)T * K * sl_moe_payload_row_bytes(q.da.payload, H) +
                              (double)T * K * sl_moe_payload_scales_per_row(q.da.payload, H) *
                                  sl_moe_payload_scale_bytes(q.da.payload) +
                              (double)T * K * 8 + E * 4;
        char qpath[48], extra[96];
        int seg = 0, stages = 0;
        size_t smem = 0;
        const int arch = sl_device_info(dev)->arch;
        const bool split_gpu = path == SL_MOE_PATH_SPLIT && gpu_of(b);
        const int copy = split_gpu ? sl_moe_split_copy(&q.da, arch, sl_device_info(dev)->sm_count) : 0;
        const bool staged = split_gpu && sl_moe_staged_applies(&q.da, arch, &seg, &stages, &smem);
        snprintf(qpath, sizeof qpath, "%s", sl_moe_path_name(path));
        if (copy == SL_MOE_COPY_STAGED)
          snprintf(extra, sizeof extra, "payload %s, staged copy %dx%d", sl_moe_payload_name(q.da.payload), seg,
                   stages);
        else if (copy == SL_MOE_COPY_DIRECT)
          snprintf(extra, sizeof extra, "payload %s, direct copy", sl_moe_payload_name(q.da.payload));
        else
          snprintf(extra, sizeof extra, "payload %s", sl_moe_payload_name(q.da.payload));
        sl_bench_row(b, "moe_dispatch_quant", shape, qpath, us, qbytes, gus, extra);
        if (path == SL_MOE_PATH_REPLICATED && gpu_of(b)) { /* the balanced kernel, 2 x 256 */
          q.da.force_repl_balance = SL_MOE_REPL_BAL_256X2;
          r = forced_quant_row(b, &q, ws, shape, qbytes, path, sl_moe_repl_bal_name(SL_MOE_REPL_BAL_256X2), "");
          if (r != SL_OK) break;
        }
        if (split_gpu) { /* the register copy (the first), the other of staged / direct, the staged knobs */
          q.da.force_copy = SL_MOE_COPY_REGS;
          r = forced_quant_row(b, &q, ws, shape, qbytes, path, "regs", " (comparison: the register copy)");
          if (r == SL_OK && copy != SL_MOE_COPY_DIRECT && sl_moe_direct_applies(&q.da)) {
            q.da.force_copy = SL_MOE_COPY_DIRECT;
            r = forced_quant_row(b, &q, ws, shape, qbytes, path, "direct", " (comparison: the direct copy)");
          }
          if (r == SL_OK && copy != SL_MOE_COPY_STAGED && staged) {
            q.da.force_copy = SL_MOE_COPY_STAGED;
            char why[64];
            snprintf(why, sizeof why, " (comparison: the staged copy %dx%d)", seg, stages);
            r = forced_quant_row(b, &q, ws, shape, qbytes, path, "staged", why);
          }
          q.da.force_copy = SL_MOE_COPY_STAGED;
          if (r == SL_OK && staged) {
            q.da.staged_scale_bulk = 1;
            r = forced_quant_row(b, &q, ws, shape, qbytes, path, "sbulk",
                                 " (comparison: the staged copy's scales by bulk copies)");
            q.da.staged_scale_bulk = 0;
          }
          if (r != SL_OK) break;
          /* SL_BENCH_STAGED="seg:stages,...": more staged shapes (those that do not apply are skipped). */
          const char *list = staged ? getenv("SL_BENCH_STAGED") : NULL;
          for (const char *e = list; e && *e && r == SL_OK;) {
            int fs = 0, fn = 0;
            if (sscanf(e, "%d:%d", &fs, &fn) == 2 && fs > 0 && fs % 512 == 0 && H % fs == 0 && fn >= 2 && fn <= 4) {
              q.da.force_staged_seg = fs;
              q.da.force_staged_stages = fn;
              char tag[32];
              snprintf(tag, sizeof tag, "staged %dx%d", fs, fn);
              r = forced_quant_row(b, &q, ws, shape, qbytes, path, tag, "");
              if (r != SL_OK) break;
            }
            e = strchr(e, ',');
            if (e) e++;
          }
        }
      }
      if (scales) sl_device_free(dev, scales);
      if (r != SL_OK) {
        s = r;
        goto out;
      }
    }
    if (sl_bench_selected(b, "moe_combine")) {
      /* Slots of a real dispatch first (combine reads the dispatched rows). */
      sl_status_t r = sl_moe_dispatch(dev, &c.da, b->stream);
      if (r == SL_OK) r = time_both(b, run_combine, &c, true, &us, &gus);
      if (r != SL_OK) {
        s = r;
        goto out;
      }
      /* Row names as before: "decode" below 8 items (warps) per SM, else "prefill" (both
       * run the unroll-1 kernel now; the unroll-2 one is the comparison row). */
      const bool decode = (long)T * sl_moe_chunks_per_row(H, 1) < 8L * sl_device_info(dev)->sm_count;
      char ref[64];
      torch_extra(m, T, false, gpu_of(b) ? us : 0, gus, ref, sizeof ref);
      sl_bench_row(b, "moe_combine", shape, !gpu_of(b) ? "cpu" : decode ? "decode" : "prefill", us, cbytes, gus,
                   ref[0] ? ref : NULL);
      if (!decode && gpu_of(b)) {
        ctx_t f = c;
        f.ca.force_unroll = 2;
        double fus = 0, fgus = -1;
        r = time_both(b, run_combine, &f, true, &fus, &fgus);
        if (r != SL_OK) {
          s = r;
          goto out;
        }
        sl_bench_row(b, "moe_combine", shape, "prefill-u2", fus, cbytes, fgus,
                     "forced (comparison: the old unroll-2 kernel)");
      }
    }
  }
out:
  SL_CHECK(sl_stream_sync(dev, b->stream));
  void *bufs[] = {x, ids, w, out, counts, slots, ws, ex};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) sl_device_free(dev, bufs[i]);
  free(hx);
  free(hids);
  free(hw);
  return s;
}

/* Per-stage breakdown of the layer at T tokens: each stage alone, captured in a graph
 * (sl_moe_layer_args_t.stages), on the buffers the previous full call left (the routing of
 * the last input set: the FFN stage re-reads the same experts' weights every repetition, so
 * L2 may serve part of them -- its row is a lower bound). Unfused: logits, top-k, dispatch,
 * FFN, combine; fused (fuse_small on): dispatch with the top-k inside, combine launched with
 * PDL (its predecessor in the graph is the previous combine: the PDL overlap it gets there is
 * not the in-layer one). Rows "stage/<name>"; the full layer's rows above give the total. */
static sl_status_t bench_layer_stages(sl_bench_t *b, const model_t *m, sl_moe_layer_t *layer, void *x, void *out,
                                      int T) {
  static const struct {
    unsigned stages;
    int fuse;
    const char *name, *what;
  } st[] = {
      {SL_MOE_STAGE_LOGITS, SL_MOE_FUSE_OFF, "stage/logits", "router logits GEMV alone"},
      {SL_MOE_STAGE_TOPK, SL_MOE_FUSE_OFF, "stage/topk", "router top-k kernel alone"},
      {SL_MOE_STAGE_DISPATCH, SL_MOE_FUSE_OFF, "stage/dispatch", "dispatch alone (ids given)"},
      {SL_MOE_STAGE_DISPATCH, SL_MOE_FUSE_ON, "stage/topk+dispatch", "fused: top-k inside dispatch, alone"},
      {SL_MOE_STAGE_FFN, SL_MOE_FUSE_OFF, "stage/ffn", "gate_up + down alone (same experts every rep: L2 helps)"},
      {SL_MOE_STAGE_COMBINE, SL_MOE_FUSE_OFF, "stage/combine", "combine alone"},
      {SL_MOE_STAGE_COMBINE, SL_MOE_FUSE_ON, "stage/combine-pdl", "combine PDL build alone"},
      {SL_MOE_STAGE_LOGITS | SL_MOE_STAGE_TOPK | SL_MOE_STAGE_DISPATCH, SL_MOE_FUSE_OFF, "stage/prefix",
       "logits + top-k + dispatch"},
      {SL_MOE_STAGE_LOGITS | SL_MOE_STAGE_TOPK | SL_MOE_STAGE_DISPATCH, SL_MOE_FUSE_ON, "stage/prefix-fused",
       "logits + fused top-k/dispatch (PDL)"},
  };
  char shape[64];
  snprintf(shape, sizeof shape, "%s T=%d", m->name, T);
  for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
    layer_ctx_t c = {.layer = layer, .x = x, .set_bytes = 0, .sets = 1};
    /* the chain of launches (decode_kernel off: the one-kernel decode layer has no stages; its
     * phases are the "decode-kernel ... phases" rows) */
    c.la = (sl_moe_layer_args_t){.num_tokens = T, .x = x, .out = out, .fuse_small = st[i].fuse,
                                 .decode_kernel = SL_MOE_FUSE_OFF};
    /* One full call first: the stage's inputs (logits, ids, rows) as this setting leaves them. */
    SL_CHECK(run_layer(&c, 0, b->stream));
    c.la.stages = st[i].stages;
    double us = 0, gus = -1;
    SL_CHECK(time_both(b, run_layer, &c, true, &us, &gus));
    SL_CHECK(sl_moe_layer_check(layer, b->stream));
    sl_bench_row(b, "moe_layer", shape, st[i].name, us, 0, gus, st[i].what);
  }
  return SL_OK;
}

/* The full layer (router GEMM, router, dispatch, FFN, combine) at Qwen3-30B-A3B size. */
static sl_status_t bench_layer(sl_bench_t *b, const model_t *m, const int *Ts, int nT) {
  sl_device_t *dev = b->rt->dev;
  const int E = m->E, K = m->K, H = m->H, I = m->I;
  int Tmax = 0;
  for (int i = 0; i < nT; i++) Tmax = Ts[i] > Tmax ? Ts[i] : Tmax;
  const size_t nr = (size_t)E * H, ngu = (size_t)E * 2 * I * H, nd = (size_t)E * H * I;
  /* Input batches rotated per iteration (layer_ctx_t): per T, up to 8 batches of T tokens in
   * an x of max(Tmax tokens, 8 x 128 tokens) -- so every decode T (<= 128) rotates 8 batches
   * (different experts each call: L2 cannot serve the previous call's weights), whatever
   * larger T the run also covers. */
  const size_t xcap = (size_t)(Tmax > 8 * 128 ? Tmax : 8 * 128) * H * 2;
  sl_status_t s = SL_OK;
  uint16_t *hw = malloc(ngu * 2), *hx = malloc(xcap);
  int32_t *counts = malloc((size_t)E * 4);
  void *wr = NULL, *wgu = NULL, *wd = NULL, *x = NULL, *out = NULL;
  sl_moe_layer_t *layer = NULL;
  if (!hw || !hx || !counts) {
    s = SL_ERR(SL_ERR_NOMEM, "bench layer weights");
    goto out;
  }
  SL_CHECK_GOTO(sl_device_malloc(dev, nr * 2, &wr), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, ngu * 2, &wgu), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, nd * 2, &wd), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, xcap, &x), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)Tmax * H * 2, &out), s, out);
  fill_bf16(hw, nr, 0.08f, 3);
  SL_CHECK_GOTO(sl_memcpy(dev, wr, hw, nr * 2, NULL), s, out);
  fill_bf16(hw, ngu, 0.04f, 4);
  SL_CHECK_GOTO(sl_memcpy(dev, wgu, hw, ngu * 2, NULL), s, out);
  fill_bf16(hw, nd, 0.06f, 5);
  SL_CHECK_GOTO(sl_memcpy(dev, wd, hw, nd * 2, NULL), s, out);
  fill_bf16(hx, xcap / 2, 1.0f, 6);
  SL_CHECK_GOTO(sl_memcpy(dev, x, hx, xcap, NULL), s, out);
  sl_moe_layer_config_t cfg = {.num_experts = E, .top_k = K, .hidden = H, .inter = I, .expert_begin = 0,
                               .expert_end = E, .router_kind = SL_ROUTER_SOFTMAX_TOPK, .renormalize = true,
                               .w_router = wr, .w_gate_up = wgu, .w_down = wd};
  SL_CHECK_GOTO(sl_moe_layer_create(dev, &cfg, Tmax, &layer), s, out);
  const double expert_bytes = (double)(2 * I * H + H * I) * 2;
  for (int i = 0; i < nT; i++) {
    const int T = Ts[i];
    const size_t set_bytes = (size_t)T * H * 2;
    int sets = T > 0 ? (int)(xcap / set_bytes) : 1;
    sets = sets < 1 ? 1 : sets > 8 ? 8 : sets;
    /* Variants (4: "<path>/gemv-bulk", the bulk-copy variant forced at T <= 8 on sm_90+):
     * 0 padded mode, automatic FFN ("gemv": the weight-streaming kernels while
     * rows per expert <= 16, or T*K / E <= 16 on average, sl_moe_ffn_uses_gemv; else the
     * batched GEMMs, "padded"); 1 padded mode with the batched GEMMs, only where 0 took the
     * streaming kernels (comparison); 2 exact GEMMs (one count read), from 64 rows; 3 the
     * other streaming variant than the automatic one (sl_moe_ffn_gemv_variant: split while
     * rows per expert <= 8, else wide) where the streaming kernels ran, T <= 16: the rows
     * "<path>/gemv-wide" (T <= 8) and "<path>/gemv-split" (T = 9..16) compare the two in one
     * run; the automatic row's extra column names the variant it ran; 4 the small-T fusion
     * (sl_moe_layer_args_t.fuse_small) set the other way than AUTO, at T <= 16: the row
     * "<path>/gemv/fused" (or "/unfused" once AUTO means on) next to the default; 5 the FFN's
     * bulk-copy variant forced at T <= 8 on sm_90+ ("<path>/gemv-bulk"); 6: where the default
     * row took the one-kernel decode layer (AUTO, T = 1; named "one-kernel/decode-kernel"), the
     * chain of launches it replaces (decode_kernel off; variants 1-5 are chains too); 7..: the
     * decode layer forced (decode_kernel ON) in each of its shapes at T = 1, where it applies
     * ("decode-kernel 15x1xs" ...), each followed by its phase timestamps (decode_phases). */
    bool default_decode = false;
    for (int variant = 0; variant < 7 + SL_MOE_DECODE_VARIANTS + 1; variant++) {
      const bool exact = variant == 2;
      const sl_moe_ffn_args_t probe = {.num_local_experts = E, .capacity = T, .num_tokens = T, .top_k = K};
      const bool gemv = sl_moe_ffn_uses_gemv(&probe);
      const bool auto_split = sl_moe_ffn_gemv_variant(&probe) == SL_MOE_FFN_GEMV_SPLIT;
      if (exact ? T <= SL_MOE_FFN_PADDED_MAX_ROWS : T > 128) continue;
      if (variant == 1 && !gemv) continue;
      if (variant == 3 && (!gemv || T > 16)) continue;
      if (variant == 4 && T > SL_MOE_TOPK_FUSED_MAX_TOKENS) continue;
      /* 5: the bulk variant forced (sm_90+), T <= 8, unless the automatic choice took it. */
      const bool auto_bulk = sl_moe_ffn_gemv_variant(&probe) == SL_MOE_FFN_GEMV_BULK;
      if (variant == 5 && (!gemv || T > 8 || auto_bulk || sl_device_info(dev)->arch < SL_ARCH_HOPPER)) continue;
      /* SL_MOE_DECODE_*, the decode-kernel rows; the last one: the default shape without PDL */
      const bool nopdl = variant == 7 + SL_MOE_DECODE_VARIANTS;
      const int dvariant = nopdl ? 0 : variant - 7;
      if (dvariant >= 0 && (T != 1 || !gpu_of(b))) continue;
      if (decode_cut_only && (T != 1 || dvariant != decode_cut_variant || nopdl)) continue;
      if (variant == 6 && !default_decode) continue;
      bool dtaken = false;
      const int fuse = variant != 4 ? SL_MOE_FUSE_AUTO : SL_MOE_LAYER_FUSE_SMALL_AUTO ? SL_MOE_FUSE_OFF : SL_MOE_FUSE_ON;
      bool fused = false;
      const int gemv_variant = variant == 5   ? SL_MOE_FFN_GEMV_BULK
                               : variant != 3 ? SL_MOE_FFN_GEMV_AUTO
                               : auto_split   ? SL_MOE_FFN_GEMV_WIDE
                                              : SL_MOE_FFN_GEMV_SPLIT;
      sl_moe_path_t path = SL_MOE_PATH_NONE;
      layer_ctx_t c = {.layer = layer, .x = x, .set_bytes = set_bytes, .sets = sets};
      c.la = (sl_moe_layer_args_t){.num_tokens = T, .x = x, .out = out, .allow_host_sync = exact,
                                   .ffn_small_rows = variant == 1 ? -1 : 0, .ffn_gemv_variant = gemv_variant,
                                   .path_taken = &path, .fuse_small = fuse, .fused_taken = &fused,
                                   .decode_kernel = dvariant >= 0 ? SL_MOE_FUSE_ON
                                                    : variant == 0 ? SL_MOE_FUSE_AUTO
                                                                   : SL_MOE_FUSE_OFF,
                                   .decode_variant = dvariant >= 0 ? dvariant : 0,
                                   .decode_pdl = nopdl ? SL_MOE_FUSE_OFF : SL_MOE_FUSE_AUTO, .decode_taken = &dtaken};
      if (dvariant >= 0) { /* only where it applies (one untimed call says) */
        SL_CHECK_GOTO(run_layer(&c, 0, b->stream), s, out);
        SL_CHECK_GOTO(sl_moe_layer_check(layer, b->stream), s, out);
        if (!dtaken) continue;
      }
      double us = 0, gus = -1;
      SL_CHECK_GOTO(time_both(b, run_layer, &c, !exact, &us, &gus), s, out);
      SL_CHECK_GOTO(sl_moe_layer_check(layer, b->stream), s, out);
      SL_CHECK_GOTO(sl_memcpy(dev, counts, sl_moe_layer_expert_counts(layer), (size_t)E * 4, b->stream), s, out);
      SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, out);
      int touched = 0;
      for (int e = 0; e < E; e++) touched += counts[e] > 0;
      const double bytes = touched * expert_bytes + (double)nr * 2;
      const double stream_us = b->copy_gbps > 0 ? bytes / (b->copy_gbps * 1e3) : 0;
      const double best = gus > 0 && gus < us ? gus : us;
      char shape[64], path_name[64], extra[160];
      snprintf(shape, sizeof shape, "%s T=%d", m->name, T);
      static const char *const dnames[SL_MOE_DECODE_VARIANTS] = {
          "decode-kernel 15x1xs-tag-pr-if-dl", "decode-kernel 12x1",           "decode-kernel 7x2",
          "decode-kernel 15x1xs-bar",          "decode-kernel 15x1xs-tag-mma", "decode-kernel 15x1xs-tag",
          "decode-kernel 15x1xs-tag-pr",       "decode-kernel 15x1xs-tag-if",  "decode-kernel 15x1xs-tag-pr-if",
          "decode-kernel 15x1xs-tag-pr-if-dl-all"};
      snprintf(path_name, sizeof path_name, "%s/%s%s", dtaken ? "one-kernel" : sl_moe_path_name(path),
               dvariant >= 0                          ? dnames[dvariant]
               : dtaken                               ? "decode-kernel"
               : exact                                ? "exact"
               : variant == 5                         ? "gemv-bulk"
               : variant == 3                         ? (auto_split ? "gemv-wide" : "gemv-split")
               : variant == 4 && fuse == SL_MOE_FUSE_ON ? (fused ? (gemv ? "gemv/fused" : "padded/fused")
                                                                       : "fused-not-taken")
               : variant == 4                         ? (gemv ? "gemv/unfused" : "padded/unfused")
               : variant == 6 && gemv                 ? (fused ? "gemv/fused" : "gemv")
               : variant == 0 && gemv                 ? "gemv"
                                                      : "padded",
               nopdl ? ", no PDL" : "");
      snprintf(extra, sizeof extra, "%d experts touched, weights %.1f MB, stream %.1f us, ratio %.2f, %d input sets%s",
               touched, bytes / 1e6, stream_us, stream_us > 0 ? best / stream_us : 0.0, sets,
               dtaken               ? (dvariant >= 0 ? ", the whole layer in one cooperative kernel (forced)"
                                                     : ", the whole layer in one cooperative kernel (default)")
               : variant == 0 && gemv ? (auto_bulk ? ", bulk kernels" : auto_split ? ", split kernels" : ", wide kernels")
               : variant == 3       ? ", comparison: the other streaming variant (forced)"
               : variant == 4       ? (fused                    ? ", top-k in dispatch + PDL edges (fuse_small on)"
                                       : fuse == SL_MOE_FUSE_ON ? ", fuse_small on but not applicable here"
                                                                : ", fuse_small off (comparison)")
               : variant == 5       ? ", comparison: the bulk-copy variant (forced)"
               : variant == 6       ? ", the chain of launches (decode_kernel off; comparison)"
                                    : "");
      sl_bench_row(b, "moe_layer", shape, path_name, us, bytes, gus, extra);
      if (variant == 0) default_decode = dtaken;
      if (dvariant >= 0) {
        char pname[64];
        snprintf(pname, sizeof pname, "%s%s phases", dnames[dvariant], nopdl ? ", no PDL" : "");
        SL_CHECK_GOTO(decode_phases(b, &c, shape, pname), s, out);
      }
    }
    if (gpu_of(b) && !decode_cut_only && (T == 1 || T == 8)) SL_CHECK_GOTO(bench_layer_stages(b, m, layer, x, out, T), s, out);
  }
out:
  sl_stream_sync(dev, b->stream);
  sl_moe_layer_destroy(layer);
  void *bufs[] = {wr, wgu, wd, x, out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) sl_device_free(dev, bufs[i]);
  free(hw);
  free(hx);
  free(counts);
  return s;
}

/* The expert FFN alone (no router, dispatch, combine): the weight-streaming kernels forced
 * in each variant (wide, split, bulk on sm_90+) on dispatch-shaped input, capacity T, so
 * the FFN's own rate shows apart from the rest of the layer. The counts come from 8 random
 * routings rotated per iteration (also inside the graph): each call touches other experts,
 * so L2 (60 MB) does not serve the previous call's weights. Ratio = best of plain and graph
 * time / streaming the touched experts' weights (average over the 8 routings) at the copy
 * bandwidth measured in this run. */
typedef struct {
  sl_device_t *dev;
  sl_moe_ffn_args_t fa;
  const int32_t *counts; /* [sets][E] */
  int E, sets;
} ffn_ctx_t;

static sl_status_t run_ffn(void *p, int iter, sl_stream_t *st) {
  ffn_ctx_t *c = p;
  sl_moe_ffn_args_t a = c->fa;
  a.expert_counts = c->counts + (size_t)(iter % c->sets) * c->E;
  return sl_moe_ffn(c->dev, &a, st);
}

static sl_status_t bench_ffn(sl_bench_t *b, const model_t *m, const int *Ts, int nT) {
  sl_device_t *dev = b->rt->dev;
  if (!gpu_of(b)) return SL_OK;
  enum { SETS = 8 };
  const int E = m->E, K = m->K, H = m->H, I = m->I;
  int Tmax = 0;
  for (int i = 0; i < nT; i++)
    if (Ts[i] <= 128 && Ts[i] > Tmax) Tmax = Ts[i];
  if (Tmax == 0) return SL_OK;
  const size_t ngu = (size_t)E * 2 * I * H, nd = (size_t)E * H * I, nx = (size_t)E * Tmax * H;
  const size_t ws_bytes = sl_moe_ffn_workspace_bytes(E, Tmax, Tmax, K, H, I);
  sl_status_t s = SL_OK;
  uint16_t *hw = malloc((ngu > nx ? ngu : nx) * 2);
  int32_t *hc = malloc((size_t)SETS * E * 4), *ids = malloc((size_t)Tmax * K * 4);
  float *wts = malloc((size_t)Tmax * K * 4);
  void *wgu = NULL, *wd = NULL, *x = NULL, *y = NULL, *ws = NULL, *dc = NULL;
  sl_dev_error_t *err = NULL;
  if (!hw || !hc || !ids || !wts) {
    s = SL_ERR(SL_ERR_NOMEM, "bench ffn host buffers");
    goto out;
  }
  SL_CHECK_GOTO(sl_device_malloc(dev, ngu * 2, &wgu), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, nd * 2, &wd), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, nx * 2, &x), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, nx * 2, &y), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, ws_bytes, &ws), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)SETS * E * 4, &dc), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, sizeof *err, (void **)&err), s, out);
  SL_CHECK_GOTO(sl_memset(dev, err, 0, sizeof *err, NULL), s, out);
  fill_bf16(hw, ngu, 0.04f, 14);
  SL_CHECK_GOTO(sl_memcpy(dev, wgu, hw, ngu * 2, NULL), s, out);
  fill_bf16(hw, nd, 0.06f, 15);
  SL_CHECK_GOTO(sl_memcpy(dev, wd, hw, nd * 2, NULL), s, out);
  fill_bf16(hw, nx, 1.0f, 16);
  SL_CHECK_GOTO(sl_memcpy(dev, x, hw, nx * 2, NULL), s, out);
  const double expert_bytes = (double)(2 * I * H + H * I) * 2;
  static const int variants[] = {SL_MOE_FFN_GEMV_WIDE, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_FFN_GEMV_BULK};
  static const char *const names[] = {"gemv-wide", "gemv-split", "gemv-bulk"};
  for (int i = 0; i < nT && s == SL_OK; i++) {
    const int T = Ts[i];
    if (T > 128) continue;
    double touched = 0;
    for (int set = 0; set < SETS; set++) {
      int32_t *c = hc + (size_t)set * E;
      memset(c, 0, (size_t)E * 4);
      fill_routing(T, K, E, ids, wts, 100u + (uint32_t)(T * SETS + set));
      for (int p = 0; p < T * K; p++) c[ids[p]]++;
      for (int e = 0; e < E; e++) touched += c[e] > 0;
    }
    touched /= SETS;
    SL_CHECK_GOTO(sl_memcpy(dev, dc, hc, (size_t)SETS * E * 4, NULL), s, out);
    SL_CHECK_GOTO(sl_device_sync(dev), s, out);
    const double bytes = touched * expert_bytes;
    const double stream_us = b->copy_gbps > 0 ? bytes / (b->copy_gbps * 1e3) : 0;
    for (int v = 0; v < 3 && s == SL_OK; v++) {
      if (variants[v] == SL_MOE_FFN_GEMV_BULK && sl_device_info(dev)->arch < SL_ARCH_HOPPER) continue;
      ffn_ctx_t c = {.dev = dev, .counts = dc, .E = E, .sets = SETS};
      c.fa = (sl_moe_ffn_args_t){.num_local_experts = E, .capacity = T, .hidden = H, .inter = I, .num_tokens = T,
                                 .top_k = K, .x = x, .expert_counts = dc, .w_gate_up = wgu, .w_down = wd, .y = y,
                                 .workspace = ws, .workspace_bytes = ws_bytes, .small_rows = 1,
                                 .gemv_variant = variants[v], .error = err};
      double us = 0, gus = -1;
      SL_CHECK_GOTO(time_both(b, run_ffn, &c, true, &us, &gus), s, out);
      sl_dev_error_t rec;
      SL_CHECK_GOTO(sl_memcpy(dev, &rec, err, sizeof rec, b->stream), s, out);
      SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, out);
      SL_CHECK_GOTO(sl_dev_error_status(&rec, "bench moe_ffn"), s, out);
      const double best = gus > 0 && gus < us ? gus : us;
      char shape[64], extra[160];
      snprintf(shape, sizeof shape, "%s T=%d", m->name, T);
      snprintf(extra, sizeof extra,
               "FFN only, %.1f experts touched (avg of %d routings), weights %.1f MB, stream %.1f us, ratio %.2f", touched,
               SETS, bytes / 1e6, stream_us, stream_us > 0 ? best / stream_us : 0.0);
      sl_bench_row(b, "moe_ffn", shape, names[v], us, bytes, gus, extra);
    }
  }
out:
  sl_stream_sync(dev, b->stream);
  void *bufs[] = {wgu, wd, x, y, ws, dc, err};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) sl_device_free(dev, bufs[i]);
  free(hw);
  free(hc);
  free(ids);
  free(wts);
  return s;
}

static sl_status_t bench_barrier(sl_bench_t *b) {
  sl_device_t *dev = b->rt->dev;
  if (!gpu_of(b)) return SL_OK;
  sl_grid_barrier_state_t *state;
  SL_CHECK(sl_device_malloc(dev, sizeof *state, (void **)&state));
  sl_status_t s = sl_memset(dev, state, 0, sizeof *state, b->stream);
  const int sms = sl_device_info(dev)->sm_count;
  /* Variant 1 (acquire polls, no exit fence: the one kernels use since the H200 measured it
   * faster) under the row name "coop"; variant 0 (relaxed polls + one fence) and variant 2
   * (cooperative_groups grid.sync: the ceiling, measured in the same run) as comparison
   * rows. The three alternate over 5 rounds and each keeps its best, so drift hits them alike. */
  static const int order[3] = {1, 0, 2};
  double best[3] = {1e30, 1e30, 1e30};
  for (int round = 0; round < 5 && s == SL_OK; round++)
    for (int i = 0; i < 3 && s == SL_OK; i++) {
      double us = 0;
      s = sl_grid_barrier_bench_variant(dev, state, order[i], sms, 10000, -1, 0, b->stream, &us);
      if (s == SL_OK && us < best[i]) best[i] = us;
    }
  for (int i = 0; i < 3 && s == SL_OK; i++) {
    char shape[32], extra[160];
    snprintf(shape, sizeof shape, "%d blocks", sms);
    if (order[i] == 1)
      snprintf(extra, sizeof extra,
               "per barrier, acquire polls, barrier-only loop (best of 5 x 10000, each after a checked run); "
               "%.2f x cooperative_groups grid.sync", best[2] > 0 ? best[i] / best[2] : 0.0);
    else
      snprintf(extra, sizeof extra, "%s",
               order[i] == 0 ? "comparison: relaxed polls + one acq_rel fence"
                             : "comparison: cooperative_groups grid.sync (the ceiling), same loop");
    sl_bench_row(b, "grid_barrier", shape, order[i] == 1 ? "coop" : order[i] == 0 ? "coop-relaxed" : "cg-grid-sync",
                 best[i], 0, -1, extra);
  }
  /* SL_BENCH_BARRIER_BLOCKS="n,...": the barrier (and grid.sync) at more blocks per grid, e.g. the resident
   * grids of 2, 4 or 7 blocks per SM (H200, session 22: 132 / 264 / 528 / 924 blocks 0.97 / 1.23 / 1.70 / 2.81 us,
   * grid.sync 0.98 / 0.99 / 1.23 / 1.86: every block's arrival on one word, and its polls, cost). */
  for (const char *e = getenv("SL_BENCH_BARRIER_BLOCKS"); e && *e && s == SL_OK;) {
    const int n = atoi(e);
    double us[2] = {1e30, 1e30};
    for (int round = 0; round < 3 && s == SL_OK && n > 0; round++)
      for (int i = 0; i < 2 && s == SL_OK; i++) {
        double u = 0;
        s = sl_grid_barrier_bench_variant(dev, state, i ? 2 : 1, n, 2000, -1, 0, b->stream, &u);
        if (s == SL_OK && u < us[i]) us[i] = u;
      }
    if (n > 0 && s == SL_OK) {
      char shape[32];
      snprintf(shape, sizeof shape, "%d blocks", n);
      sl_bench_row(b, "grid_barrier", shape, "coop", us[0], 0, -1, "SL_BENCH_BARRIER_BLOCKS (best of 3 x 2000)");
      sl_bench_row(b, "grid_barrier", shape, "cg-grid-sync", us[1], 0, -1, "SL_BENCH_BARRIER_BLOCKS comparison");
    }
    e = strchr(e, ',');
    if (e) e++;
  }
  sl_device_free(dev, state);
  return s;
}

int sl_cmd_bench_moe_local(sl_runtime_t *rt, int argc, char **argv) {
  sl_bench_t b;
  if (sl_bench_init(rt, &argc, argv, &b) != SL_OK) {
    fprintf(stderr, "sluice bench moe-local: %s\n", sl_last_error());
    return 1;
  }
  if (argc > 1) {
    fprintf(stderr, "usage: sluice bench moe-local [--iters N] [--graph-reps N] [--quick|--full] [--only OP]\n"
                    "                               [--tokens N,...] [--hidden N,...] [--json FILE]\n"
                    "  SL_BENCH_FFN_PF=N (0..16): the FFN streaming kernels' L2 prefetch distance for this run\n"
                    "  SL_BENCH_DECODE_CUT=mask: the decode kernel without some phases (timing only, wrong results);\n"
                    "    SL_BENCH_DECODE_VARIANT=v: of decode shape v (SL_MOE_DECODE_*) instead of the default\n"
                    "  SL_BENCH_PAYLOAD=p (1 fp8-g128, 2 mxfp8, 3 mxfp4, 4 nvfp4): that payload's quantized dispatch "
                    "rows only\n");
    sl_bench_finish(&b);
    return 2;
  }
  const bool gpu = gpu_of(&b);
  /* SL_BENCH_FFN_PF=N (0..16): the FFN streaming kernels' L2 prefetch distance for this run
   * (a sweep of the JIT constant FFN_PF; default SL_MOE_FFN_GEMV_PF). */
  long v = 0;
  int set = bench_env("SL_BENCH_FFN_PF", 0, 16, &v);
  if (set > 0) {
    sl_moe_ffn_set_pf_override((int)v);
    printf("# SL_BENCH_FFN_PF=%ld: FFN streaming kernels' L2 prefetch distance (default %d)\n", v,
           SL_MOE_FFN_GEMV_PF);
  }
  /* SL_BENCH_DECODE_CUT=mask: the one-kernel decode layer with phases left out (timing only,
   * wrong results; sl_moe_layer_set_decode_cut); only its default shape's rows run. */
  const int cut = set < 0 ? 0 : bench_env("SL_BENCH_DECODE_CUT", 0, 15, &v);
  if (cut > 0 && !sl_moe_layer_set_decode_cut((int)v)) {
    fprintf(stderr, "sluice bench moe-local: SL_BENCH_DECODE_CUT=%ld: 8 only with 4\n", v);
    set = -1;
  } else if (cut > 0) {
    decode_cut_only = true; /* 0 too: the real kernel, the same rows */
    printf("# SL_BENCH_DECODE_CUT=%ld: decode kernel phases left out (1 act wait, 2 down dots, 4 logit poll + top-k, 8 "
           "logits): timing only, wrong results\n",
           v);
    const int dv = bench_env("SL_BENCH_DECODE_VARIANT", 0, SL_MOE_DECODE_VARIANTS - 1, &v);
    if (dv > 0) decode_cut_variant = (int)v;
    if (dv < 0) set = -1;
  }
  const int pay =
      set < 0 || cut < 0 ? 0 : bench_env("SL_BENCH_PAYLOAD", SL_MOE_PAYLOAD_FP8_GROUP, SL_MOE_PAYLOAD_NVFP4, &v);
  if (pay > 0) {
    payload_only = (int)v;
    printf("# SL_BENCH_PAYLOAD=%ld: the %s dispatch rows only\n", v, sl_moe_payload_name((sl_moe_payload_t)v));
  }
  const int rr = set < 0 || cut < 0 || pay < 0 ? 0 : bench_env("SL_BENCH_ROUTE_ROUNDS", 1, 8, &v);
  if (rr > 0 && (v & (v - 1)) == 0) {
    quant_route_rounds = (int)v;
    printf("# SL_BENCH_ROUTE_ROUNDS=%ld: the quantized dispatch rows' routing rounds\n", v);
  } else if (rr > 0) {
    fprintf(stderr, "sluice bench moe-local: SL_BENCH_ROUTE_ROUNDS=%ld: 1, 2, 4 or 8\n", v);
  }
  if (set < 0 || cut < 0 || pay < 0 || rr < 0 || (rr > 0 && !quant_route_rounds)) {
    sl_bench_finish(&b);
    return 2;
  }
  static const int quick_gpu[] = {1, 128, 4096}, quick_cpu[] = {1, 8};
  const int *Ts = token_counts;
  int nT = (int)(sizeof token_counts / sizeof token_counts[0]);
  if (b.quick) {
    Ts = gpu ? quick_gpu : quick_cpu;
    nT = gpu ? 3 : 2;
  }
  int picked[16], np = 0; /* --tokens */
  for (int i = 0; i < nT && np < 16; i++)
    if (sl_bench_tokens_selected(&b, Ts[i])) picked[np++] = Ts[i];
  Ts = picked, nT = np;
  sl_status_t s = SL_OK;
  if (sl_bench_selected(&b, "grid_barrier")) {
    sl_bench_header(&b, "grid barrier");
    s = bench_barrier(&b);
  }
  for (int m = 0; m < 2 && s == SL_OK; m++) {
    if (!sl_bench_selected(&b, "moe_dispatch_quant") && !sl_bench_selected(&b, "moe_combine")) break;
    char title[96];
    snprintf(title, sizeof title, "dispatch / combine, %s routing (E=%d, K=%d, H=%d)", models[m].name, models[m].E,
             models[m].K, models[m].H);
    if (!sl_bench_hidden_selected(&b, models[m].H)) continue;
    sl_bench_header(&b, title);
    s = bench_dispatch_combine(&b, &models[m], Ts, nT);
  }
  if (s == SL_OK && sl_bench_selected(&b, "moe_layer")) {
    sl_bench_header(&b, "full layer, qwen3-30b-a3b (E=128, K=8, H=2048, I=768); ratio = time / weight streaming");
    static const int cpu_layer[] = {1};
    s = bench_layer(&b, &models[0], gpu ? Ts : cpu_layer, gpu ? nT : 1);
  }
  if (s == SL_OK && gpu && sl_bench_selected(&b, "moe_ffn")) {
    sl_bench_header(&b, "expert FFN alone, qwen3-30b-a3b (E=128, K=8, H=2048, I=768), streaming kernels forced per "
                        "variant; ratio = time / weight streaming");
    s = bench_ffn(&b, &models[0], Ts, nT);
  }
  sl_bench_finish(&b);
  if (s != SL_OK) {
    fprintf(stderr, "sluice bench moe-local: %s (%s)\n", sl_status_str(s), sl_last_error());
    return 1;
  }
  return 0;
}
