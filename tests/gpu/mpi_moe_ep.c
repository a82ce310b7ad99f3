/* GPU, 2 and 4 ranks (sharing one GPU is fine: CUDA IPC works between processes on one
 * device; contexts time-slice, so calls are kept few and timeouts long): the node-level MoE
 * dispatch/combine kernels against the single-rank reference (tests/mpi/moe_ep_check.h):
 *  - EP, every payload (bf16, FP8, MXFP8, NVFP4), decode (cooperative) and prefill (split)
 *    paths, bit-exact; the expert counts exact;
 *  - EP with everything routed to rank 0, top-k on one rank, and ranks with T = 0;
 *  - invalid expert ids: sl_moe_comm_check reports SL_ERR_RANGE, the rest is exact;
 *  - TP, decode (fused combine + all-reduce) and prefill (built-in one-shot, and comm1's
 *    sl_allreduce), within a bf16 ulp and identical on every rank;
 *  - with moe's expert FFN (cuBLAS) between them: equal to moe's one-GPU layer
 *    (sl_moe_layer_forward) on the same tokens, EP and TP, decode and prefill;
 *  - dispatch and combine captured in CUDA graphs and replayed with new inputs (the epoch
 *    lives on the device, so every replay is a new call);
 *  - rows over capacity: SL_ERR_CAPACITY on the receiver, zero contribution, no hang;
 *  - a rank that skips a dispatch: the others' kernels give up after the handle's timeout and
 *    sl_moe_comm_check returns SL_ERR_TIMEOUT naming it.
 * Exits 77 (skipped) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi/moe_ep_check.h"
#include "../mpi/moe_ep_layer_check.h"
#include "comm/moe_tp.h"

static sl_runtime_t rt;
static moe_harness_t H;

static sl_moe_comm_t *make(sl_moe_deploy_t deploy, int payload, int epr, int top_k, int hidden, int max_tokens,
                           long timeout_ms) {
  sl_moe_comm_config_t cfg = {.deploy = deploy,
                              .num_experts = epr * H.size,
                              .top_k = top_k,
                              .hidden = hidden,
                              .payload = payload,
                              .nvfp4_global_scale = 448.0f * 6.0f / 16.0f,
                              .max_tokens = max_tokens,
                              .timeout_ms = timeout_ms};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create(H.dev, H.comm, &cfg, &h));
  for (int r = 0; r < H.size; r++)
    assert_int_equal(sl_moe_comm_transport(h, r), r == H.rank ? SL_MOE_TRANSPORT_SELF : SL_MOE_TRANSPORT_NVLINK);
  return h;
}

static void run(sl_moe_comm_t *h, uint64_t *rng, int T, moe_route_t route, sl_moe_comm_path_t path,
                sl_status_t expect) {
  moe_case_t c = {.T = T, .route = route, .path = path, .expect_dispatch = expect};
  moe_run_case(&H, h, rng, &c);
  assert_int_equal(c.path_taken, path == SL_MOE_COMM_PATH_AUTO ? sl_moe_comm_choose_path(h, T) : path);
  if (path == SL_MOE_COMM_PATH_AUTO) assert_int_equal(c.path_taken, SL_MOE_COMM_PATH_DECODE);
  if (c.mismatches)
    fail_msg("rank %d: %zu mismatches (route %s, T %d, path %s)", H.rank, c.mismatches, moe_route_name(route), T,
             sl_moe_comm_path_name(path));
}

static void test_ep_payloads_paths(void **state) {
  uint64_t rng = sl_test_seed() + 101u * (uint64_t)H.rank;
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    sl_moe_comm_t *h = make(SL_MOE_DEPLOY_EP, payload, 4, 4, 512, 48, 0);
    run(h, &rng, 1 + (int)(sl_test_rand_u64(&rng) % 48), ROUTE_RANDOM, SL_MOE_COMM_PATH_DECODE, SL_OK);
    run(h, &rng, 1 + (int)(sl_test_rand_u64(&rng) % 48), ROUTE_RANDOM, SL_MOE_COMM_PATH_PREFILL, SL_OK);
    sl_moe_comm_destroy(h);
    if (H.rank == 0) printf("  EP payload %d: decode and prefill exact\n", payload);
  }
}

static void test_ep_skew_empty_invalid(void **state) {
  uint64_t rng = sl_test_seed() + 7u * (uint64_t)H.rank;
  sl_moe_comm_t *h = make(SL_MOE_DEPLOY_EP, SL_MOE_EP_PAYLOAD_FP8, 8, 4, 384, 32, 0);
  run(h, &rng, 32, ROUTE_SKEW, SL_MOE_COMM_PATH_DECODE, SL_OK);
  run(h, &rng, 19, ROUTE_ONE_RANK, SL_MOE_COMM_PATH_PREFILL, SL_OK);
  run(h, &rng, H.rank % 2 ? 0 : 32, ROUTE_RANDOM, SL_MOE_COMM_PATH_DECODE, SL_OK);
  run(h, &rng, 0, ROUTE_RANDOM, SL_MOE_COMM_PATH_PREFILL, SL_OK);
  run(h, &rng, 12, ROUTE_INVALID, SL_MOE_COMM_PATH_DECODE, SL_ERR_RANGE);
  run(h, &rng, 12, ROUTE_RANDOM, SL_MOE_COMM_PATH_AUTO, SL_OK); /* the host rule: decode */
  sl_moe_comm_destroy(h);
}

static void test_tp_paths(void **state) {
  uint64_t rng = sl_test_seed();
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload += 3) { /* bf16 and nvfp4 */
    sl_moe_comm_t *h = make(SL_MOE_DEPLOY_TP, payload, 4, 4, 256, 40, 0);
    run(h, &rng, 40, ROUTE_RANDOM, SL_MOE_COMM_PATH_DECODE, SL_OK);
    run(h, &rng, 23, ROUTE_RANDOM, SL_MOE_COMM_PATH_PREFILL, SL_OK);
    run(h, &rng, 16, ROUTE_SKEW, SL_MOE_COMM_PATH_DECODE, SL_OK);
    sl_moe_comm_destroy(h);
  }
}

/* TP prefill through comm1's all-reduce (fp32 in place + a rounding launch). */
static void test_tp_external_allreduce(void **state) {
  uint64_t rng = sl_test_seed() + 5;
  sl_comm_t *ar = NULL;
  SL_ASSERT_OK(sl_comm_create(&rt.boot, rt.dev, &rt.config, 1 << 20, &ar));
  sl_moe_comm_t *h = make(SL_MOE_DEPLOY_TP, SL_MOE_EP_PAYLOAD_FP8, 4, 4, 256, 32, 0);
  SL_ASSERT_OK(sl_moe_tp_use_allreduce(h, ar));
  run(h, &rng, 32, ROUTE_RANDOM, SL_MOE_COMM_PATH_PREFILL, SL_OK);
  run(h, &rng, 7, ROUTE_RANDOM, SL_MOE_COMM_PATH_DECODE, SL_OK); /* decode keeps the fused launch */
  SL_ASSERT_OK(sl_comm_check(ar));
  sl_moe_comm_destroy(h);
  sl_comm_destroy(ar);
}

/* With moe's real expert FFN (cuBLAS) between dispatch and combine: equals moe's one-GPU
 * layer over every expert (within 2 bf16 ulps: GEMMs of different row counts). */
static void test_equals_layer(void **state) {
  size_t bad = 0;
  bad += moe_run_layer_case(&H, SL_MOE_DEPLOY_EP, 4, 4, 512, 256, 24, SL_MOE_COMM_PATH_DECODE, sl_test_seed());
  bad += moe_run_layer_case(&H, SL_MOE_DEPLOY_EP, 4, 4, 512, 256, 40, SL_MOE_COMM_PATH_PREFILL, sl_test_seed() + 1);
  bad += moe_run_layer_case(&H, SL_MOE_DEPLOY_TP, 4, 4, 256, 128, 16, SL_MOE_COMM_PATH_DECODE, sl_test_seed() + 2);
  bad += moe_run_layer_case(&H, SL_MOE_DEPLOY_TP, 4, 4, 256, 128, 33, SL_MOE_COMM_PATH_PREFILL, sl_test_seed() + 3);
  if (bad) fail_msg("rank %d: %zu outputs differ from the single-rank layer", H.rank, bad);
}

/* Capture dispatch and combine once, replay three times with new inputs in the same buffers. */
static void test_graph_replay(void **state) {
  uint64_t rng = sl_test_seed() + 13u * (uint64_t)H.rank;
  sl_moe_comm_t *h = make(SL_MOE_DEPLOY_EP, SL_MOE_EP_PAYLOAD_MXFP8, 4, 3, 256, 16, 0);
  const sl_moe_ep_layout_t *l = sl_moe_comm_layout(h);
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  enum { T = 16 };
  int K = l->top_k, Hd = l->hidden, E = l->num_experts;
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  void *dx = moe_dev_alloc(H.dev, (size_t)T * Hd * 2), *dids = moe_dev_alloc(H.dev, (size_t)T * K * 4);
  void *dw = moe_dev_alloc(H.dev, (size_t)T * K * 4), *dout = moe_dev_alloc(H.dev, (size_t)T * Hd * 2);
  void *dexp = moe_dev_alloc(H.dev, rows * Hd * 2);
  sl_moe_comm_dispatch_args_t da = {
      .num_tokens = T, .x = dx, .topk_ids = dids, .topk_weights = dw, .force_path = SL_MOE_COMM_PATH_DECODE};
  sl_moe_comm_combine_args_t ca = {.num_tokens = T,
                                   .topk_ids = dids,
                                   .topk_weights = dw,
                                   .expert_out = dexp,
                                   .out = dout,
                                   .force_path = SL_MOE_COMM_PATH_DECODE};
  sl_graph_t *gd = NULL, *gc = NULL;
  SL_ASSERT_OK(sl_graph_begin_capture(H.dev, H.stream));
  SL_ASSERT_OK(sl_moe_comm_dispatch(h, &da, H.stream));
  SL_ASSERT_OK(sl_graph_end_capture(H.dev, H.stream, &gd));
  SL_ASSERT_OK(sl_graph_begin_capture(H.dev, H.stream));
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, H.stream));
  SL_ASSERT_OK(sl_graph_end_capture(H.dev, H.stream, &gc));
  uint16_t *x = malloc((size_t)T * Hd * 2), *got = malloc((size_t)T * Hd * 2), *hout = malloc(rows * Hd * 2);
  int32_t *ids = malloc((size_t)T * K * 4), *counts = malloc((size_t)ex->num_local_experts * 4);
  float *w = malloc((size_t)T * K * 4), *v = malloc((size_t)T * Hd * 4);
  unsigned char *hx = malloc(rows * ex->row_bytes), *hs = malloc(rows * ex->scale_row_bytes);
  for (int rep = 0; rep < 3; rep++) {
    for (int t = 0; t < T; t++) {
      for (int i = 0; i < Hd; i++)
        x[t * Hd + i] = sl_f32_to_bf16(sl_test_rand_normal(&rng) * (float)(rep + 1));
      moe_pick_experts(&rng, E, K, 0, E, ids + t * K);
      for (int k = 0; k < K; k++)
        w[t * K + k] = sl_test_rand_uniform(&rng, 0.1f, 1.0f);
    }
    SL_ASSERT_OK(sl_memcpy(H.dev, dx, x, (size_t)T * Hd * 2, NULL));
    SL_ASSERT_OK(sl_memcpy(H.dev, dids, ids, (size_t)T * K * 4, NULL));
    SL_ASSERT_OK(sl_memcpy(H.dev, dw, w, (size_t)T * K * 4, NULL));
    sl_test_poison(H.dev, dout, (size_t)T * Hd * 2);
    sl_test_poison(H.dev, ex->expert_x, rows * ex->row_bytes);
    SL_ASSERT_OK(sl_graph_launch(H.dev, gd, H.stream));
    SL_ASSERT_OK(sl_moe_comm_check(h, H.stream));
    SL_ASSERT_OK(sl_memcpy(H.dev, counts, ex->expert_counts, (size_t)ex->num_local_experts * 4, NULL));
    SL_ASSERT_OK(sl_memcpy(H.dev, hx, ex->expert_x, rows * ex->row_bytes, NULL));
    SL_ASSERT_OK(sl_memcpy(H.dev, hs, ex->expert_scales, rows * ex->scale_row_bytes, NULL));
    SL_ASSERT_OK(sl_device_sync(H.dev));
    memset(hout, 0xff, rows * Hd * 2);
    for (int le = 0; le < ex->num_local_experts; le++)
      for (int row = 0; row < counts[le] && row < ex->capacity; row++) {
        size_t rr = (size_t)le * ex->capacity + row;
        int e = ex->expert_begin + le;
        for (int i = 0; i < Hd; i++)
          hout[rr * Hd + i] = sl_f32_to_bf16(fmaf(sl_moe_ep_dequant(ex->payload, hx + rr * ex->row_bytes,
                                                                    hs + rr * ex->scale_row_bytes, i, ex->global_scale),
                                                  moe_ffn_a(e), moe_ffn_b(e)));
      }
    SL_ASSERT_OK(sl_memcpy(H.dev, dexp, hout, rows * Hd * 2, NULL));
    SL_ASSERT_OK(sl_device_sync(H.dev));
    SL_ASSERT_OK(sl_graph_launch(H.dev, gc, H.stream));
    SL_ASSERT_OK(sl_moe_comm_check(h, H.stream));
    SL_ASSERT_OK(sl_memcpy(H.dev, got, dout, (size_t)T * Hd * 2, NULL));
    SL_ASSERT_OK(sl_device_sync(H.dev));
    moe_ref_dequant(l, ex->global_scale, T, x, v);
    size_t bad = 0;
    for (int t = 0; t < T; t++)
      for (int i = 0; i < Hd; i++) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
          int e = ids[t * K + k];
          acc =
              fmaf(w[t * K + k], sl_bf16_to_f32(sl_f32_to_bf16(fmaf(v[t * Hd + i], moe_ffn_a(e), moe_ffn_b(e)))), acc);
        }
        bad += got[t * Hd + i] != sl_f32_to_bf16(acc);
      }
    if (bad) fail_msg("rank %d graph replay %d: %zu of %d outputs differ", H.rank, rep, bad, T * Hd);
  }
  sl_graph_destroy(H.dev, gd);
  sl_graph_destroy(H.dev, gc);
  free(x), free(got), free(hout), free(ids), free(counts), free(w), free(v), free(hx), free(hs);
  sl_device_free(H.dev, dx), sl_device_free(H.dev, dids), sl_device_free(H.dev, dw);
  sl_device_free(H.dev, dout), sl_device_free(H.dev, dexp);
  sl_moe_comm_destroy(h);
}

/* Rows over capacity: rank 0 reports SL_ERR_CAPACITY, combine still completes everywhere, and
 * (with a zero FFN) every output is +0: dropped pairs contribute exactly zero. */
static void test_capacity_overflow(void **state) {
  enum { T = 6, K = 2, HD = 128 };
  sl_moe_comm_config_t cfg = {
      .num_experts = 2 * H.size, .top_k = K, .hidden = HD, .max_tokens = T, .expert_capacity = 3};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create(H.dev, H.comm, &cfg, &h));
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  void *dx = moe_dev_alloc(H.dev, T * HD * 2), *dids = moe_dev_alloc(H.dev, T * K * 4);
  void *dw = moe_dev_alloc(H.dev, T * K * 4), *dout = moe_dev_alloc(H.dev, T * HD * 2);
  void *dy = moe_dev_alloc(H.dev, rows * HD * 2);
  int32_t ids[T * K];
  float w[T * K];
  for (int t = 0; t < T; t++)
    ids[t * K] = 0, ids[t * K + 1] = 1, w[t * K] = w[t * K + 1] = 0.5f;
  SL_ASSERT_OK(sl_memset(H.dev, dx, 0x3f, T * HD * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(H.dev, dids, ids, sizeof ids, NULL));
  SL_ASSERT_OK(sl_memcpy(H.dev, dw, w, sizeof w, NULL));
  SL_ASSERT_OK(sl_memset(H.dev, dy, 0, rows * HD * 2, NULL));
  sl_test_poison(H.dev, dout, T * HD * 2);
  sl_moe_comm_dispatch_args_t da = {
      .num_tokens = T, .x = dx, .topk_ids = dids, .topk_weights = dw, .force_path = SL_MOE_COMM_PATH_PREFILL};
  SL_ASSERT_OK(sl_moe_comm_dispatch(h, &da, H.stream));
  sl_status_t s = sl_moe_comm_check(h, H.stream);
  if (H.rank == 0)
    assert_int_equal(s, SL_ERR_CAPACITY);
  else
    SL_ASSERT_OK(s);
  sl_moe_comm_combine_args_t ca = {.num_tokens = T,
                                   .topk_ids = dids,
                                   .topk_weights = dw,
                                   .expert_out = dy,
                                   .out = dout,
                                   .force_path = SL_MOE_COMM_PATH_DECODE};
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, H.stream));
  SL_ASSERT_OK(sl_moe_comm_check(h, H.stream));
  uint16_t out[T * HD];
  SL_ASSERT_OK(sl_memcpy(H.dev, out, dout, sizeof out, NULL));
  SL_ASSERT_OK(sl_device_sync(H.dev));
  for (int i = 0; i < T * HD; i++)
    if (out[i] != 0) fail_msg("rank %d out[%d] = 0x%04x, want +0", H.rank, i, out[i]);
  sl_device_free(H.dev, dx), sl_device_free(H.dev, dids), sl_device_free(H.dev, dw);
  sl_device_free(H.dev, dout), sl_device_free(H.dev, dy);
  sl_moe_comm_destroy(h);
}

static void test_skipped_dispatch_times_out(void **state) {
  enum { T = 8, TIMEOUT_MS = 3000 };
  sl_moe_comm_t *h = make(SL_MOE_DEPLOY_EP, SL_MOE_EP_PAYLOAD_BF16, 2, 2, 128, T, TIMEOUT_MS);
  void *dx = moe_dev_alloc(H.dev, T * 128 * 2), *dids = moe_dev_alloc(H.dev, T * 2 * 4);
  void *dw = moe_dev_alloc(H.dev, T * 2 * 4);
  int32_t ids[T * 2];
  for (int i = 0; i < T * 2; i++)
    ids[i] = i % (2 * H.size);
  SL_ASSERT_OK(sl_memset(H.dev, dx, 0, T * 128 * 2, NULL));
  SL_ASSERT_OK(sl_memcpy(H.dev, dids, ids, sizeof ids, NULL));
  SL_ASSERT_OK(sl_memset(H.dev, dw, 0, T * 2 * 4, NULL));
  SL_ASSERT_OK(sl_device_sync(H.dev));
  sl_status_t s = SL_OK;
  if (H.rank != 1) {
    sl_moe_comm_dispatch_args_t da = {
        .num_tokens = T, .x = dx, .topk_ids = dids, .topk_weights = dw, .force_path = SL_MOE_COMM_PATH_DECODE};
    SL_ASSERT_OK(sl_moe_comm_dispatch(h, &da, H.stream));
    s = sl_moe_comm_check(h, H.stream);
  }
  int bad = H.rank != 1 && !(s == SL_ERR_TIMEOUT && strstr(sl_last_error(), "for rank 1:"));
  if (bad)
    fprintf(stderr, "rank %d: want SL_ERR_TIMEOUT naming rank 1, got %s: %s\n", H.rank, sl_status_str(s),
            sl_last_error());
  MPI_Barrier(H.comm);
  sl_moe_comm_destroy(h);
  sl_device_free(H.dev, dx), sl_device_free(H.dev, dids), sl_device_free(H.dev, dw);
  assert_false(bad);
}

int main(int argc, char **argv) {
  setenv("SL_TIMEOUT_MS", "30000", 0); /* contexts time-slice on a shared GPU: be generous */
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  if (sl_device_backend(rt.dev) != SL_BACKEND_CUDA) {
    if (rt.boot.rank == 0) printf("SKIPPED: no usable GPU (%s)\n", sl_device_cuda_unavailable_reason());
    sl_runtime_finalize(&rt);
    return SL_TEST_SKIP;
  }
  H.dev = rt.dev;
  H.comm = rt.boot.node_comm;
  MPI_Comm_rank(H.comm, &H.rank);
  MPI_Comm_size(H.comm, &H.size);
  if (sl_stream_create(rt.dev, &H.stream) != SL_OK) {
    fprintf(stderr, "stream: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ep_payloads_paths), cmocka_unit_test(test_ep_skew_empty_invalid),
      cmocka_unit_test(test_tp_paths),          cmocka_unit_test(test_tp_external_allreduce),
      cmocka_unit_test(test_equals_layer),      cmocka_unit_test(test_graph_replay),
      cmocka_unit_test(test_capacity_overflow), cmocka_unit_test(test_skipped_dispatch_times_out),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_stream_destroy(rt.dev, H.stream);
  sl_runtime_finalize(&rt);
  return any;
}
