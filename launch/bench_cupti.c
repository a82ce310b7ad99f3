/* Kernel device time by CUPTI's activity API (sl_bench_kernel_us, launch/sl_bench.h).
 *
 * Why: the graph column divides a graph of 20 repetitions by 20, so it carries the graph's
 * launch gap between two kernels (~0.5 us on the H200), and the plain column carries the
 * events'. CUPTI records each kernel's (and memset's, memcpy's) start and end on the GPU clock;
 * a repetition's device time is the span from its first operation's start to its last one's
 * end. This is the time DeepEP's benchmarks report (torch.profiler / Kineto, which is CUPTI).
 *
 * libcupti is opened at run time (dlopen), so the binary starts where it is absent (CI, the
 * CPU backend): the measurement then reports SL_ERR_UNSUPPORTED and rows show "-". Built only
 * with cupti.h at hand (SLUICE_HAVE_CUPTI_H, CMakeLists.txt). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_bench.h"

#if defined(SLUICE_HAVE_CUDA) && defined(SLUICE_HAVE_CUPTI_H)
#include <cupti.h>

typedef struct {
  uint32_t corr;
  uint64_t start, end; /* an operation; for an external-correlation record: start = the repetition */
} op_rec_t;

/* Records from CUPTI's buffers: the operations (kernels, memsets, memcpys) and the map from the
 * correlation ids of the API calls to the repetition that made them (external correlation). */
static struct {
  pthread_mutex_t mu;
  op_rec_t *ops, *ext;
  size_t n_ops, cap_ops, n_ext, cap_ext;
  size_t dropped;
} g_recs = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0, 0, 0};

static struct {
  int state; /* 0 not tried, 1 ready, 2 opened but detached (cuptiFinalize), -1 unavailable */
  bool keep_attached; /* SL_BENCH_CUPTI_DETACH=0 */
  CUptiResult (*register_cb)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind);
  CUptiResult (*flush_all)(uint32_t);
  CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
  CUptiResult (*push_ext)(CUpti_ExternalCorrelationKind, uint64_t);
  CUptiResult (*pop_ext)(CUpti_ExternalCorrelationKind, uint64_t *);
  CUptiResult (*result_string)(CUptiResult, const char **);
  CUptiResult (*finalize)(void);
} g_cupti;

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                           CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

enum { BUF_BYTES = 1 << 20 };

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUF_BYTES);
  *size = *buffer ? BUF_BYTES : 0;
  *max_records = 0;
}

static void keep(op_rec_t **a, size_t *n, size_t *cap, uint32_t corr, uint64_t start, uint64_t end) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 4096;
    op_rec_t *grown = realloc(*a, c * sizeof *grown);
    if (!grown) {
      g_recs.dropped++;
      return;
    }
    *a = grown, *cap = c;
  }
  (*a)[(*n)++] = (op_rec_t){corr, start, end};
}
#define KEEP_OP(c, s, e) keep(&g_recs.ops, &g_recs.n_ops, &g_recs.cap_ops, (c), (s), (e))

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  pthread_mutex_lock(&g_recs.mu);
  while (buffer && g_cupti.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
      KEEP_OP(k->correlationId, k->start, k->end);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
      KEEP_OP(m->correlationId, m->start, m->end);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
      KEEP_OP(m->correlationId, m->start, m->end);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)r;
      if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        keep(&g_recs.ext, &g_recs.n_ext, &g_recs.cap_ext, x->correlationId, x->externalId, 0);
    }
  }
  pthread_mutex_unlock(&g_recs.mu);
  free(buffer);
}

/* Open libcupti (SLUICE_CUDA_HOME's layouts, then the loader's path) and register the buffers. */
static bool attach(void);

static bool cupti_ready(void) {
  if (g_cupti.state == 2) return attach();
  if (g_cupti.state) return g_cupti.state > 0;
  g_cupti.state = -1;
  static const char *const rel[] = {"/extras/CUPTI/lib64/libcupti.so", "/lib64/libcupti.so", "/lib/libcupti.so",
                                    "/targets/x86_64-linux/lib/libcupti.so"};
  void *h = NULL;
#ifdef SLUICE_CUPTI_LIB
  h = dlopen(SLUICE_CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
#endif
  char path[512];
  for (size_t i = 0; !h && i < sizeof rel / sizeof rel[0]; i++) {
    snprintf(path, sizeof path, "%s%s", SLUICE_CUDA_HOME, rel[i]);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) h = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "# kernel timing off: libcupti not opened (%s)\n", dlerror());
    return false;
  }
#define SYM(field, name)                                                                                               \
  if (!(*(void **)&g_cupti.field = dlsym(h, name))) {                                                                  \
    fprintf(stderr, "# kernel timing off: %s not in libcupti\n", name);                                              \
    return false;                                                                                                      \
  }
  SYM(register_cb, "cuptiActivityRegisterCallbacks");
  SYM(enable, "cuptiActivityEnable");
  SYM(disable, "cuptiActivityDisable");
  SYM(flush_all, "cuptiActivityFlushAll");
  SYM(next_record, "cuptiActivityGetNextRecord");
  SYM(push_ext, "cuptiActivityPushExternalCorrelationId");
  SYM(pop_ext, "cuptiActivityPopExternalCorrelationId");
  SYM(result_string, "cuptiGetResultString");
  SYM(finalize, "cuptiFinalize");
#undef SYM
  const char *e = getenv("SL_BENCH_CUPTI_DETACH");
  g_cupti.keep_attached = e && strcmp(e, "0") == 0;
  return attach();
}

/* Register the buffer callbacks: the first call, and again after each detach. */
static bool attach(void) {
  const CUptiResult r = g_cupti.register_cb(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    const char *why = "?";
    g_cupti.result_string(r, &why);
    fprintf(stderr, "# kernel timing off: cuptiActivityRegisterCallbacks: %s\n", why);
    g_cupti.state = -1;
    return false;
  }
  g_cupti.state = 1;
  return true;
}

static sl_status_t cupti_check(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS) return SL_OK;
  const char *s = "?";
  g_cupti.result_string(r, &s);
  return SL_ERR(SL_ERR_UNSUPPORTED, "cupti %s: %s", what, s); /* the column goes off, the run goes on */
}

static int cmp_corr(const void *a, const void *b) {
  const uint32_t x = ((const op_rec_t *)a)->corr, y = ((const op_rec_t *)b)->corr;
  return (x > y) - (x < y);
}

sl_status_t sl_bench_kernel_us(sl_bench_t *b, sl_bench_fn fn, void *ctx, double *median_us) {
  *median_us = -1;
  if (sl_device_backend(b->rt->dev) != SL_BACKEND_CUDA || !cupti_ready())
    return SL_ERR(SL_ERR_UNSUPPORTED, "kernel timing: CUPTI is not available");
  sl_device_t *dev = b->rt->dev;
  const int n = b->iters;
  double *span = calloc((size_t)n, sizeof *span);
  uint64_t *lo = calloc((size_t)n, sizeof *lo), *hi = calloc((size_t)n, sizeof *hi);
  sl_status_t s = span && lo && hi ? SL_OK : SL_ERR(SL_ERR_NOMEM, "kernel timing");
  for (int i = 0; s == SL_OK && i < b->warmup; i++) s = fn(ctx, i, b->stream);
  if (s == SL_OK) s = sl_stream_sync(dev, b->stream);
  pthread_mutex_lock(&g_recs.mu);
  g_recs.n_ops = g_recs.n_ext = g_recs.dropped = 0;
  pthread_mutex_unlock(&g_recs.mu);
  size_t enabled = 0;
  for (; s == SL_OK && enabled < sizeof kinds / sizeof kinds[0]; enabled++)
    s = cupti_check(g_cupti.enable(kinds[enabled]), "enable");
  /* Repetitions back to back as in the plain timing (under --flush each after its fill), no
   * events between them; the API calls of repetition i carry the external correlation id i + 1. */
  for (int i = 0; s == SL_OK && i < n; i++) {
    s = sl_bench_flush(b, i); /* --flush: its fill carries no correlation id, so it is not counted */
    if (s != SL_OK) break;
    s = cupti_check(g_cupti.push_ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, (uint64_t)i + 1), "push");
    if (s != SL_OK) break;
    s = fn(ctx, b->warmup + i, b->stream);
    uint64_t popped = 0;
    const sl_status_t p = cupti_check(g_cupti.pop_ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped), "pop");
    if (s == SL_OK) s = p;
  }
  sl_status_t e = sl_stream_sync(dev, b->stream);
  if (s == SL_OK) s = e;
  if (s == SL_OK) s = sl_device_check(dev, "kernel-timed work");
  for (size_t k = 0; k < enabled; k++) g_cupti.disable(kinds[k]);
  if (enabled) {
    e = cupti_check(g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
    if (s == SL_OK) s = e;
  }
  /* Detach after every measurement: while CUPTI stays attached it slows every later kernel, so
   * the plain and graph timings of the rows that follow read high (H200, session 10,
   * bench/results/2026-11-30-s10-h200-call2: graph_us of one-kernel rows +0.2-0.45 us attached,
   * the same as without CUPTI once detached; DSv3 T=128 dispatch graph 6.03 vs 5.48 us). The work is synchronized and the
   * buffers flushed above, as cuptiFinalize requires outside a callback; the next measurement
   * attaches again. SL_BENCH_CUPTI_DETACH=0 keeps it attached (the comparison). */
  if (!g_cupti.keep_attached) {
    e = cupti_check(g_cupti.finalize(), "finalize");
    if (s == SL_OK) s = e;
    g_cupti.state = 2;
  }
  if (s == SL_OK) {
    pthread_mutex_lock(&g_recs.mu);
    qsort(g_recs.ext, g_recs.n_ext, sizeof *g_recs.ext, cmp_corr);
    for (int i = 0; i < n; i++) lo[i] = UINT64_MAX, hi[i] = 0;
    for (size_t r = 0; r < g_recs.n_ops; r++) {
      const op_rec_t *o = &g_recs.ops[r];
      const op_rec_t key = {.corr = o->corr};
      const op_rec_t *x = bsearch(&key, g_recs.ext, g_recs.n_ext, sizeof key, cmp_corr);
      if (!x || x->start < 1 || x->start > (uint64_t)n || o->end < o->start) continue;
      const int i = (int)x->start - 1;
      lo[i] = o->start < lo[i] ? o->start : lo[i];
      hi[i] = o->end > hi[i] ? o->end : hi[i];
    }
    int have = 0;
    for (int i = 0; i < n; i++)
      if (hi[i] > 0) span[have++] = (double)(hi[i] - lo[i]) * 1e-3;
    /* SL_BENCH_KERNEL_PARTS=1: the operations of the middle repetition, start and end after its
     * first start (us, stderr) -- e.g. how long the split dispatch's copy runs after its routing. */
    const char *parts = getenv("SL_BENCH_KERNEL_PARTS");
    if (parts && parts[0] == '1' && have == n) {
      const int m = n / 2;
      for (size_t r = 0; r < g_recs.n_ops; r++) {
        const op_rec_t *o = &g_recs.ops[r];
        const op_rec_t key = {.corr = o->corr};
        const op_rec_t *x = bsearch(&key, g_recs.ext, g_recs.n_ext, sizeof key, cmp_corr);
        if (x && (int)x->start - 1 == m)
          fprintf(stderr, "# kernel parts (repetition %d): op from %.2f to %.2f us\n", m,
                  (double)(o->start - lo[m]) * 1e-3, (double)(o->end - lo[m]) * 1e-3);
      }
    }
    const size_t dropped = g_recs.dropped, ops = g_recs.n_ops, ext = g_recs.n_ext;
    pthread_mutex_unlock(&g_recs.mu);
    if (dropped || have < n)
      s = SL_ERR(SL_ERR_UNSUPPORTED, "kernel timing: %d of %d repetitions recorded (%zu operations, %zu correlations, %zu dropped)",
                 have, n, ops, ext, dropped);
    else {
      qsort(span, (size_t)n, sizeof *span, sl_bench_cmp_double);
      *median_us = span[n / 2];
    }
  }
  free(span);
  free(lo);
  free(hi);
  return s;
}

#else

sl_status_t sl_bench_kernel_us(sl_bench_t *b, sl_bench_fn fn, void *ctx, double *median_us) {
  (void)fn, (void)ctx;
  *median_us = -1;
  static bool said = false;
  if (!said && sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA)
    fprintf(stderr, "# kernel timing off: built without cupti.h\n");
  said = true;
  return SL_ERR(SL_ERR_UNSUPPORTED, "kernel timing: built without cupti.h");
}

#endif

/* Kernel timing is a column, not the benchmark: where CUPTI fails (another profiler holds it,
 * e.g. under ncu) the rows go on with "-", and it is not tried again. SL_BENCH_KERNEL_TIME=0
 * turns it off. */
sl_status_t sl_bench_time_kernel(sl_bench_t *b, sl_bench_fn fn, void *ctx) {
  static int off = -1;
  if (off < 0) {
    const char *e = getenv("SL_BENCH_KERNEL_TIME");
    off = e && strcmp(e, "0") == 0;
  }
  double k = -1;
  b->row_kernel_us = -1;
  if (off) return SL_OK;
  const sl_status_t s = sl_bench_kernel_us(b, fn, ctx, &k);
  if (s == SL_ERR_UNSUPPORTED) { /* CUPTI's failures; the work's own errors return as they are */
    if (sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA) fprintf(stderr, "# kernel timing off: %s\n", sl_last_error());
    sl_clear_error();
    off = 1;
    return SL_OK;
  }
  SL_CHECK(s);
  b->row_kernel_us = k;
  return SL_OK;
}
