/* The local MoE layer at Qwen3-30B-A3B size (E=128, K=8, H=2048, I=768, random bf16
 * weights) on the GPU against the CPU backend: the router picks the same experts (up to
 * near-ties), and with the GPU's routing the CPU layer gives the same output within bf16
 * tolerance; decode (replicated and fused dispatch; the FFN's weight-streaming kernels
 * automatic at T = 1, 5 (odd), 8, 64, 128 and the padded GEMMs forced), T = 0, skewed
 * routing given by the caller (every token on the same 8 experts: 17 rows per expert, one
 * 32-row pass, and 40 rows, a 32-row and an 8-row pass; the other 120 experts empty),
 * prefill (fused and split dispatch, exact GEMMs after a count read, padded without host
 * sync: streaming kernels automatic and the GEMMs forced), residual add, and CUDA graphs of
 * the whole layer (T=8 and T=128: streaming kernels, programmatic dependent launch); the
 * small-T fusion (fuse_small: top-k inside dispatch, PDL edges) bit-equal to the unfused layer
 * at T = 0, 1, 5, 16 (17: falls back), eagerly and in graphs, and two chained fused calls in
 * one graph (T = 1, 16). The FFN's bulk variant (sm_90+) forced at T = 0, 1, 2, 5, 8, 9, 16,
 * 17, 64, 128, fused dispatch, skew (8 / 17 / 40 rows per expert) and in graphs (T = 1, 8).
 * Every call here runs the chain of launches (decode_kernel OFF); the one-kernel decode layer
 * that AUTO takes at T = 1 has its own test, tests/gpu/test_moe_layer_decode.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/moe_layer.h"
#include "moe_layer_chain.h"
#include "unit/moe_test_util.h"

enum { E = 128, K = 8, H = 2048, IN = 768, TMAX = 200 };

static sl_device_t *gpu, *cpu;
static uint16_t *h_wr, *h_wgu, *h_wd;
static void *d_wr, *d_wgu, *d_wd;
static sl_moe_layer_t *g_layer, *c_layer;

static sl_moe_layer_config_t config(const void *wr, const void *wgu, const void *wd) {
  return (sl_moe_layer_config_t){.num_experts = E, .top_k = K, .hidden = H, .inter = IN, .expert_begin = 0,
                                 .expert_end = E, .router_kind = SL_ROUTER_SOFTMAX_TOPK, .renormalize = true,
                                 .w_router = wr, .w_gate_up = wgu, .w_down = wd};
}

static int setup(void **s) {
  gpu = sl_test_open_gpu_or_skip(0);
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &cpu));
  uint64_t rng = sl_test_seed() + 1234;
  const size_t nr = (size_t)E * H, ngu = (size_t)E * 2 * IN * H, nd = (size_t)E * H * IN;
  h_wr = malloc(nr * 2);
  h_wgu = malloc(ngu * 2);
  h_wd = malloc(nd * 2);
  assert_true(h_wr && h_wgu && h_wd);
  /* Uniform amplitudes giving unit-variance logits and activations of order one. */
  moe_uniform_bf16(&rng, h_wr, nr, sqrtf(3.0f / H) * 2.0f);
  moe_uniform_bf16(&rng, h_wgu, ngu, sqrtf(3.0f / H));
  moe_uniform_bf16(&rng, h_wd, nd, sqrtf(3.0f / IN));
  d_wr = moe_dev_copy(gpu, h_wr, nr * 2);
  d_wgu = moe_dev_copy(gpu, h_wgu, ngu * 2);
  d_wd = moe_dev_copy(gpu, h_wd, nd * 2);
  sl_moe_layer_config_t gc = config(d_wr, d_wgu, d_wd), cc = config(h_wr, h_wgu, h_wd);
  SL_ASSERT_OK(sl_moe_layer_create(gpu, &gc, TMAX, &g_layer));
  SL_ASSERT_OK(sl_moe_layer_create(cpu, &cc, TMAX, &c_layer));
  return 0;
}

static int teardown(void **s) {
  sl_moe_layer_destroy(g_layer);
  sl_moe_layer_destroy(c_layer);
  sl_device_free(gpu, d_wr);
  sl_device_free(gpu, d_wgu);
  sl_device_free(gpu, d_wd);
  free(h_wr);
  free(h_wgu);
  free(h_wd);
  sl_device_close(gpu);
  sl_device_close(cpu);
  return 0;
}

/* Compare a GPU output with the CPU layer run on the GPU's routing. */
static void compare_with_cpu_routing(int T, const uint16_t *x, const uint16_t *res, const uint16_t *got,
                                     const int32_t *g_ids, const float *g_w, bool check_router, const char *what) {
  uint16_t *want = malloc((size_t)T * H * 2);
  assert_non_null(want);
  if (check_router) {
    /* The CPU router on the same input: the same experts except at near-ties of fp32
     * logits summed in another order. */
    sl_moe_layer_args_t ca = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = x, .out = want, .allow_host_sync = true};
    SL_ASSERT_OK(sl_moe_layer_forward(c_layer, &ca, NULL));
    const int32_t *c_ids;
    const float *c_w;
    sl_moe_layer_last_routing(c_layer, &c_ids, &c_w);
    int differ = 0;
    for (int t = 0; t < T; t++)
      if (memcmp(c_ids + (size_t)t * K, g_ids + (size_t)t * K, K * 4)) differ++;
    printf("  %s: %d of %d tokens routed differently from the CPU router (near-ties)\n", what, differ, T);
    assert_true(differ <= 1 + T / 50);
  }
  /* Same routing on the CPU: the output within bf16 tolerance. */
  sl_moe_layer_args_t oa = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = x, .residual = res, .out = want, .topk_ids = g_ids,
                            .topk_weights = g_w, .allow_host_sync = true};
  SL_ASSERT_OK(sl_moe_layer_forward(c_layer, &oa, NULL));
  size_t bad = 0;
  double worst = 0;
  for (int t = 0; t < T; t++) {
    double rms = 0;
    for (int h = 0; h < H; h++) {
      double v = sl_bf16_to_f32(want[(size_t)t * H + h]);
      rms += v * v;
    }
    rms = sqrt(rms / H);
    for (int h = 0; h < H; h++) {
      double g = sl_bf16_to_f32(got[(size_t)t * H + h]), w = sl_bf16_to_f32(want[(size_t)t * H + h]);
      double err = fabs(g - w) / (rms + 1e-30);
      if (err > worst || isnan(g)) worst = isnan(g) ? INFINITY : err;
      if (!(fabs(g - w) <= 0.03 * rms + 0.01 * fabs(w))) {
        if (bad < 5) fprintf(stderr, "  %s: token %d col %d gpu %.6g cpu %.6g (rms %.3g)\n", what, t, h, g, w, rms);
        bad++;
      }
    }
  }
  printf("  %s: worst |gpu - cpu| / row rms = %.4f\n", what, worst);
  assert_int_equal(bad, 0);
  free(want);
}

static void compare_with_cpu(int T, const uint16_t *x, const uint16_t *res, const uint16_t *got,
                             const int32_t *g_ids, const float *g_w, const char *what) {
  compare_with_cpu_routing(T, x, res, got, g_ids, g_w, true, what);
}

static void run_full(int T, bool residual, bool allow_sync, int force_path, int small_rows, int variant,
                     int want_path, const char *what) {
  uint64_t rng = sl_test_seed() * 7 + (uint64_t)T;
  uint16_t *x = malloc((size_t)T * H * 2), *res = residual ? malloc((size_t)T * H * 2) : NULL;
  uint16_t *got = malloc((size_t)T * H * 2);
  int32_t *ids = malloc((size_t)T * K * 4);
  float *wts = malloc((size_t)T * K * 4);
  moe_rand_bf16(&rng, (size_t)T * H, x);
  if (res) moe_rand_bf16(&rng, (size_t)T * H, res);
  void *dx = moe_dev_copy(gpu, x, (size_t)T * H * 2), *dres = res ? moe_dev_copy(gpu, res, (size_t)T * H * 2) : NULL;
  void *dout = moe_dev_copy(gpu, NULL, (size_t)T * H * 2);
  sl_test_poison(gpu, dout, (size_t)T * H * 2);
  sl_moe_path_t path = SL_MOE_PATH_NONE;
  sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = dx, .residual = dres, .out = dout, .allow_host_sync = allow_sync,
                           .force_path = force_path, .ffn_small_rows = small_rows, .ffn_gemv_variant = variant,
                           .path_taken = &path};
  SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, NULL));
  SL_ASSERT_OK(sl_moe_layer_check(g_layer, NULL));
  assert_int_equal(path, want_path);
  const int32_t *d_ids;
  const float *d_w;
  sl_moe_layer_last_routing(g_layer, &d_ids, &d_w);
  SL_ASSERT_OK(sl_memcpy(gpu, got, dout, (size_t)T * H * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, ids, d_ids, (size_t)T * K * 4, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, wts, d_w, (size_t)T * K * 4, NULL));
  SL_ASSERT_OK(sl_device_sync(gpu));
  compare_with_cpu(T, x, res, got, ids, wts, what);
  sl_device_free(gpu, dx);
  if (dres) sl_device_free(gpu, dres);
  sl_device_free(gpu, dout);
  free(x);
  free(res);
  free(got);
  free(ids);
  free(wts);
}

static void run_with(int T, bool residual, bool allow_sync, int force_path, int small_rows, int want_path,
                     const char *what) {
  run_full(T, residual, allow_sync, force_path, small_rows, SL_MOE_FFN_GEMV_AUTO, want_path, what);
}

static void run(int T, bool residual, bool allow_sync, int want_path, const char *what) {
  run_with(T, residual, allow_sync, 0, 0, want_path, what);
}

static void test_decode(void **s) {
  /* Streaming kernels (automatic: T*K <= 16 x 128 here): 1 row per touched expert, odd T,
   * ~1.3 rows (T=8), ~4 (T=64) and ~8 (T=128: one or two 8-token n-tiles per pass). */
  run(1, false, true, SL_MOE_PATH_REPLICATED, "T=1 replicated, streaming kernels (automatic)");
  run(5, false, false, SL_MOE_PATH_REPLICATED, "T=5 replicated, streaming kernels (automatic)");
  run(8, true, false, SL_MOE_PATH_REPLICATED, "T=8 replicated, streaming kernels (automatic), residual");
  run(64, true, false, SL_MOE_PATH_REPLICATED, "T=64 replicated, streaming kernels (automatic), residual");
  run(128, false, false, SL_MOE_PATH_REPLICATED, "T=128 replicated, streaming kernels (automatic)");
  run_with(1, false, false, 0, -1, SL_MOE_PATH_REPLICATED, "T=1 replicated, padded GEMMs (streaming off)");
  run_with(64, true, false, 0, -1, SL_MOE_PATH_REPLICATED, "T=64 replicated, padded GEMMs (forced), residual");
  run_with(64, true, false, SL_MOE_PATH_FUSED, -1, SL_MOE_PATH_FUSED, "T=64 fused (forced), padded GEMMs, residual");
  run_with(64, false, false, SL_MOE_PATH_FUSED, 1, SL_MOE_PATH_FUSED, "T=64 fused (forced), streaming kernels forced");
}

/* The streaming kernels' two variants (kernels/moe_ffn.c, sl_moe_ffn_gemv_variant): split
 * (12 warps, 8 rows per pass, a tile's K split over warps when a block has fewer tiles than
 * warps: T=1 -> 2 warps per tile, partial sums added in shared memory) automatically while
 * min(capacity, T) <= 8 once SL_MOE_FFN_GEMV_SPLIT_AUTO is 1 (0 until measured), wide above.
 * Each T forced both ways and automatic; T=8 / T=9 automatic around the switch point; split forced at T=9 and 40 (more than 8 rows:
 * several 8-row passes, with the K split's barriers per pass). */
static void test_decode_variants(void **s) {
  static const int Ts[] = {1, 2, 5, 8};
  char what[96];
  for (int i = 0; i < 4; i++) {
    const int T = Ts[i];
    snprintf(what, sizeof what, "T=%d streaming, split variant (forced)", T);
    run_full(T, false, false, 0, 1, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_PATH_REPLICATED, what);
    snprintf(what, sizeof what, "T=%d streaming, wide variant (forced), residual", T);
    run_full(T, true, false, 0, 1, SL_MOE_FFN_GEMV_WIDE, SL_MOE_PATH_REPLICATED, what);
    snprintf(what, sizeof what, "T=%d streaming, automatic variant", T);
    run_full(T, false, false, 0, 0, SL_MOE_FFN_GEMV_AUTO, SL_MOE_PATH_REPLICATED, what);
  }
  run_full(9, false, false, 0, 0, SL_MOE_FFN_GEMV_AUTO, SL_MOE_PATH_REPLICATED,
           "T=9 streaming, automatic variant (wide: above the switch point)");
  run_full(9, true, false, 0, 1, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_PATH_REPLICATED,
           "T=9 streaming, split variant (forced), residual");
  run_full(64, false, false, 0, 1, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_PATH_REPLICATED,
           "T=64 streaming, split variant (forced: up to ~8 rows per expert, several passes)");
  run_full(1, false, false, SL_MOE_PATH_FUSED, 1, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_PATH_FUSED,
           "T=1 fused (forced), split variant (forced)");
}

/* The bulk variant (sm_90+; kernels/moe_ffn_gemv.cu FFN_BULK: weights staged in shared
 * memory by cp.async.bulk, producer warp + 8 consumer warps, partial tiles added at the end
 * of each 16-row pass), forced on the same cases as split: T = 1, 2, 5, 8 (one n-tile),
 * 9 and 16 (two n-tiles, one pass), 17 and 64 (several passes where an expert holds more
 * than 16 rows), fused dispatch; errors in its pipeline would show in sl_moe_layer_check
 * (SL_ERR_TIMEOUT). */
static bool bulk_supported(void) {
  if (sl_device_info(gpu)->arch >= SL_ARCH_HOPPER) return true;
  printf("  bulk variant: sm_%d < sm_90, not run\n", sl_device_info(gpu)->arch);
  return false;
}

static void test_decode_bulk(void **s) {
  if (!bulk_supported()) return;
  static const int Ts[] = {1, 2, 5, 8, 9, 16, 17, 64};
  char what[96];
  for (int i = 0; i < 8; i++) {
    snprintf(what, sizeof what, "T=%d streaming, bulk variant (forced)%s", Ts[i], i % 2 ? ", residual" : "");
    run_full(Ts[i], i % 2, false, 0, 1, SL_MOE_FFN_GEMV_BULK, SL_MOE_PATH_REPLICATED, what);
  }
  run_full(1, false, false, SL_MOE_PATH_FUSED, 1, SL_MOE_FFN_GEMV_BULK, SL_MOE_PATH_FUSED,
           "T=1 fused (forced), bulk variant (forced)");
  run_full(128, false, false, 0, 1, SL_MOE_FFN_GEMV_BULK, SL_MOE_PATH_REPLICATED,
           "T=128 streaming, bulk variant (forced: all 128 experts, ~8 rows each)");
}

/* T=0: nothing launched, nothing written, no error. */
static void test_zero_tokens(void **s) {
  void *dout = moe_dev_copy(gpu, NULL, 64);
  sl_test_poison(gpu, dout, 64);
  for (int small = -1; small <= 1; small++) {
    sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = 0, .x = dout, .out = dout, .ffn_small_rows = small};
    SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, NULL));
    SL_ASSERT_OK(sl_moe_layer_check(g_layer, NULL));
  }
  for (int variant = SL_MOE_FFN_GEMV_WIDE; variant <= SL_MOE_FFN_GEMV_BULK; variant++) { /* forced variants */
    sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = 0, .x = dout, .out = dout, .ffn_small_rows = 1,
                             .ffn_gemv_variant = variant};
    SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, NULL));
    SL_ASSERT_OK(sl_moe_layer_check(g_layer, NULL));
  }
  uint8_t got[64];
  SL_ASSERT_OK(sl_memcpy(gpu, got, dout, sizeof got, NULL));
  SL_ASSERT_OK(sl_device_sync(gpu));
  for (size_t i = 0; i < sizeof got; i++) assert_int_equal(got[i], 0xFF); /* sl_test_poison's byte */
  sl_device_free(gpu, dout);
}

/* Skewed routing given by the caller: token t goes to experts (t + k) % 8 for k < 8, i.e.
 * every token to the same 8 experts, T rows each (T=17: one 32-row pass, partially
 * filled; T=40: a 32-row pass and an 8-row pass), the other 120 experts empty; weights
 * uneven. Streaming kernels (automatic and forced) and the padded GEMMs. */
static void run_skewed_v(int T, int small_rows, int variant, const char *what) {
  uint64_t rng = sl_test_seed() * 13 + (uint64_t)T;
  uint16_t *x = malloc((size_t)T * H * 2), *got = malloc((size_t)T * H * 2);
  int32_t *ids = malloc((size_t)T * K * 4);
  float *wts = malloc((size_t)T * K * 4);
  assert_true(x && got && ids && wts);
  moe_rand_bf16(&rng, (size_t)T * H, x);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      ids[(size_t)t * K + k] = (t + k) % 8;
      wts[(size_t)t * K + k] = (float)(k + 1) / (float)(K * (K + 1) / 2);
    }
  void *dx = moe_dev_copy(gpu, x, (size_t)T * H * 2), *dids = moe_dev_copy(gpu, ids, (size_t)T * K * 4);
  void *dw = moe_dev_copy(gpu, wts, (size_t)T * K * 4), *dout = moe_dev_copy(gpu, NULL, (size_t)T * H * 2);
  sl_test_poison(gpu, dout, (size_t)T * H * 2);
  sl_moe_path_t path = SL_MOE_PATH_NONE;
  sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = dx, .out = dout, .topk_ids = dids, .topk_weights = dw,
                           .ffn_small_rows = small_rows, .ffn_gemv_variant = variant, .path_taken = &path};
  SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, NULL));
  SL_ASSERT_OK(sl_moe_layer_check(g_layer, NULL));
  int32_t counts[E];
  SL_ASSERT_OK(sl_memcpy(gpu, got, dout, (size_t)T * H * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(gpu, counts, sl_moe_layer_expert_counts(g_layer), sizeof counts, NULL));
  SL_ASSERT_OK(sl_device_sync(gpu));
  for (int e = 0; e < E; e++) assert_int_equal(counts[e], e < 8 ? T : 0);
  compare_with_cpu_routing(T, x, NULL, got, ids, wts, false, what);
  sl_device_free(gpu, dx);
  sl_device_free(gpu, dids);
  sl_device_free(gpu, dw);
  sl_device_free(gpu, dout);
  free(x);
  free(got);
  free(ids);
  free(wts);
}

static void run_skewed(int T, int small_rows, const char *what) {
  run_skewed_v(T, small_rows, SL_MOE_FFN_GEMV_AUTO, what);
}

static void test_skewed(void **s) {
  run_skewed(17, 0, "T=17 skewed (8 experts x 17 rows), streaming kernels (automatic)");
  run_skewed(40, 0, "T=40 skewed (8 experts x 40 rows), streaming kernels (automatic)");
  run_skewed(40, 1, "T=40 skewed, streaming kernels (forced)");
  run_skewed(40, -1, "T=40 skewed, padded GEMMs (forced)");
  /* Split variant: 8 experts x 96 gate_up tiles on ~132 blocks -> K split over 2 warps, and
   * 3 / 5 passes of 8 rows with the partial-sum barriers in each. */
  run_skewed_v(17, 1, SL_MOE_FFN_GEMV_SPLIT, "T=17 skewed, split variant (forced)");
  run_skewed_v(40, 1, SL_MOE_FFN_GEMV_SPLIT, "T=40 skewed, split variant (forced)");
  run_skewed_v(8, 0, SL_MOE_FFN_GEMV_AUTO, "T=8 skewed (8 experts x 8 rows), automatic (split)");
  if (bulk_supported()) {
    /* Bulk: 8 experts x 96 gate_up tiles on 132 blocks (5-6 tiles each), 8 rows (one
     * n-tile), 17 rows (a 16-row pass and a 1-row pass), 40 rows (three passes). */
    run_skewed_v(8, 1, SL_MOE_FFN_GEMV_BULK, "T=8 skewed, bulk variant (forced)");
    run_skewed_v(17, 1, SL_MOE_FFN_GEMV_BULK, "T=17 skewed, bulk variant (forced)");
    run_skewed_v(40, 1, SL_MOE_FFN_GEMV_BULK, "T=40 skewed, bulk variant (forced)");
  }
}

static void test_prefill(void **s) {
  /* T=200 at H=2048: 200 copy blocks <= 4 waves of 132, fused by default. */
  run(TMAX, true, true, SL_MOE_PATH_FUSED, "T=200 fused, exact GEMMs");
  run_with(TMAX, true, true, SL_MOE_PATH_SPLIT, 0, SL_MOE_PATH_SPLIT, "T=200 split, exact GEMMs");
  run_with(TMAX, false, false, SL_MOE_PATH_SPLIT, 0, SL_MOE_PATH_SPLIT,
           "T=200 split, no host sync: streaming kernels (automatic, T*K <= 16 x 128)");
  run_with(TMAX, false, false, SL_MOE_PATH_SPLIT, -1, SL_MOE_PATH_SPLIT, "T=200 split, padded GEMMs (no host sync)");
}

/* The whole layer captured in a graph (no host sync), replayed on new input. */
static void graph_case(int T, int variant) {
  uint64_t rng = sl_test_seed() + 99 + (uint64_t)T;
  sl_stream_t *st;
  SL_ASSERT_OK(sl_stream_create(gpu, &st));
  uint16_t *x = malloc((size_t)T * H * 2), *got = malloc((size_t)T * H * 2);
  int32_t *ids = malloc((size_t)T * K * 4);
  float *wts = malloc((size_t)T * K * 4);
  assert_true(x && got && ids && wts);
  const size_t xbytes = (size_t)T * H * 2, idbytes = (size_t)T * K * 4;
  void *dx = moe_dev_copy(gpu, NULL, xbytes), *dout = moe_dev_copy(gpu, NULL, xbytes);
  sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = dx, .out = dout, .allow_host_sync = false,
                           .ffn_small_rows = variant ? 1 : 0, .ffn_gemv_variant = variant};
  moe_rand_bf16(&rng, (size_t)T * H, x);
  SL_ASSERT_OK(sl_memcpy(gpu, dx, x, xbytes, st));
  SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, st)); /* first call outside: JIT loads, cuBLAS handle */
  SL_ASSERT_OK(sl_stream_sync(gpu, st));
  sl_graph_t *g;
  SL_ASSERT_OK(sl_graph_begin_capture(gpu, st));
  SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, st));
  SL_ASSERT_OK(sl_graph_end_capture(gpu, st, &g));
  for (int rep = 0; rep < 2; rep++) {
    moe_rand_bf16(&rng, (size_t)T * H, x);
    SL_ASSERT_OK(sl_memcpy(gpu, dx, x, xbytes, st));
    SL_ASSERT_OK(sl_memset(gpu, dout, 0xFF, xbytes, st));
    SL_ASSERT_OK(sl_graph_launch(gpu, g, st));
    const int32_t *d_ids;
    const float *d_w;
    sl_moe_layer_last_routing(g_layer, &d_ids, &d_w);
    SL_ASSERT_OK(sl_memcpy(gpu, got, dout, xbytes, st));
    SL_ASSERT_OK(sl_memcpy(gpu, ids, d_ids, idbytes, st));
    SL_ASSERT_OK(sl_memcpy(gpu, wts, d_w, idbytes, st));
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
    SL_ASSERT_OK(sl_moe_layer_check(g_layer, st));
    char what[48];
    snprintf(what, sizeof what, "graph replay T=%d%s", T, variant == SL_MOE_FFN_GEMV_BULK ? ", bulk" : "");
    compare_with_cpu(T, x, NULL, got, ids, wts, what);
  }
  sl_graph_destroy(gpu, g);
  sl_device_free(gpu, dx);
  sl_device_free(gpu, dout);
  sl_stream_destroy(gpu, st);
  free(x);
  free(got);
  free(ids);
  free(wts);
}

/* Small-T fusion (sl_moe_layer_args_t.fuse_small ON: the top-k inside the dispatch kernel,
 * PDL edges router logits -> dispatch and FFN -> combine) against the unfused layer on the
 * same input: output, ids and weights bit for bit (the router's warp routine is shared, every
 * kernel is deterministic), and the CPU layer at the usual tolerance. The unfused run's
 * routing buffers and output are poisoned before the fused run, so stale values cannot pass.
 * `graph`: both runs captured in graphs (each graph replayed twice on poisoned buffers).
 * `want_fused`: whether the fused chain must run (T in 1..16). */
static void fuse_case(int T, bool residual, bool graph, bool want_fused) {
  uint64_t rng = sl_test_seed() * 31 + (uint64_t)T + (graph ? 1000 : 0);
  sl_stream_t *st;
  SL_ASSERT_OK(sl_stream_create(gpu, &st));
  const size_t xbytes = (size_t)(T > 0 ? T : 1) * H * 2, idbytes = (size_t)(T > 0 ? T : 1) * K * 4;
  uint16_t *x = calloc(1, xbytes), *res = residual ? calloc(1, xbytes) : NULL, *ref = malloc(xbytes),
           *got = malloc(xbytes);
  int32_t *ref_ids = malloc(idbytes), *ids = malloc(idbytes);
  float *ref_w = malloc(idbytes), *wts = malloc(idbytes);
  assert_true(x && ref && got && ref_ids && ids && ref_w && wts && (!residual || res));
  moe_rand_bf16(&rng, (size_t)T * H, x);
  if (res) moe_rand_bf16(&rng, (size_t)T * H, res);
  void *dx = moe_dev_copy(gpu, x, xbytes), *dres = res ? moe_dev_copy(gpu, res, xbytes) : NULL;
  void *dout = moe_dev_copy(gpu, NULL, xbytes);
  const int32_t *d_ids;
  const float *d_w;
  char what[96];
  for (int fused_run = 0; fused_run < 2; fused_run++) {
    bool fused = !fused_run; /* must be overwritten */
    sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = dx, .residual = dres, .out = dout,
                             .fuse_small = fused_run ? SL_MOE_FUSE_ON : SL_MOE_FUSE_OFF, .fused_taken = &fused};
    /* Poison the output and (once a call has set them) the layer's routing buffers. */
    sl_moe_layer_last_routing(g_layer, &d_ids, &d_w);
    SL_ASSERT_OK(sl_memset(gpu, dout, 0xFF, xbytes, st));
    if (d_ids && T > 0) {
      SL_ASSERT_OK(sl_memset(gpu, (void *)d_ids, 0xFF, (size_t)T * K * 4, st));
      SL_ASSERT_OK(sl_memset(gpu, (void *)d_w, 0xFF, (size_t)T * K * 4, st));
    }
    if (!graph) {
      SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, st));
    } else {
      SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, st)); /* JIT loads outside the capture */
      SL_ASSERT_OK(sl_stream_sync(gpu, st));
      SL_ASSERT_OK(sl_moe_layer_check(g_layer, st));
      sl_graph_t *g;
      SL_ASSERT_OK(sl_graph_begin_capture(gpu, st));
      SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, st));
      SL_ASSERT_OK(sl_graph_end_capture(gpu, st, &g));
      for (int rep = 0; rep < 2; rep++) {
        SL_ASSERT_OK(sl_memset(gpu, dout, 0xFF, xbytes, st));
        if (T > 0) {
          sl_moe_layer_last_routing(g_layer, &d_ids, &d_w);
          SL_ASSERT_OK(sl_memset(gpu, (void *)d_ids, 0xFF, (size_t)T * K * 4, st));
          SL_ASSERT_OK(sl_memset(gpu, (void *)d_w, 0xFF, (size_t)T * K * 4, st));
        }
        SL_ASSERT_OK(sl_graph_launch(gpu, g, st));
      }
      sl_graph_destroy(gpu, g);
    }
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
    SL_ASSERT_OK(sl_moe_layer_check(g_layer, st));
    assert_int_equal(fused, fused_run && want_fused);
    if (T == 0) continue;
    sl_moe_layer_last_routing(g_layer, &d_ids, &d_w);
    SL_ASSERT_OK(sl_memcpy(gpu, fused_run ? got : ref, dout, (size_t)T * H * 2, st));
    SL_ASSERT_OK(sl_memcpy(gpu, fused_run ? ids : ref_ids, d_ids, (size_t)T * K * 4, st));
    SL_ASSERT_OK(sl_memcpy(gpu, fused_run ? wts : ref_w, d_w, (size_t)T * K * 4, st));
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
  }
  if (T > 0) {
    snprintf(what, sizeof what, "T=%d fuse_small on%s%s", T, residual ? ", residual" : "", graph ? ", graph" : "");
    assert_memory_equal(ids, ref_ids, (size_t)T * K * 4);
    assert_memory_equal(wts, ref_w, (size_t)T * K * 4);
    assert_memory_equal(got, ref, (size_t)T * H * 2);
    compare_with_cpu(T, x, res, got, ids, wts, what);
  } else {
    /* T = 0: nothing written. */
    uint8_t b[64];
    SL_ASSERT_OK(sl_memcpy(gpu, b, dout, sizeof b, st));
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
    for (size_t i = 0; i < sizeof b; i++) assert_int_equal(b[i], 0xFF);
  }
  sl_device_free(gpu, dx);
  if (dres) sl_device_free(gpu, dres);
  sl_device_free(gpu, dout);
  sl_stream_destroy(gpu, st);
  free(x);
  free(res);
  free(ref);
  free(got);
  free(ref_ids);
  free(ids);
  free(ref_w);
  free(wts);
}

/* Two fused calls back to back in one graph on the same layer, the second reading the first's
 * output (x of call 2 is read before griddepcontrol.wait: it must be complete when call 2's
 * router logits kernel starts) and rewriting the buffers call 1's kernels read: bit-equal to
 * the same two calls unfused, eagerly, with a sync between them. */
static void fuse_chain_case(int T) {
  uint64_t rng = sl_test_seed() * 37 + (uint64_t)T;
  const size_t xbytes = (size_t)T * H * 2;
  uint16_t *x = malloc(xbytes);
  assert_non_null(x);
  moe_rand_bf16(&rng, (size_t)T * H, x);
  void *dx = moe_dev_copy(gpu, x, xbytes), *d1 = moe_dev_copy(gpu, NULL, xbytes), *d2 = moe_dev_copy(gpu, NULL, xbytes);
  sl_moe_layer_args_t a1 = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = dx, .out = d1, .fuse_small = SL_MOE_FUSE_OFF},
                      a2 = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = T, .x = d1, .out = d2, .residual = dx, .fuse_small = SL_MOE_FUSE_OFF};
  bool f1 = false, f2 = false;
  sl_moe_layer_args_t b1 = a1, b2 = a2;
  b1.fuse_small = b2.fuse_small = SL_MOE_FUSE_ON;
  b1.fused_taken = &f1;
  b2.fused_taken = &f2;
  moe_layer_graph_chain(gpu, g_layer, &a1, &a2, &b1, &b2, xbytes);
  assert_true(f1 && f2);
  printf("  fused chain T=%d: two calls in one graph bit-equal to the unfused eager calls\n", T);
  sl_device_free(gpu, dx);
  sl_device_free(gpu, d1);
  sl_device_free(gpu, d2);
  free(x);
}

static void test_fuse_small(void **s) {
  fuse_case(0, false, false, false);
  fuse_case(1, false, false, true);
  fuse_case(5, true, false, true);
  fuse_case(16, false, false, true);
  fuse_case(17, true, false, false); /* above SL_MOE_TOPK_FUSED_MAX_TOKENS: ON falls back, same results */
  fuse_case(1, false, true, true);
  fuse_case(5, true, true, true);
  fuse_case(16, true, true, true);
  fuse_chain_case(1);
  fuse_chain_case(16);
  /* AUTO is OFF until measured (SL_MOE_LAYER_FUSE_SMALL_AUTO); caller routing never fuses. */
  bool fused = true;
  void *dx = moe_dev_copy(gpu, NULL, (size_t)H * 2), *dout = moe_dev_copy(gpu, NULL, (size_t)H * 2);
  SL_ASSERT_OK(sl_memset(gpu, dx, 0, (size_t)H * 2, NULL));
  sl_moe_layer_args_t a = {.decode_kernel = SL_MOE_FUSE_OFF, .num_tokens = 1, .x = dx, .out = dout, .fused_taken = &fused};
  SL_ASSERT_OK(sl_moe_layer_forward(g_layer, &a, NULL));
  SL_ASSERT_OK(sl_moe_layer_check(g_layer, NULL));
  assert_int_equal(fused, SL_MOE_LAYER_FUSE_SMALL_AUTO != 0);
  a.fuse_small = 3;
  assert_int_equal(sl_moe_layer_forward(g_layer, &a, NULL), SL_ERR_INVALID);
  sl_clear_error();
  sl_device_free(gpu, dx);
  sl_device_free(gpu, dout);
}

static void test_graph(void **s) {
  graph_case(1, SL_MOE_FFN_GEMV_AUTO);
  graph_case(8, SL_MOE_FFN_GEMV_AUTO);
  graph_case(128, SL_MOE_FFN_GEMV_AUTO);
  if (bulk_supported()) {
    /* Bulk under capture: dynamic shared memory opt-in set before (first call outside the
     * capture) and the two PDL launches with their shared sizes captured. */
    graph_case(1, SL_MOE_FFN_GEMV_BULK);
    graph_case(8, SL_MOE_FFN_GEMV_BULK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_decode_variants),
      cmocka_unit_test(test_decode_bulk),
      cmocka_unit_test(test_prefill),
      cmocka_unit_test(test_zero_tokens),
      cmocka_unit_test(test_skewed),
      cmocka_unit_test(test_graph),
      cmocka_unit_test(test_fuse_small),
  };
  return SL_RUN_SELECTED(tests, setup, teardown);
}
