/* GPU, 2 and 4 ranks (sharing one GPU is fine: CUDA IPC works between processes on one
 * device; contexts time-slice, so calls are kept few and timeouts long):
 *  - one-shot / one-shot LL / two-shot / auto, f32 / bf16 / f16, every size class, in place
 *    and out of place, aligned and unaligned buffers: bit-exact against the CPU reference
 *    (same fixed rank order in fp32) and bit-identical on every rank; LL calls back to back
 *    without host waits (both parities of the LL lines reused while a rank runs ahead);
 *  - fused all-reduce + residual + RMSNorm: residual bit-exact, output within 1-2 ulp;
 *  - the calls captured in a CUDA graph and replayed with new inputs (epochs live on the
 *    device, so replays stay in step);
 *  - a rank that skips a call: the others' kernels give up after the timeout and
 *    sl_comm_check returns SL_ERR_TIMEOUT naming that rank.
 * Exits 77 (skipped) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "comm/allreduce.h"
#include "sl_test.h"

static sl_runtime_t rt;
static sl_comm_t *comm;
static sl_stream_t *stream;
static uint64_t seed;
static int node_world[SL_AR_MAX_RANKS];
enum { MAX_BYTES = 4 << 20 };

static void make_input(void *buf, size_t count, sl_dtype_t t, int world_rank, uint64_t tag) {
  uint64_t st = seed ^ (tag * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(world_rank + 1) << 40);
  for (size_t i = 0; i < count; i++)
    sl_store_f32(buf, t, i, sl_test_rand_uniform(&st, -4.0f, 4.0f));
}

/* Collective over the node: every rank calls it before any rank may fail an assertion, so
 * a failure on one rank never leaves the others blocked in MPI. */
static bool same_on_every_rank(const void *p, size_t bytes) {
  unsigned long long h = XXH64(p, bytes, 0), hmin = 0, hmax = 0;
  MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, rt.boot.node_comm);
  MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, rt.boot.node_comm);
  return hmin == hmax;
}

/* Bit-exact against the reference and identical on every rank. */
static void expect_bytes(const char *what, const void *got, const void *want, size_t bytes) {
  bool same = same_on_every_rank(got, bytes);
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char *)got)[i] != ((const unsigned char *)want)[i])
      fail_msg("%s: differs from the CPU reference at byte %zu of %zu", what, i, bytes);
  if (!same) fail_msg("%s: ranks of the node got different results", what);
}

static void sync_and_check(void) {
  SL_ASSERT_OK(sl_stream_sync(rt.dev, stream));
  SL_ASSERT_OK(sl_device_check(rt.dev, "all-reduce kernels"));
  SL_ASSERT_OK(sl_comm_check(comm));
}

/* One case; `offset` elements shift the device buffers off 16-byte alignment. */
static void run_case(size_t count, sl_dtype_t t, int algo, bool in_place, size_t offset, uint64_t tag) {
  int n = sl_comm_size(comm);
  size_t esz = sl_dtype_bytes(t, 1), bytes = count * esz;
  void *inputs[SL_AR_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    inputs[r] = malloc(bytes);
    make_input(inputs[r], count, t, node_world[r], tag);
  }
  void *want = malloc(bytes), *got = malloc(bytes);
  sl_allreduce_ref((const void *const *)inputs, n, want, count, t);
  void *d_in, *d_out;
  SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes + offset * esz, &d_in));
  SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes + offset * esz, &d_out));
  char *in = (char *)d_in + offset * esz, *out = in_place ? in : (char *)d_out + offset * esz;
  sl_test_poison(rt.dev, d_out, bytes + offset * esz);
  SL_ASSERT_OK(sl_memcpy(rt.dev, in, inputs[sl_comm_rank(comm)], bytes, stream));
  sl_comm_set_algo(comm, algo);
  SL_ASSERT_OK(sl_allreduce(comm, in, out, count, t, stream));
  SL_ASSERT_OK(sl_memcpy(rt.dev, got, out, bytes, stream));
  sync_and_check();
  char what[160];
  snprintf(what, sizeof what, "allreduce %zu x %s, %s%s%s", count, sl_dtype_name(t), sl_allreduce_algo_name(algo),
           in_place ? ", in place" : "", offset ? ", unaligned" : "");
  expect_bytes(what, got, want, bytes);
  sl_device_free(rt.dev, d_in);
  sl_device_free(rt.dev, d_out);
  for (int r = 0; r < n; r++)
    free(inputs[r]);
  free(want);
  free(got);
}

static void test_sizes_dtypes_algos(void **state) {
  /* tiny, odd, one-shot range, two-shot range, above max_bytes (pieces) with a tail */
  const size_t counts[] = {1, 13, 4099, 200003, 1100003};
  const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  /* ONESHOT_LL: the LL push kernel up to SL_AR_LL_MAX_BYTES (1, 13, 4099), the pull one-shot
   * above (200003) */
  const int algos[] = {SL_AR_AUTO, SL_AR_ONESHOT, SL_AR_TWOSHOT, SL_AR_ONESHOT_LL};
  uint64_t tag = 1;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int d = 0; d < 3; d++)
      for (int a = 0; a < 4; a++) {
        if (counts[c] > 300000 && a != 0) continue; /* pieces: once, with AUTO */
        run_case(counts[c], dtypes[d], algos[a], a == 1 || (a == 3 && d != 1), 0, tag++);
      }
  run_case(4099, SL_DTYPE_BF16, SL_AR_ONESHOT, false, 1, tag++); /* scalar (unaligned) kernels */
  run_case(4099, SL_DTYPE_BF16, SL_AR_ONESHOT_LL, false, 1, tag++);
  run_case(SL_AR_LL_MAX_BYTES / 2, SL_DTYPE_BF16, SL_AR_ONESHOT_LL, true, 0, tag++); /* exactly the LL limit */
  run_case(SL_AR_LL_MAX_BYTES / 4 + 1, SL_DTYPE_F32, SL_AR_ONESHOT_LL, false, 0, tag++); /* one past: pull */
  run_case(20000, SL_DTYPE_BF16, SL_AR_AUTO, false, 0, tag++); /* AUTO's LL range (40 KB) */
  for (int rep = 0; rep < 5; rep++) /* back to back: both parities of the LL lines, reused */
    run_case(3000 + (size_t)rep, SL_DTYPE_F32, SL_AR_ONESHOT_LL, rep % 2 == 0, 0, tag++);
  run_case(40001, SL_DTYPE_F32, SL_AR_TWOSHOT, true, 3, tag++);
  sl_comm_set_algo(comm, SL_AR_AUTO);
}

/* LL calls issued back to back with no host wait in between (a fast rank may run ahead by a
 * call; the two parities of the LL lines must keep its writes away from lines still being
 * read), alternating with pull one-shot calls, each on its own input and output. */
static void test_back_to_back(void **state) {
  enum { CALLS = 8 };
  const size_t count = 3001;
  const sl_dtype_t t = SL_DTYPE_F32;
  int n = sl_comm_size(comm), me = sl_comm_rank(comm);
  size_t bytes = sl_dtype_bytes(t, count);
  void *d_in[CALLS], *d_out[CALLS], *want[CALLS], *got = malloc(bytes);
  for (int k = 0; k < CALLS; k++) {
    void *inputs[SL_AR_MAX_RANKS];
    for (int r = 0; r < n; r++) {
      inputs[r] = malloc(bytes);
      make_input(inputs[r], count, t, node_world[r], 7000 + (uint64_t)k);
    }
    want[k] = malloc(bytes);
    sl_allreduce_ref((const void *const *)inputs, n, want[k], count, t);
    SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &d_in[k]));
    SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &d_out[k]));
    sl_test_poison(rt.dev, d_out[k], bytes);
    SL_ASSERT_OK(sl_memcpy(rt.dev, d_in[k], inputs[me], bytes, stream));
    for (int r = 0; r < n; r++)
      free(inputs[r]);
  }
  SL_ASSERT_OK(sl_stream_sync(rt.dev, stream));
  MPI_Barrier(rt.boot.node_comm);
  for (int k = 0; k < CALLS; k++) {
    sl_comm_set_algo(comm, k % 4 == 3 ? SL_AR_ONESHOT : SL_AR_ONESHOT_LL);
    SL_ASSERT_OK(sl_allreduce(comm, d_in[k], d_out[k], count, t, stream));
  }
  sl_comm_set_algo(comm, SL_AR_AUTO);
  sync_and_check();
  for (int k = 0; k < CALLS; k++) {
    SL_ASSERT_OK(sl_memcpy(rt.dev, got, d_out[k], bytes, stream));
    SL_ASSERT_OK(sl_stream_sync(rt.dev, stream));
    char what[64];
    snprintf(what, sizeof what, "back-to-back call %d (%s)", k, k % 4 == 3 ? "oneshot" : "oneshot-ll");
    expect_bytes(what, got, want[k], bytes);
    sl_device_free(rt.dev, d_in[k]);
    sl_device_free(rt.dev, d_out[k]);
    free(want[k]);
  }
  free(got);
}

static void test_fused_residual_rmsnorm(void **state) {
  const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F32};
  /* 1 and 7 rows: LL exchange; 300 rows (f32: 300 KiB, above every LL limit): the staged
   * copy + flag exchange */
  const int row_counts[] = {1, 7, 300};
  const int hidden = 256;
  int n = sl_comm_size(comm);
  uint64_t tag = 1000;
  for (int d = 0; d < 2; d++)
    for (int rc = 0; rc < 3; rc++) {
      sl_dtype_t t = dtypes[d];
      int rows = row_counts[rc];
      size_t count = (size_t)rows * hidden, bytes = sl_dtype_bytes(t, count), wbytes = sl_dtype_bytes(t, hidden);
      void *inputs[SL_AR_MAX_RANKS];
      for (int r = 0; r < n; r++) {
        inputs[r] = malloc(bytes);
        make_input(inputs[r], count, t, node_world[r], tag);
      }
      void *res = malloc(bytes), *w = malloc(wbytes), *res_ref = malloc(bytes), *out_ref = malloc(bytes);
      void *res_got = malloc(bytes), *out_got = malloc(bytes);
      make_input(res, count, t, 999, tag + 1);
      make_input(w, hidden, t, 998, tag + 2);
      memcpy(res_ref, res, bytes);
      float bias = rc == 1 ? 1.0f : 0.0f;
      sl_ar_rmsnorm_args_t ra = {.x = NULL,
                                 .residual = res_ref,
                                 .weight = w,
                                 .out = out_ref,
                                 .rows = rows,
                                 .hidden = hidden,
                                 .dtype = t,
                                 .eps = 1e-6f,
                                 .weight_bias = bias};
      sl_allreduce_residual_rmsnorm_ref((const void *const *)inputs, n, &ra);
      void *dx, *dres, *dw, *dout;
      SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &dx));
      SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &dres));
      SL_ASSERT_OK(sl_device_malloc(rt.dev, wbytes, &dw));
      SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &dout));
      sl_test_poison(rt.dev, dout, bytes);
      SL_ASSERT_OK(sl_memcpy(rt.dev, dx, inputs[sl_comm_rank(comm)], bytes, stream));
      SL_ASSERT_OK(sl_memcpy(rt.dev, dres, res, bytes, stream));
      SL_ASSERT_OK(sl_memcpy(rt.dev, dw, w, wbytes, stream));
      sl_ar_rmsnorm_args_t a = {.x = dx,
                                .residual = dres,
                                .weight = dw,
                                .out = dout,
                                .rows = rows,
                                .hidden = hidden,
                                .dtype = t,
                                .eps = 1e-6f,
                                .weight_bias = bias};
      SL_ASSERT_OK(sl_allreduce_residual_rmsnorm(comm, &a, stream));
      SL_ASSERT_OK(sl_memcpy(rt.dev, res_got, dres, bytes, stream));
      SL_ASSERT_OK(sl_memcpy(rt.dev, out_got, dout, bytes, stream));
      sync_and_check();
      char what[96];
      snprintf(what, sizeof what, "fused %dx%d %s residual", rows, hidden, sl_dtype_name(t));
      bool same_out = same_on_every_rank(out_got, bytes);
      expect_bytes(what, res_got, res_ref, bytes); /* same sums, same order: exact */
      /* the norm's sum of squares is a tree on the GPU: 1-2 ulp of the output type */
      float *g = malloc(count * 4), *wnt = malloc(count * 4);
      for (size_t i = 0; i < count; i++) {
        g[i] = sl_load_f32(out_got, t, i);
        wnt[i] = sl_load_f32(out_ref, t, i);
      }
      float rtol = t == SL_DTYPE_BF16 ? 1.0f / 64.0f : 1e-5f;
      snprintf(what, sizeof what, "fused %dx%d %s out", rows, hidden, sl_dtype_name(t));
      assert_int_equal(sl_test_compare_f32(what, g, wnt, count, 1e-6f, rtol), 0);
      if (!same_out) fail_msg("%s: ranks of the node got different results", what);
      free(g), free(wnt);
      sl_device_free(rt.dev, dx), sl_device_free(rt.dev, dres), sl_device_free(rt.dev, dw),
          sl_device_free(rt.dev, dout);
      for (int r = 0; r < n; r++)
        free(inputs[r]);
      free(res), free(w), free(res_ref), free(out_ref), free(res_got), free(out_got);
      tag += 3;
    }
}

/* Capture one-shot + two-shot + LL one-shot into a graph, replay it twice with different
 * inputs. */
static void test_graph_capture(void **state) {
  int n = sl_comm_size(comm), me = sl_comm_rank(comm);
  const size_t count = 100003;
  const sl_dtype_t t = SL_DTYPE_BF16;
  size_t bytes = sl_dtype_bytes(t, count);
  const size_t ll_count = 5003; /* the first ll_count elements, LL kernel */
  size_t ll_bytes = sl_dtype_bytes(t, ll_count);
  void *d_in, *d_out1, *d_out2, *d_out3;
  SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &d_in));
  SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &d_out1));
  SL_ASSERT_OK(sl_device_malloc(rt.dev, bytes, &d_out2));
  SL_ASSERT_OK(sl_device_malloc(rt.dev, ll_bytes, &d_out3));
  SL_ASSERT_OK(sl_graph_begin_capture(rt.dev, stream));
  sl_comm_set_algo(comm, SL_AR_ONESHOT);
  sl_status_t s1 = sl_allreduce(comm, d_in, d_out1, count, t, stream);
  sl_comm_set_algo(comm, SL_AR_TWOSHOT);
  sl_status_t s2 = sl_allreduce(comm, d_in, d_out2, count, t, stream);
  sl_comm_set_algo(comm, SL_AR_ONESHOT_LL);
  sl_status_t s3 = sl_allreduce(comm, d_in, d_out3, ll_count, t, stream);
  sl_comm_set_algo(comm, SL_AR_AUTO);
  sl_graph_t *g = NULL;
  SL_ASSERT_OK(sl_graph_end_capture(rt.dev, stream, &g));
  SL_ASSERT_OK(s1);
  SL_ASSERT_OK(s2);
  SL_ASSERT_OK(s3);
  void *inputs[SL_AR_MAX_RANKS];
  void *want = malloc(bytes), *got = malloc(bytes), *want3 = malloc(ll_bytes);
  for (int replay = 0; replay < 2; replay++) {
    for (int r = 0; r < n; r++) {
      inputs[r] = malloc(bytes);
      make_input(inputs[r], count, t, node_world[r], 5000 + replay);
    }
    sl_allreduce_ref((const void *const *)inputs, n, want, count, t);
    sl_allreduce_ref((const void *const *)inputs, n, want3, ll_count, t);
    sl_test_poison(rt.dev, d_out1, bytes);
    sl_test_poison(rt.dev, d_out2, bytes);
    sl_test_poison(rt.dev, d_out3, ll_bytes);
    SL_ASSERT_OK(sl_memcpy(rt.dev, d_in, inputs[me], bytes, stream));
    SL_ASSERT_OK(sl_graph_launch(rt.dev, g, stream));
    SL_ASSERT_OK(sl_memcpy(rt.dev, got, d_out1, bytes, stream));
    sync_and_check();
    expect_bytes(replay ? "graph replay 2, one-shot" : "graph replay 1, one-shot", got, want, bytes);
    SL_ASSERT_OK(sl_memcpy(rt.dev, got, d_out2, bytes, stream));
    sync_and_check();
    expect_bytes(replay ? "graph replay 2, two-shot" : "graph replay 1, two-shot", got, want, bytes);
    SL_ASSERT_OK(sl_memcpy(rt.dev, got, d_out3, ll_bytes, stream));
    sync_and_check();
    expect_bytes(replay ? "graph replay 2, one-shot LL" : "graph replay 1, one-shot LL", got, want3, ll_bytes);
    for (int r = 0; r < n; r++)
      free(inputs[r]);
  }
  /* and a plain call after the replays is still in step */
  run_case(4099, SL_DTYPE_F32, SL_AR_AUTO, false, 0, 6000);
  sl_graph_destroy(rt.dev, g);
  sl_device_free(rt.dev, d_in), sl_device_free(rt.dev, d_out1), sl_device_free(rt.dev, d_out2);
  sl_device_free(rt.dev, d_out3);
  free(want), free(got), free(want3);
}

/* The last rank skips a call: the others' kernels give up and report it. Runs last, on a
 * communicator of its own with a short timeout. */
static void test_skipped_call_times_out(void **state) {
  sl_config_t cfg = rt.config;
  cfg.timeout_ms = 3000;
  sl_comm_t *c;
  SL_ASSERT_OK(sl_comm_create(&rt.boot, rt.dev, &cfg, 1 << 20, &c));
  int me = sl_comm_rank(c), victim = sl_comm_size(c) - 1;
  void *d;
  SL_ASSERT_OK(sl_device_malloc(rt.dev, 4096 * 4, &d));
  SL_ASSERT_OK(sl_memset(rt.dev, d, 0, 4096 * 4, stream));
  SL_ASSERT_OK(sl_allreduce(c, d, d, 4096, SL_DTYPE_F32, stream)); /* a good call first */
  SL_ASSERT_OK(sl_stream_sync(rt.dev, stream));
  SL_ASSERT_OK(sl_comm_check(c));
  if (me != victim) {
    SL_ASSERT_OK(sl_allreduce(c, d, d, 4096, SL_DTYPE_F32, stream)); /* enqueues; no host wait */
    SL_ASSERT_OK(sl_stream_sync(rt.dev, stream));                    /* the kernel returns after the timeout */
    SL_ASSERT_OK(sl_device_check(rt.dev, "timed-out all-reduce"));
    assert_int_equal(sl_comm_check(c), SL_ERR_TIMEOUT);
    char want[48];
    snprintf(want, sizeof want, "for rank %d (world rank", victim);
    if (!strstr(sl_last_error(), want)) fail_msg("the timeout does not name rank %d: %s", victim, sl_last_error());
    /* later calls refuse at once */
    assert_int_equal(sl_allreduce(c, d, d, 4096, SL_DTYPE_F32, stream), SL_ERR_TIMEOUT);
  }
  MPI_Barrier(rt.boot.node_comm);
  sl_device_free(rt.dev, d);
  sl_comm_destroy(c);
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
  seed = sl_test_seed();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, rt.boot.world);
  MPI_Allgather(&rt.boot.rank, 1, MPI_INT, node_world, 1, MPI_INT, rt.boot.node_comm);
  if (sl_stream_create(rt.dev, &stream) != SL_OK ||
      sl_comm_create(&rt.boot, rt.dev, &rt.config, MAX_BYTES, &comm) != SL_OK) {
    fprintf(stderr, "set-up failed: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_dtypes_algos),
      cmocka_unit_test(test_back_to_back),
      cmocka_unit_test(test_fused_residual_rmsnorm),
      cmocka_unit_test(test_graph_capture),
      cmocka_unit_test(test_skipped_call_times_out),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  sl_comm_destroy(comm);
  sl_stream_destroy(rt.dev, stream);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, rt.boot.world);
  sl_runtime_finalize(&rt);
  return any ? 1 : 0;
}
