/* GPU: RMSNorm (plain, fused residual), QK-norm (separate/packed, RoPE) and embedding kernels
 * against their CPU references on fresh random inputs with poisoned outputs (QK-norm is in
 * place: its V slice and every head are compared); every warps candidate and layout knob;
 * grid-stride paths; one RMSNorm captured in a CUDA graph. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/embedding.h"
#include "kernels/qknorm.h"
#include "kernels/rmsnorm.h"
#include "sl_test_kernels.h"

static sl_device_t *dev;
static uint64_t rng;

/* ---- compile-ahead ---------------------------------------------------------------------------
 * The tune-point cases launch ~300 distinct kernels; compiled one by one as the cases reach
 * them, that is minutes of NVRTC on one core. So main() first runs every RMSNorm / QK-norm case
 * in "collect" mode (rms_check / qk_check only record the JIT spec the launch will use, via the
 * same choose + spec functions the launchers call), compiles the set into the cache on every
 * core, then runs the cases for real (cache hits). A spec the collector got wrong only costs a
 * compile at launch time: results never depend on this step. SL_TEST_COLLECT_ARCH=90 runs the
 * collect + compile step alone without a GPU (to check it on a CPU machine) and exits. */
static bool collecting;
static int collect_arch, collect_sms;
static sl_jit_spec_t *collected;
static int n_collected, cap_collected;

static void collect(const sl_jit_spec_t *spec) {
  if (n_collected == cap_collected) {
    cap_collected = cap_collected ? 2 * cap_collected : 256;
    collected = realloc(collected, (size_t)cap_collected * sizeof *collected);
    assert_non_null(collected);
  }
  collected[n_collected++] = *spec;
}

typedef struct {
  int first, step, compiled, failed;
} ahead_job_t;

static void *compile_some(void *p) {
  ahead_job_t *j = p;
  for (int i = j->first; i < n_collected; i += j->step) {
    void *cubin = NULL;
    size_t size = 0;
    sl_jit_result_t r;
    if (sl_jit_compile(&collected[i], collect_arch, &cubin, &size, &r) != SL_OK) {
      j->failed++;
      continue;
    }
    free(cubin);
    j->compiled += !r.cache_hit;
  }
  return NULL;
}

static void compile_ahead(void (*const *cases)(void **), int n) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  collecting = true;
  for (int i = 0; i < n; i++) cases[i](NULL);
  collecting = false;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int jobs = cores < 1 ? 1 : cores > 32 ? 32 : (int)cores;
  pthread_t tid[32];
  ahead_job_t job[32];
  bool started[32];
  for (int t = 0; t < jobs; t++) {
    job[t] = (ahead_job_t){.first = t, .step = jobs};
    started[t] = pthread_create(&tid[t], NULL, compile_some, &job[t]) == 0;
  }
  int compiled = 0, failed = 0;
  for (int t = 0; t < jobs; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      compile_some(&job[t]);
    compiled += job[t].compiled, failed += job[t].failed;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fprintf(stderr, "compile-ahead: %d kernel launches collected, %d compiled, %d failed, %d threads, %.1f s\n",
          n_collected, compiled, failed, jobs, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  free(collected);
  collected = NULL;
  n_collected = cap_collected = 0;
}

static void *upload(const void *host, size_t bytes) {
  void *d = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, bytes, &d));
  SL_ASSERT_OK(sl_memcpy(dev, d, host, bytes, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
  return d;
}
static void download(void *host, const void *d, size_t bytes) {
  SL_ASSERT_OK(sl_memcpy(dev, host, d, bytes, NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
}
static void *alloc_poisoned(size_t bytes) {
  void *d = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, bytes, &d));
  sl_test_poison(dev, d, bytes);
  return d;
}
static void finish_kernel(const char *what) {
  SL_ASSERT_OK(sl_device_sync(dev));
  SL_ASSERT_OK(sl_device_check(dev, what));
}
static int all_ff(const void *p, size_t bytes) {
  const unsigned char *c = p;
  for (size_t i = 0; i < bytes; i++)
    if (c[i] != 0xff) return 0;
  return 1;
}

/* ---- RMSNorm -------------------------------------------------------------------------------- */
typedef struct {
  int rows, hidden;
  sl_dtype_t in, out, w, res;
  float bias;
  int residual, warps;
  int elts, grid; /* 0: the table's; else elements per thread and SL_RMSNORM_GRID_* */
  int wreg;       /* SL_RMSNORM_WEIGHT_* */
  int rsq;        /* SL_RMSNORM_RSQ_* */
  int loop;       /* SL_RMSNORM_LOOP_* */
} rms_case_t;

/* The launch arguments of a case (device pointers, or placeholders for compile-ahead). */
static sl_rmsnorm_args_t rms_args(const rms_case_t *c, void *x, void *y, void *residual, void *w) {
  return (sl_rmsnorm_args_t){.x = x,
                             .y = y,
                             .residual = residual,
                             .weight = w,
                             .rows = c->rows,
                             .hidden = c->hidden,
                             .in_dtype = c->in,
                             .out_dtype = c->out,
                             .w_dtype = c->w,
                             .res_dtype = c->res,
                             .eps = 1e-6f,
                             .weight_bias = c->bias,
                             .warps = c->warps,
                             .elts = c->elts,
                             .grid_policy = c->grid,
                             .weight_regs = c->wreg,
                             .fast_rsqrt = c->rsq,
                             .row_loop = c->loop};
}

/* GPU vs CPU: y within 2 ulp (fp32: 1e-5 relative), the updated residual bit-exact (both
 * sides do one fp32 add and one rounding); one poisoned guard row after y stays untouched. */
static void rms_check(const rms_case_t *c, sl_stream_t *graph_stream) {
  if (collecting) {
    /* placeholder pointers: choose + spec look at the shape and knobs only */
    sl_rmsnorm_args_t a = rms_args(c, (void *)256, (void *)256, c->residual ? (void *)256 : NULL, (void *)256);
    sl_rmsnorm_point_t pt;
    sl_jit_spec_t spec;
    if (sl_rmsnorm_choose(&a, collect_arch, collect_sms, &pt) == SL_OK && sl_rmsnorm_spec(&spec, &pt) == SL_OK)
      collect(&spec);
    return;
  }
  const size_t n = (size_t)c->rows * (size_t)c->hidden;
  size_t xb = sl_dtype_bytes(c->in, n), yb = sl_dtype_bytes(c->out, n), rb = sl_dtype_bytes(c->res, n);
  size_t wb = sl_dtype_bytes(c->w, (size_t)c->hidden), guard = sl_dtype_bytes(c->out, (size_t)c->hidden);
  void *hx = sl_test_alloc(xb), *hw = sl_test_alloc(wb), *hy = sl_test_alloc(yb + guard), *want_y = sl_test_alloc(yb);
  void *hres = c->residual ? sl_test_alloc(rb) : NULL, *got_res = c->residual ? sl_test_alloc(rb) : NULL;
  sl_test_fill(&rng, hx, c->in, n, 2.0f, 1);
  sl_test_fill(&rng, hw, c->w, (size_t)c->hidden, 1.5f, 0);
  if (hres) sl_test_fill(&rng, hres, c->res, n, 2.0f, 1);
  void *dx = upload(hx, xb), *dw = upload(hw, wb), *dres = hres ? upload(hres, rb) : NULL;
  void *dy = alloc_poisoned(yb + guard);
  sl_rmsnorm_args_t a = rms_args(c, dx, dy, dres, dw);
  if (graph_stream) {
    /* Warm (compile + load outside the capture), poison again, capture, replay once. */
    SL_ASSERT_OK(sl_rmsnorm(dev, &a, graph_stream));
    SL_ASSERT_OK(sl_stream_sync(dev, graph_stream));
    sl_test_poison(dev, dy, yb + guard);
    SL_ASSERT_OK(sl_graph_begin_capture(dev, graph_stream));
    sl_status_t s = sl_rmsnorm(dev, &a, graph_stream);
    sl_graph_t *g = NULL;
    SL_ASSERT_OK(sl_graph_end_capture(dev, graph_stream, &g));
    SL_ASSERT_OK(s);
    sl_test_poison(dev, dy, yb + guard);
    /* the warm-up launch updated the residual in place: restore it so the replay is checked
     * against one application of the op */
    if (dres) {
      SL_ASSERT_OK(sl_memcpy(dev, dres, hres, rb, NULL));
      SL_ASSERT_OK(sl_device_sync(dev));
    }
    SL_ASSERT_OK(sl_graph_launch(dev, g, graph_stream));
    SL_ASSERT_OK(sl_stream_sync(dev, graph_stream));
    sl_graph_destroy(dev, g);
  } else {
    SL_ASSERT_OK(sl_rmsnorm(dev, &a, NULL));
  }
  finish_kernel("rmsnorm");
  download(hy, dy, yb + guard);
  if (got_res) download(got_res, dres, rb);
  sl_rmsnorm_args_t h = a;
  h.x = hx;
  h.y = want_y;
  h.weight = hw;
  h.residual = hres;
  SL_ASSERT_OK(sl_rmsnorm_cpu(&h));
  size_t bad = sl_test_compare_dtype("y", c->out, hy, want_y, n, 2, 0.0f, 1e-5f);
  if (got_res) bad += sl_test_compare_dtype("residual", c->res, got_res, hres, n, 0, 0.0f, 0.0f);
  if (!all_ff((char *)hy + yb, guard)) {
    fprintf(stderr, "  guard row after y was written\n");
    bad++;
  }
  if (bad)
    fail_msg("rmsnorm rows %d hidden %d in %s out %s w %s res %s bias %g residual %d warps %d elts %d grid %d "
             "weight %d rsq %d loop %d%s: %zu mismatches",
             c->rows, c->hidden, sl_dtype_name(c->in), sl_dtype_name(c->out), sl_dtype_name(c->w),
             sl_dtype_name(c->res), (double)c->bias, c->residual, c->warps, c->elts, c->grid, c->wreg, c->rsq, c->loop,
             graph_stream ? " (graph)" : "", bad);
  sl_device_free(dev, dx);
  sl_device_free(dev, dw);
  sl_device_free(dev, dres);
  sl_device_free(dev, dy);
  free(hx);
  free(hw);
  free(hy);
  free(want_y);
  free(hres);
  free(got_res);
}

static void test_rmsnorm_every_dtype_pair(void **state) {
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 3; o++)
      for (int residual = 0; residual < 2; residual++)
        for (int r = 0; r < 2; r++) {
          sl_dtype_t in = sl_test_float_dtypes[i];
          rms_case_t c = {.rows = r ? 300 : 1,
                          .hidden = 4096,
                          .in = in,
                          .out = sl_test_float_dtypes[o],
                          .w = in,
                          .res = in,
                          .bias = 0.0f,
                          .residual = residual};
          rms_check(&c, NULL);
        }
}

/* One random finite 16-bit pattern of dt (bf16 or f16; exponent field not all ones). */
static uint16_t rand_finite16(sl_dtype_t dt) {
  const uint16_t inf = dt == SL_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
  for (;;) {
    const uint16_t u = (uint16_t)sl_test_rand_u64(&rng);
    if ((u & inf) != inf) return u;
  }
}

/* The fused residual add of one 16-bit dtype (kernels/rmsnorm.cu: packed pairs, sl_raw_add) against the CPU's fp32
 * add and one rounding, bit for bit, on operand pairs chosen for it: random finite patterns (mostly far-apart
 * exponents), pairs of close exponents (the rounding of real sums), exact ties, x = -residual (+0), -0 + -0, sums of
 * subnormals, and sums past the largest finite value (Inf). The residual is compared bitwise; y is not (rows may hold
 * Inf). Decode (one row per block) and prefill launches, h = 7168 and 2048. */
static void test_rmsnorm_residual_add_bits(void **state) {
  static const sl_dtype_t dts[2] = {SL_DTYPE_BF16, SL_DTYPE_F16};
  static const int hiddens[2] = {7168, 2048}, rowss[2] = {1, 300};
  for (int d = 0; d < 2; d++)
    for (int hi = 0; hi < 2; hi++)
      for (int ri = 0; ri < 2; ri++) {
        const sl_dtype_t dt = dts[d];
        const rms_case_t c = {.rows = rowss[ri], .hidden = hiddens[hi], .in = dt, .out = dt, .w = dt, .res = dt,
                              .residual = 1};
        if (collecting) {
          rms_check(&c, NULL); /* records the launch's spec */
          continue;
        }
        const size_t n = (size_t)c.rows * (size_t)c.hidden, b = n * 2;
        const int mant = dt == SL_DTYPE_BF16 ? 7 : 10; /* stored mantissa bits */
        const uint16_t maxf = dt == SL_DTYPE_BF16 ? 0x7f7fu : 0x7bffu, half = dt == SL_DTYPE_BF16 ? 0x3f80u : 0x3c00u;
        uint16_t *hx = sl_test_alloc(b), *hres = sl_test_alloc(b), *got = sl_test_alloc(b), *hy = sl_test_alloc(b);
        uint16_t *r0 = sl_test_alloc(b); /* the residual before the add (the CPU reference updates hres) */
        void *hw = sl_test_alloc(sl_dtype_bytes(dt, (size_t)c.hidden));
        sl_test_fill(&rng, hw, dt, (size_t)c.hidden, 1.5f, 0);
        for (size_t i = 0; i < n; i++) {
          uint16_t x = rand_finite16(dt), r = rand_finite16(dt);
          const uint16_t sign = (uint16_t)(sl_test_rand_u64(&rng) << 15);
          switch (i % 8) {
          case 0: break; /* random patterns */
          case 1: /* close exponents: r within 3 binades of x, random mantissa and sign */
          case 2: {
            const int e = (int)((x >> mant) & (dt == SL_DTYPE_BF16 ? 0xffu : 0x1fu));
            int er = e + (int)(sl_test_rand_u64(&rng) % 7) - 3;
            const int emax = dt == SL_DTYPE_BF16 ? 254 : 30;
            er = er < 0 ? 0 : er > emax ? emax : er;
            r = (uint16_t)(sign | (er << mant) | (r & ((1u << mant) - 1)));
            break;
          }
          case 3: r = x ^ 0x8000u; break;                   /* x + (-x) = +0 */
          case 4: x = 0x8000u, r = 0x8000u; break;          /* -0 + -0 = -0 */
          case 5: /* subnormals (exponent field 0), either sign */
            x &= (uint16_t)(0x8000u | ((1u << mant) - 1)), r &= (uint16_t)(0x8000u | ((1u << mant) - 1));
            break;
          case 6: x = (uint16_t)(maxf | sign), r = (uint16_t)((maxf - (r & 7u)) | sign); break; /* overflow: +-Inf */
          case 7: /* a tie: 1.m + half an ulp of it (x's last stored bit decides the rounding) */
            x = (uint16_t)(half | (x & ((1u << mant) - 1)) | sign);
            r = (uint16_t)(((half >> mant) - mant - 1) << mant | sign);
            break;
          }
          hx[i] = x, hres[i] = r0[i] = r;
        }
        void *dx = upload(hx, b), *dw = upload(hw, sl_dtype_bytes(dt, (size_t)c.hidden)), *dres = upload(hres, b);
        void *dy = alloc_poisoned(b);
        sl_rmsnorm_args_t a = rms_args(&c, dx, dy, dres, dw);
        SL_ASSERT_OK(sl_rmsnorm(dev, &a, NULL));
        finish_kernel("rmsnorm (residual add bits)");
        download(got, dres, b);
        sl_rmsnorm_args_t h = a;
        h.x = hx, h.y = hy, h.weight = hw, h.residual = hres;
        SL_ASSERT_OK(sl_rmsnorm_cpu(&h));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
          if (got[i] != hres[i] && bad++ < 8)
            fprintf(stderr, "  residual[%zu] (%s): %04x + %04x: got %04x want %04x\n", i, sl_dtype_name(dt), hx[i],
                    r0[i], got[i], hres[i]);
        if (bad)
          fail_msg("rmsnorm residual add %s rows %d hidden %d: %zu of %zu residual elements differ in their bits",
                   sl_dtype_name(dt), c.rows, c.hidden, bad, n);
        sl_device_free(dev, dx);
        sl_device_free(dev, dw);
        sl_device_free(dev, dres);
        sl_device_free(dev, dy);
        free(hx), free(hres), free(got), free(hy), free(hw), free(r0);
      }
}

static void test_rmsnorm_sizes_and_variants(void **state) {
  static const int hiddens[] = {512, 520, 2048, 7168, 8192, 16384};
  static const int rows[] = {1, 7, 1000};
  for (int h = 0; h < 6; h++)
    for (int r = 0; r < 3; r++)
      for (int residual = 0; residual < 2; residual++) {
        rms_case_t c = {.rows = rows[r],
                        .hidden = hiddens[h],
                        .in = SL_DTYPE_BF16,
                        .out = SL_DTYPE_BF16,
                        .w = SL_DTYPE_BF16,
                        .res = SL_DTYPE_BF16,
                        .bias = (float)(r & 1),
                        .residual = residual};
        rms_check(&c, NULL);
      }
  /* Mixed: bf16 activations, fp32 residual stream and weights; fp16 in, fp32 out, bf16 weights. */
  rms_case_t m1 = {.rows = 257,
                   .hidden = 2048,
                   .in = SL_DTYPE_BF16,
                   .out = SL_DTYPE_BF16,
                   .w = SL_DTYPE_F32,
                   .res = SL_DTYPE_F32,
                   .residual = 1};
  rms_check(&m1, NULL);
  rms_case_t m2 = {.rows = 33,
                   .hidden = 7168,
                   .in = SL_DTYPE_F16,
                   .out = SL_DTYPE_F32,
                   .w = SL_DTYPE_BF16,
                   .res = SL_DTYPE_BF16,
                   .bias = 1.0f,
                   .residual = 1};
  rms_check(&m2, NULL);
  /* Many more row groups than resident blocks: the grid-stride loop runs several rounds. */
  rms_case_t big = {.rows = 20000,
                    .hidden = 2048,
                    .in = SL_DTYPE_BF16,
                    .out = SL_DTYPE_BF16,
                    .w = SL_DTYPE_BF16,
                    .res = SL_DTYPE_BF16,
                    .residual = 1};
  rms_check(&big, NULL);
  /* The same for the plain norm, whose 16-bit rows are software-pipelined (the next row's loads
   * are issued before the current row is reduced and stored): several rounds at 2 and 4 rows
   * per block, an f16 -> f32 pair, and an odd row count so the last round is partly empty. */
  static const struct { int rows, hidden; sl_dtype_t in, out; } plain_big[] = {
      {20000, 2048, SL_DTYPE_BF16, SL_DTYPE_BF16},
      {5001, 7168, SL_DTYPE_BF16, SL_DTYPE_BF16},
      {9999, 4096, SL_DTYPE_F16, SL_DTYPE_F32},
      {4099, 2048, SL_DTYPE_F32, SL_DTYPE_BF16}};
  for (int i = 0; i < 4; i++) {
    rms_case_t pb = {.rows = plain_big[i].rows,
                     .hidden = plain_big[i].hidden,
                     .in = plain_big[i].in,
                     .out = plain_big[i].out,
                     .w = SL_DTYPE_BF16,
                     .res = plain_big[i].in,
                     .bias = (float)(i & 1)};
    rms_check(&pb, NULL);
  }
  /* Per-head size (the QK-norm benchmark's baseline). */
  rms_case_t head = {
      .rows = 999, .hidden = 128, .in = SL_DTYPE_BF16, .out = SL_DTYPE_BF16, .w = SL_DTYPE_BF16, .res = SL_DTYPE_BF16};
  rms_check(&head, NULL);
}

/* The row factor both ways (kernels/rmsnorm.cu "The row's factor"): rsqrt where the rule picks
 * the IEEE factor (prefill) and the IEEE factor where it picks rsqrt (decode), every output dtype
 * (fp32 out: 1e-5 relative), both variants, a size whose 1/hidden is not a power of two; and the
 * kernel both ways ("One row, one block"): the one-row kernel where the launch gives it (decode,
 * and the full-grid prefill entries) and the row loop at the same launch, and the one-row kernel
 * forced (SL_RMSNORM_LOOP_OFF) on a full grid of a row per block, fused and h=7168 included. */
static void test_rmsnorm_row_factor(void **state) {
  static const int hiddens[] = {2048, 7168};
  static const int rows[] = {3, 1000};
  for (int h = 0; h < 2; h++)
    for (int r = 0; r < 2; r++)
      for (int o = 0; o < 3; o++)
        for (int residual = 0; residual < 2; residual++)
          for (int k = 0; k < 6; k++) {
            const int rsq = k & 1 ? SL_RMSNORM_RSQ_ON : SL_RMSNORM_RSQ_OFF;
            const int loop = k >> 1 == 2 ? SL_RMSNORM_LOOP_OFF : k >> 1 ? SL_RMSNORM_LOOP_ON : SL_RMSNORM_LOOP_AUTO;
            /* OFF on a full grid of one row per block: the one-row kernel for the fused variant and
             * h=7168 too, where AUTO would run the loop */
            const bool one = loop == SL_RMSNORM_LOOP_OFF;
            rms_case_t c = {.rows = rows[r],
                            .elts = one ? 16 : 0,
                            .warps = one ? SL_RMSNORM_ROW_WARPS_E(hiddens[h], 16) : 0,
                            .grid = one ? SL_RMSNORM_GRID_FULL : 0,
                            .hidden = hiddens[h],
                            .in = SL_DTYPE_BF16,
                            .out = sl_test_float_dtypes[o],
                            .w = SL_DTYPE_BF16,
                            .res = SL_DTYPE_BF16,
                            .bias = (float)(o & 1),
                            .residual = residual,
                            .rsq = rsq,
                            .loop = loop};
            rms_check(&c, NULL);
          }
}

static void test_rmsnorm_every_warps_candidate(void **state) {
  /* 2048 at 32 warps is 16 rows per block: more rows than named barriers, __syncthreads. 3001
   * rows: more row groups than resident blocks at the small candidates (grid-stride rounds). */
  static const int hiddens[] = {520, 2048, 4096, 7168};
  for (int h = 0; h < 4; h++) {
    int cand[8], n = sl_rmsnorm_warp_candidates(hiddens[h], cand);
    for (int i = 0; i < n; i++)
      for (int residual = 0; residual < 2; residual++) {
        rms_case_t c = {.rows = 3001,
                        .hidden = hiddens[h],
                        .in = SL_DTYPE_BF16,
                        .out = SL_DTYPE_BF16,
                        .w = SL_DTYPE_BF16,
                        .res = SL_DTYPE_BF16,
                        .residual = residual,
                        .warps = cand[i]};
        rms_check(&c, NULL);
      }
  }
}

/* Every point --tune can launch: elements per thread (8, 16, 32) x warps per block (the row's
 * warps x 1, 2, 4, 8 while <= 32) x grid policy (resident, full) x plain/fused, the weight
 * re-read; with the weight in registers at one row per block and at the largest block (where
 * the register budget changes). Hidden sizes not a multiple of a row's threads x 8 (3000: the
 * last chunk partly outside the row); odd row counts, so the last block (or grid-stride round)
 * is partly empty; at 3001 rows and <= 3000 elements the resident grid strides (more row groups
 * than resident blocks at one row per block). bf16, and f32 in -> bf16 out at 2048 (4-byte
 * elements: twice the chunks) at the smallest and largest block. (~140 kernels to compile:
 * the bound on this test's time.) */
static void test_rmsnorm_every_tune_point(void **state) {
  static const struct { int hidden, rows; sl_dtype_t in; } shapes[] = {
      {2048, 3001, SL_DTYPE_BF16}, {3000, 3001, SL_DTYPE_BF16}, {4096, 1001, SL_DTYPE_BF16},
      {7168, 999, SL_DTYPE_BF16},  {16384, 333, SL_DTYPE_BF16}, {2048, 777, SL_DTYPE_F32}};
  static const int elts[] = {8, 16, 32};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int e = 0; e < 3; e++) {
      int cand[8], n = sl_rmsnorm_warp_candidates_e(shapes[s].hidden, elts[e], cand);
      for (int i = 0; i < n; i++) {
        const bool edge = i == 0 || i == n - 1;
        if (shapes[s].in != SL_DTYPE_BF16 && !edge) continue;
        for (int grid = SL_RMSNORM_GRID_RESIDENT; grid <= SL_RMSNORM_GRID_FULL; grid++)
          for (int v = 0; v < (edge ? 4 : 2); v++) { /* plain/fused x weight re-read/in registers */
            const int residual = v & 1;
            rms_case_t c = {.rows = shapes[s].rows,
                            .hidden = shapes[s].hidden,
                            .in = shapes[s].in,
                            .out = SL_DTYPE_BF16,
                            .w = SL_DTYPE_BF16,
                            .res = shapes[s].in,
                            .bias = (float)(i & 1),
                            .residual = residual,
                            .warps = cand[i],
                            .elts = elts[e],
                            .grid = grid,
                            .wreg = v >> 1 ? SL_RMSNORM_WEIGHT_REGS : SL_RMSNORM_WEIGHT_RELOAD};
            rms_check(&c, NULL);
          }
      }
    }
}

/* The table's own choices at the benchmark's prefill sizes (AUTO grid, no explicit knobs), at
 * a row count that takes the large-prefill entries (>= 4096) and one below. */
static void test_rmsnorm_table_points(void **state) {
  static const int hiddens[] = {2048, 4096, 7168};
  static const int rows[] = {5, 1031, 4097}; /* decode (rows < SMs) and two prefill entries */
  for (int h = 0; h < 3; h++)
    for (int r = 0; r < 3; r++)
      for (int residual = 0; residual < 2; residual++) {
        rms_case_t c = {.rows = rows[r],
                        .hidden = hiddens[h],
                        .in = SL_DTYPE_BF16,
                        .out = SL_DTYPE_BF16,
                        .w = SL_DTYPE_BF16,
                        .res = SL_DTYPE_BF16,
                        .residual = residual};
        rms_check(&c, NULL);
      }
}

static void test_rmsnorm_in_cuda_graph(void **state) {
  sl_stream_t *st = NULL;
  if (!collecting) SL_ASSERT_OK(sl_stream_create(dev, &st));
  rms_case_t c = {
      .rows = 16, .hidden = 4096, .in = SL_DTYPE_BF16, .out = SL_DTYPE_BF16, .w = SL_DTYPE_BF16, .res = SL_DTYPE_BF16};
  rms_check(&c, st);
  /* The decode candidates --tune times in a graph: one row per block at 8, 16, 32 elements. */
  static const int elts[] = {8, 16, 32};
  for (int e = 0; e < 3; e++)
    for (int v = 0; v < 4; v++) {
      const int residual = v & 1;
      rms_case_t d = {.rows = 16,
                      .hidden = 2048,
                      .in = SL_DTYPE_BF16,
                      .out = SL_DTYPE_BF16,
                      .w = SL_DTYPE_BF16,
                      .res = SL_DTYPE_BF16,
                      .residual = residual,
                      .warps = SL_RMSNORM_ROW_WARPS_E(2048, elts[e]),
                      .elts = elts[e],
                      .wreg = v >> 1 ? SL_RMSNORM_WEIGHT_REGS : SL_RMSNORM_WEIGHT_RELOAD};
      rms_check(&d, st);
    }
  if (st) sl_stream_destroy(dev, st);
}

/* ---- QK-norm -------------------------------------------------------------------------------- */
typedef struct {
  int tokens, q_heads, kv_heads, head_dim, rot_dim, packed, warps;
  sl_dtype_t dt;
  int items, grid; /* 0: the choice; else head groups per warp and SL_QKNORM_GRID_* */
  int cache, rsq, wf32, pipe, rlayout; /* layout knobs, args values (0: the choice) */
  float bias;                         /* weight_bias */
} qk_case_t;

enum { QK_MAX_POS = 300 };

/* The launch arguments of a case (device pointers, or placeholders for compile-ahead). */
static sl_qknorm_args_t qk_args(const qk_case_t *c, long q_stride, long k_stride, void *q, void *k, void *qw, void *kw,
                                void *pos, void *cos_cache, void *sin_cache) {
  return (sl_qknorm_args_t){.q = q,
                            .k = k,
                            .q_row_stride = q_stride,
                            .k_row_stride = k_stride,
                            .tokens = c->tokens,
                            .q_heads = c->q_heads,
                            .kv_heads = c->kv_heads,
                            .head_dim = c->head_dim,
                            .q_weight = qw,
                            .k_weight = kw,
                            .dtype = c->dt,
                            .w_dtype = c->dt,
                            .eps = 1e-6f,
                            .weight_bias = c->bias,
                            .rope = c->rot_dim > 0,
                            .rot_dim = c->rot_dim,
                            .positions = pos,
                            .cos_cache = cos_cache,
                            .sin_cache = sin_cache,
                            .max_pos = QK_MAX_POS,
                            .warps = c->warps,
                            .items = c->items,
                            .grid_policy = c->grid,
                            .cache = c->cache,
                            .fast_rsqrt = c->rsq,
                            .weights_f32 = c->wf32,
                            .pipeline = c->pipe,
                            .rope_layout = c->rlayout};
}

static void qk_check(const qk_case_t *c) {
  const int D = c->head_dim, half = c->rot_dim / 2;
  const long q_stride = c->packed ? (long)(c->q_heads + 2 * c->kv_heads) * D : (long)c->q_heads * D;
  const long k_stride = c->packed ? q_stride : (long)c->kv_heads * D;
  if (collecting) {
    /* placeholder pointers: choose + spec look at the shape and knobs only */
    void *ph = (void *)256;
    sl_qknorm_args_t a = qk_args(c, q_stride, k_stride, ph, ph, ph, ph, ph, ph, ph);
    sl_qknorm_point_t pt;
    sl_jit_spec_t spec;
    if (sl_qknorm_choose(&a, collect_arch, collect_sms, &pt) == SL_OK && sl_qknorm_spec(&spec, &pt) == SL_OK)
      collect(&spec);
    return;
  }
  const size_t qn = (size_t)c->tokens * (size_t)q_stride, kn = c->packed ? 0 : (size_t)c->tokens * (size_t)k_stride;
  const size_t qb = sl_dtype_bytes(c->dt, qn), kb = sl_dtype_bytes(c->dt, kn), wb = sl_dtype_bytes(c->dt, (size_t)D);
  void *hq = sl_test_alloc(qb), *hk = sl_test_alloc(kb + 16), *gq = sl_test_alloc(qb), *gk = sl_test_alloc(kb + 16);
  void *hqw = sl_test_alloc(wb), *hkw = sl_test_alloc(wb);
  int32_t *hpos = sl_test_alloc(sizeof(int32_t) * (size_t)c->tokens);
  size_t cache_n = (size_t)QK_MAX_POS * (size_t)(half ? half : 1);
  float *hcos = sl_test_alloc(cache_n * 4), *hsin = sl_test_alloc(cache_n * 4);
  sl_test_fill(&rng, hq, c->dt, qn, 1.5f, 1);
  sl_test_fill(&rng, hk, c->dt, kn, 1.5f, 1);
  sl_test_fill(&rng, hqw, c->dt, (size_t)D, 1.5f, 0);
  sl_test_fill(&rng, hkw, c->dt, (size_t)D, 1.5f, 0);
  for (size_t i = 0; i < cache_n; i++) {
    double th = sl_test_rand_uniform(&rng, 0.0f, 6.2831853f);
    hcos[i] = (float)cos(th);
    hsin[i] = (float)sin(th);
  }
  for (int t = 0; t < c->tokens; t++)
    hpos[t] = (int32_t)(sl_test_rand_u64(&rng) % QK_MAX_POS);
  if (c->tokens > 3) {
    hpos[1] = QK_MAX_POS + 5; /* out of range: normalized, not rotated, nothing read */
    hpos[2] = -3;
  }
  void *dq = upload(hq, qb), *dk = kb ? upload(hk, kb) : NULL, *dqw = upload(hqw, wb), *dkw = upload(hkw, wb);
  void *dpos = upload(hpos, sizeof(int32_t) * (size_t)c->tokens);
  void *dcos = upload(hcos, cache_n * 4), *dsin = upload(hsin, cache_n * 4);
  size_t k_off = sl_dtype_bytes(c->dt, (size_t)c->q_heads * D);
  sl_qknorm_args_t a = qk_args(c, q_stride, k_stride, dq, c->packed ? (char *)dq + k_off : dk, dqw, dkw, dpos, dcos, dsin);
  SL_ASSERT_OK(sl_qknorm(dev, &a, NULL));
  finish_kernel("qknorm");
  download(gq, dq, qb);
  if (kb) download(gk, dk, kb);
  sl_qknorm_args_t h = a;
  h.q = hq;
  h.k = c->packed ? (char *)hq + k_off : hk;
  h.q_weight = hqw;
  h.k_weight = hkw;
  h.positions = hpos;
  h.cos_cache = hcos;
  h.sin_cache = hsin;
  SL_ASSERT_OK(sl_qknorm_cpu(&h));
  /* 2 ulp, or an absolute floor for the rotation's cancellations (fp32 products of values
   * up to ~5 differ by ~1e-6 between FMA and separate roundings). */
  const float atol = 2e-6f;
  size_t bad = 0;
  if (c->packed) {
    /* Heads within 2 ulp; the V slice bit-exact (the CPU left it as it was). */
    const size_t qk_n = (size_t)(c->q_heads + c->kv_heads) * D, v_n = (size_t)c->kv_heads * D;
    for (int t = 0; t < c->tokens; t++) {
      size_t row = (size_t)t * (size_t)q_stride;
      bad += sl_test_compare_dtype("qk", c->dt, (char *)gq + sl_dtype_bytes(c->dt, row),
                                   (char *)hq + sl_dtype_bytes(c->dt, row), qk_n, 2, atol, 1e-5f);
      size_t v_at = sl_dtype_bytes(c->dt, row + qk_n);
      if (memcmp((char *)gq + v_at, (char *)hq + v_at, sl_dtype_bytes(c->dt, v_n)) != 0) {
        if (bad++ < 4) fprintf(stderr, "  token %d: V slice modified\n", t);
      }
    }
  } else {
    bad += sl_test_compare_dtype("q", c->dt, gq, hq, qn, 2, atol, 1e-5f);
    bad += sl_test_compare_dtype("k", c->dt, gk, hk, kn, 2, atol, 1e-5f);
  }
  if (bad)
    fail_msg("qknorm tokens %d heads %d+%d dim %d rot %d %s packed %d warps %d items %d grid %d cache %d rsq %d "
             "wf32 %d pipe %d rope_layout %d bias %g: %zu mismatches",
             c->tokens, c->q_heads, c->kv_heads, D, c->rot_dim, sl_dtype_name(c->dt), c->packed, c->warps, c->items,
             c->grid, c->cache, c->rsq, c->wf32, c->pipe, c->rlayout, (double)c->bias, bad);
  sl_device_free(dev, dq);
  sl_device_free(dev, dk);
  sl_device_free(dev, dqw);
  sl_device_free(dev, dkw);
  sl_device_free(dev, dpos);
  sl_device_free(dev, dcos);
  sl_device_free(dev, dsin);
  free(hq);
  free(hk);
  free(gq);
  free(gk);
  free(hqw);
  free(hkw);
  free(hpos);
  free(hcos);
  free(hsin);
}

static void test_qknorm_every_dtype_dim_layout_rope(void **state) {
  static const int dims[] = {64, 128, 256};
  static const int tokens[] = {1, 333};
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 3; h++)
      for (int packed = 0; packed < 2; packed++)
        for (int rope = 0; rope < 3; rope++)
          for (int t = 0; t < 2; t++) {
            qk_case_t c = {.tokens = tokens[t],
                           .q_heads = 8,
                           .kv_heads = 2,
                           .head_dim = dims[h],
                           .rot_dim = rope == 0   ? 0
                                      : rope == 1 ? dims[h]
                                                  : dims[h] / 2,
                           .packed = packed,
                           .dt = sl_test_float_dtypes[d]};
            qk_check(&c);
          }
}

static void test_qknorm_qwen3_shapes_and_warps(void **state) {
  /* Qwen3 head counts (32+4, 64+4) packed with RoPE; every warps candidate; enough heads for
   * the grid-stride loop to run several rounds. */
  qk_case_t c = {
      .tokens = 4096, .q_heads = 32, .kv_heads = 4, .head_dim = 128, .rot_dim = 128, .packed = 1, .dt = SL_DTYPE_BF16};
  qk_check(&c);
  c.q_heads = 64;
  c.tokens = 17;
  qk_check(&c);
  /* Few heads per token (3, fewer than the 8-16 heads of a warp iteration at 8 warps): one
   * iteration's items span several tokens; with and without RoPE (positions per item). */
  for (int rope = 0; rope < 2; rope++) {
    qk_case_t few = {.tokens = 3001,
                     .q_heads = 2,
                     .kv_heads = 1,
                     .head_dim = 64,
                     .rot_dim = rope ? 64 : 0,
                     .packed = rope,
                     .warps = 8,
                     .dt = SL_DTYPE_BF16};
    qk_check(&few);
  }
  for (int w = 1; w <= 32; w *= 2) {
    qk_case_t cw = {.tokens = 2000,
                    .q_heads = 32,
                    .kv_heads = 4,
                    .head_dim = 128,
                    .rot_dim = 0,
                    .packed = 0,
                    .warps = w,
                    .dt = SL_DTYPE_BF16};
    qk_check(&cw);
  }
}

/* Every point --tune can launch: warps (1..32) x items (1, 2, 4; 1, 2 with RoPE) x grid policy
 * (resident: grid-stride rounds at 2001 tokens x 36 heads; full: every warp one iteration, the
 * last block partly empty), Qwen3 32+4 separate Q/K and 64+4 packed with RoPE; then the few-
 * heads layout (an iteration's items span tokens) at the largest span on a full grid. */
static void test_qknorm_every_tune_point(void **state) {
  for (int rope = 0; rope < 2; rope++)
    for (int w = 1; w <= 32; w *= 2)
      for (int items = 1; items <= (rope ? 2 : 4); items *= 2)
        for (int grid = SL_QKNORM_GRID_RESIDENT; grid <= SL_QKNORM_GRID_FULL; grid++) {
          qk_case_t c = {.tokens = rope ? 1001 : 2001,
                         .q_heads = rope ? 64 : 32,
                         .kv_heads = 4,
                         .head_dim = 128,
                         .rot_dim = rope ? 128 : 0,
                         .packed = rope,
                         .warps = w,
                         .dt = SL_DTYPE_BF16,
                         .items = items,
                         .grid = grid};
          qk_check(&c);
        }
  for (int grid = SL_QKNORM_GRID_RESIDENT; grid <= SL_QKNORM_GRID_FULL; grid++) {
    qk_case_t few = {.tokens = 3001,
                     .q_heads = 2,
                     .kv_heads = 1,
                     .head_dim = 64,
                     .rot_dim = 0,
                     .packed = 0,
                     .warps = 32,
                     .dt = SL_DTYPE_BF16,
                     .items = 4,
                     .grid = grid};
    qk_check(&few);
  }
  /* The table's own choice (AUTO) at the benchmark's large shape, fp16 and fp32 too. */
  for (int d = 0; d < 3; d++) {
    qk_case_t t = {.tokens = 4097,
                   .q_heads = 32,
                   .kv_heads = 4,
                   .head_dim = 128,
                   .dt = sl_test_float_dtypes[d]};
    qk_check(&t);
  }
}

/* Every configuration part B of the QK-norm --tune can launch (launch/bench_kernels.c: the
 * layout knobs CACHE x RSQ x WF32 x PIPE / RoPE layout around the measured bases), at the bench's
 * Qwen3 layouts (32+4 separate Q/K; 64+4 packed QKV with RoPE, 2001 / 1001 tokens: several
 * grid-stride rounds on a resident grid, a partly empty last block on a full grid); then the
 * knobs at the edges: every dtype and head_dim, partial rotary (rot 16 of 64: pairs on adjacent
 * lanes; 64 of 128), the few-heads layout (3 heads per token: an iteration's items span tokens,
 * positions per item), a Gemma-style weight bias, 4 items with the pipeline, and the table's
 * own choice with every knob forced on. */
static void test_qknorm_layout_knobs(void **state) {
  static const int plain[][3] = {{1, 4, SL_QKNORM_GRID_FULL},     {2, 2, SL_QKNORM_GRID_FULL},
                                 {2, 4, SL_QKNORM_GRID_FULL},     {4, 2, SL_QKNORM_GRID_FULL},
                                 {2, 2, SL_QKNORM_GRID_RESIDENT}, {8, 2, SL_QKNORM_GRID_RESIDENT}};
  static const int roped[][3] = {
      {1, 2, SL_QKNORM_GRID_RESIDENT}, {2, 2, SL_QKNORM_GRID_RESIDENT}, {2, 2, SL_QKNORM_GRID_FULL}};
  for (int rope = 0; rope < 2; rope++)
    for (int b = 0; b < (rope ? 3 : 6); b++) {
      const int *base = rope ? roped[b] : plain[b];
      const int last = rope ? 2 : (base[2] == SL_QKNORM_GRID_RESIDENT && base[1] <= 2);
      for (int cache = 0; cache < 3; cache++)
        for (int rsq = 0; rsq < 2; rsq++)
          for (int wf32 = 0; wf32 < 2; wf32++)
            for (int k4 = 0; k4 <= last; k4++) {
              /* ~200 cases: 501 / 251 tokens keep the test's time in bounds; the grid-stride rounds
               * at 2001 tokens are covered by test_qknorm_every_tune_point */
              qk_case_t c = {.tokens = rope ? 251 : 501,
                             .q_heads = rope ? 64 : 32,
                             .kv_heads = 4,
                             .head_dim = 128,
                             .rot_dim = rope ? 128 : 0,
                             .packed = rope,
                             .warps = base[0],
                             .items = base[1],
                             .grid = base[2],
                             .dt = SL_DTYPE_BF16,
                             .cache = SL_QKNORM_CACHE_NONE + cache,
                             .rsq = rsq ? SL_QKNORM_ON : SL_QKNORM_OFF,
                             .wf32 = wf32 ? SL_QKNORM_ON : SL_QKNORM_OFF,
                             .pipe = !rope && k4 ? SL_QKNORM_ON : SL_QKNORM_OFF,
                             .rlayout = rope ? SL_QKNORM_ROPE_SHUFFLE + k4 : SL_QKNORM_ROPE_AUTO};
              qk_check(&c);
            }
    }
  /* every knob on, every dtype x head_dim x rotary (none, full, half, 16: pairs on adjacent
   * lanes) x separate/packed, each RoPE layout the rotary allows (pairs-in-a-lane: full only) */
  static const int dims[] = {64, 128, 256};
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 3; h++)
      for (int rope = 0; rope < 4; rope++)
        for (int lay = SL_QKNORM_ROPE_SHUFFLE; lay <= SL_QKNORM_ROPE_PAIRS; lay++) {
          const int rot = rope == 0 ? 0 : rope == 1 ? dims[h] : rope == 2 ? dims[h] / 2 : 16;
          if ((!rot && lay != SL_QKNORM_ROPE_SHUFFLE) || (lay == SL_QKNORM_ROPE_PAIRS && rot != dims[h])) continue;
          qk_case_t c = {.tokens = 777,
                         .q_heads = 8,
                         .kv_heads = 2,
                         .head_dim = dims[h],
                         .rot_dim = rot,
                         .packed = rope & 1,
                         .warps = 4,
                         .items = 2,
                         .grid = SL_QKNORM_GRID_RESIDENT,
                         .dt = sl_test_float_dtypes[d],
                         .cache = SL_QKNORM_CACHE_STREAM,
                         .rsq = SL_QKNORM_ON,
                         .wf32 = SL_QKNORM_ON,
                         .pipe = rot ? SL_QKNORM_OFF : SL_QKNORM_ON,
                         .rlayout = rot ? lay : SL_QKNORM_ROPE_AUTO,
                         .bias = d == 1 ? 1.0f : 0.0f};
          qk_check(&c);
        }
  /* few heads per token (items span tokens), resident and full grids, with and without RoPE */
  for (int rope = 0; rope < 2; rope++)
    for (int grid = SL_QKNORM_GRID_RESIDENT; grid <= SL_QKNORM_GRID_FULL; grid++)
      for (int items = 1; items <= 4; items *= 2) {
        qk_case_t few = {.tokens = 3001,
                         .q_heads = 2,
                         .kv_heads = 1,
                         .head_dim = 64,
                         .rot_dim = rope ? 64 : 0,
                         .packed = rope,
                         .warps = 8,
                         .items = items,
                         .grid = grid,
                         .dt = SL_DTYPE_BF16,
                         .cache = SL_QKNORM_CACHE_STREAM_STORES,
                         .rsq = SL_QKNORM_OFF,
                         .wf32 = SL_QKNORM_ON,
                         .pipe = rope ? SL_QKNORM_OFF : SL_QKNORM_ON,
                         .rlayout = !rope ? SL_QKNORM_ROPE_AUTO : items == 1 ? SL_QKNORM_ROPE_SPLIT : SL_QKNORM_ROPE_PAIRS,
                         .bias = 1.0f};
        qk_check(&few);
      }
  /* the table's warps/items/grid (AUTO) at the bench's large shape with every knob on */
  for (int rope = 0; rope < 2; rope++) {
    qk_case_t t = {.tokens = 4097,
                   .q_heads = 32,
                   .kv_heads = 4,
                   .head_dim = 128,
                   .rot_dim = rope ? 128 : 0,
                   .packed = rope,
                   .dt = SL_DTYPE_BF16,
                   .cache = SL_QKNORM_CACHE_STREAM,
                   .rsq = SL_QKNORM_ON,
                   .wf32 = SL_QKNORM_ON,
                   .rlayout = SL_QKNORM_ROPE_PAIRS};
    qk_check(&t);
  }
}

/* ---- embedding ------------------------------------------------------------------------------ */
static void emb_check(sl_dtype_t dt, int hidden, int tokens, int warps, int with_bad_ids) {
  const int vocab = 3000;
  size_t row = sl_dtype_bytes(dt, (size_t)hidden), ob = row * (size_t)tokens;
  void *htable = sl_test_alloc(row * vocab), *hout = sl_test_alloc(ob + row);
  int32_t *hids = sl_test_alloc(sizeof(int32_t) * (size_t)tokens);
  sl_test_fill(&rng, htable, dt, (size_t)hidden * vocab, 1.0f, 0); /* uniform: cheaper, compared bit-exact */
  for (int t = 0; t < tokens; t++)
    hids[t] = (int32_t)(sl_test_rand_u64(&rng) % vocab);
  if (tokens > 1) hids[tokens - 1] = vocab - 1;
  if (with_bad_ids) {
    hids[7] = vocab + 11;
    hids[3] = -5; /* the first bad position */
    hids[50] = 1 << 30;
  }
  void *dtable = upload(htable, row * vocab), *dids = upload(hids, sizeof(int32_t) * (size_t)tokens);
  void *dout = alloc_poisoned(ob + row), *derr = NULL;
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(unsigned long long), &derr));
  SL_ASSERT_OK(sl_embedding_error_reset(dev, derr, NULL));
  sl_embedding_args_t a = {.ids = dids,
                           .table = dtable,
                           .out = dout,
                           .error = derr,
                           .tokens = tokens,
                           .vocab = vocab,
                           .hidden = hidden,
                           .dtype = dt,
                           .warps = warps};
  SL_ASSERT_OK(sl_embedding(dev, &a, NULL)); /* asynchronous: errors come from the check */
  finish_kernel("embedding");
  sl_status_t s = sl_embedding_check(dev, derr, vocab, NULL);
  if (with_bad_ids) {
    assert_int_equal(s, SL_ERR_RANGE);
    assert_non_null(strstr(sl_last_error(), "token id -5 at position 3"));
  } else {
    SL_ASSERT_OK(s);
  }
  download(hout, dout, ob + row);
  for (int t = 0; t < tokens; t++) {
    const char *got = (const char *)hout + (size_t)t * row;
    int bad_id = hids[t] < 0 || hids[t] >= vocab;
    if (bad_id) {
      for (size_t i = 0; i < row; i++)
        if (got[i] != 0) fail_msg("embedding: row %d (bad id %d) not zeroed", t, hids[t]);
    } else if (memcmp(got, (const char *)htable + (size_t)hids[t] * row, row) != 0) {
      fail_msg("embedding %s hidden %d tokens %d warps %d: row %d (id %d) differs", sl_dtype_name(dt), hidden, tokens,
               warps, t, hids[t]);
    }
  }
  assert_true(all_ff((char *)hout + ob, row)); /* guard row */
  sl_device_free(dev, dtable);
  sl_device_free(dev, dids);
  sl_device_free(dev, dout);
  sl_device_free(dev, derr);
  free(htable);
  free(hout);
  free(hids);
}

static void test_embedding_matches_cpu(void **state) {
  static const int hiddens[] = {520, 2048, 7168};
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 3; h++) {
      emb_check(sl_test_float_dtypes[d], hiddens[h], 1, 0, 0);
      emb_check(sl_test_float_dtypes[d], hiddens[h], 1000, 0, 0);
    }
  for (int w = 1; w <= 32; w *= 2)
    emb_check(SL_DTYPE_BF16, 4096, 5000, w, 0);
}

static void test_embedding_out_of_range_reported(void **state) {
  emb_check(SL_DTYPE_BF16, 2048, 100, 0, 1);
  emb_check(SL_DTYPE_F32, 520, 3000, 0, 1);
}

int main(void) {
  /* Every test, in order; SL_TEST_FILTER (a glob of names, sl_test.h) runs and compiles ahead
   * only the matching ones. */
#define SL_NORM_TEST(f, ahead) {#f, f, ahead} /* ahead: it launches JIT kernels (compile-ahead) */
  static const struct {
    const char *name;
    void (*fn)(void **);
    bool ahead;
  } all[] = {SL_NORM_TEST(test_rmsnorm_every_dtype_pair, true),
             SL_NORM_TEST(test_rmsnorm_sizes_and_variants, true),
             SL_NORM_TEST(test_rmsnorm_row_factor, true),
             SL_NORM_TEST(test_rmsnorm_every_warps_candidate, true),
             SL_NORM_TEST(test_rmsnorm_every_tune_point, true),
             SL_NORM_TEST(test_rmsnorm_table_points, true),
             SL_NORM_TEST(test_rmsnorm_in_cuda_graph, true),
             SL_NORM_TEST(test_rmsnorm_residual_add_bits, true),
             SL_NORM_TEST(test_qknorm_every_dtype_dim_layout_rope, true),
             SL_NORM_TEST(test_qknorm_qwen3_shapes_and_warps, true),
             SL_NORM_TEST(test_qknorm_every_tune_point, true),
             SL_NORM_TEST(test_qknorm_layout_knobs, true),
             SL_NORM_TEST(test_embedding_matches_cpu, false),
             SL_NORM_TEST(test_embedding_out_of_range_reported, false)};
#undef SL_NORM_TEST
  enum { N_ALL = sizeof all / sizeof all[0] };
  void (*ahead[N_ALL])(void **);
  struct CMUnitTest tests[N_ALL];
  int n_ahead = 0, n = 0;
  for (int i = 0; i < N_ALL; i++) {
    if (!sl_test_selected(all[i].name)) continue;
    if (all[i].ahead) ahead[n_ahead++] = all[i].fn;
    tests[n++] = (struct CMUnitTest){.name = all[i].name, .test_func = all[i].fn};
  }
  if (n == 0) {
    fprintf(stderr, "SL_TEST_FILTER='%s' matches no test of gpu_test_norm\n", getenv("SL_TEST_FILTER"));
    return 1;
  }
  const char *only = getenv("SL_TEST_COLLECT_ARCH");
  if (only && *only) { /* the compile-ahead step alone, no GPU (see above) */
    collect_arch = atoi(only);
    collect_sms = 132;
    compile_ahead(ahead, n_ahead);
    return 0;
  }
  dev = sl_test_open_gpu_or_skip(0);
  rng = sl_test_seed();
  collect_arch = sl_device_info(dev)->arch;
  collect_sms = sl_device_info(dev)->sm_count;
  compile_ahead(ahead, n_ahead);
  int rc = _cmocka_run_group_tests("gpu_test_norm", tests, (size_t)n, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
