/* Benchmark helpers: ceilings measured in the same run, median device timing, table + JSON. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sl_probe.h"
#include "sl_bench.h"

int sl_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

bool sl_bench_selected(const sl_bench_t *b, const char *op) { return !b->filter || strstr(op, b->filter); }

static bool in_list(const int *list, int n, int v) {
  if (n == 0) return true;
  for (int i = 0; i < n; i++)
    if (list[i] == v) return true;
  return false;
}

bool sl_bench_tokens_selected(const sl_bench_t *b, int tokens) { return in_list(b->tokens, b->tokens_n, tokens); }
bool sl_bench_hidden_selected(const sl_bench_t *b, int hidden) { return in_list(b->hidden, b->hidden_n, hidden); }

/* "N[,N...]" -> up to 16 integers in [0, 2^30]. */
static sl_status_t parse_list(const char *opt, const char *text, int *list, int *n) {
  const char *p = text;
  *n = 0;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > (1L << 30) || *n == 16 || (*end && *end != ','))
      return SL_ERR(SL_ERR_INVALID, "%s wants up to 16 comma-separated integers >= 0, got '%s'", opt, text);
    list[(*n)++] = (int)v;
    p = *end == ',' ? end + 1 : end;
  }
  return SL_OK;
}

/* Time `fn` over b->iters repetitions; all are enqueued before one sync so the host runs
 * ahead and the events see device time, not launch gaps (under --flush each one follows its
 * fill, outside the events). */
static sl_status_t time_plain(sl_bench_t *b, sl_bench_fn fn, void *ctx, double *median_us) {
  sl_device_t *dev = b->rt->dev;
  int n = b->iters;
  sl_event_t **ev = calloc((size_t)n * 2, sizeof *ev);
  double *us = calloc((size_t)n, sizeof *us);
  sl_status_t s = SL_OK;
  if (!ev || !us) {
    s = SL_ERR(SL_ERR_NOMEM, "bench events");
    goto out;
  }
  for (int i = 0; i < 2 * n; i++) SL_CHECK_GOTO(sl_event_create(dev, &ev[i]), s, out);
  for (int i = 0; i < b->warmup; i++) SL_CHECK_GOTO(fn(ctx, i, b->stream), s, out);
  for (int i = 0; i < n; i++) {
    SL_CHECK_GOTO(sl_bench_flush(b, i), s, out);
    SL_CHECK_GOTO(sl_event_record(dev, ev[2 * i], b->stream), s, out);
    SL_CHECK_GOTO(fn(ctx, b->warmup + i, b->stream), s, out);
    SL_CHECK_GOTO(sl_event_record(dev, ev[2 * i + 1], b->stream), s, out);
  }
  SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, out);
  SL_CHECK_GOTO(sl_device_check(dev, "benchmarked work"), s, out);
  for (int i = 0; i < n; i++) {
    float ms;
    SL_CHECK_GOTO(sl_event_elapsed_ms(dev, ev[2 * i], ev[2 * i + 1], &ms), s, out);
    us[i] = ms * 1e3;
  }
  qsort(us, (size_t)n, sizeof *us, sl_bench_cmp_double);
  *median_us = us[n / 2];
out:
  if (ev)
    for (int i = 0; i < 2 * n; i++) sl_event_destroy(dev, ev[i]);
  free(ev);
  free(us);
  return s;
}

static sl_status_t time_graph(sl_bench_t *b, sl_bench_fn fn, void *ctx, double *median_us) {
  sl_device_t *dev = b->rt->dev;
  if (sl_device_backend(dev) != SL_BACKEND_CUDA) return SL_ERR_UNSUPPORTED;
  for (int i = 0; i < b->warmup; i++) SL_CHECK(fn(ctx, i, b->stream));
  SL_CHECK(sl_stream_sync(dev, b->stream));
  SL_CHECK(sl_graph_begin_capture(dev, b->stream));
  sl_status_t s = SL_OK;
  for (int i = 0; i < b->graph_reps && s == SL_OK; i++) s = fn(ctx, i, b->stream);
  sl_graph_t *g = NULL;
  sl_status_t e = sl_graph_end_capture(dev, b->stream, &g);
  if (s != SL_OK || e != SL_OK) {
    sl_graph_destroy(dev, g);
    return s != SL_OK ? s : e;
  }
  /* one graph replay = b->graph_reps repetitions */
  sl_event_t *e0 = NULL, *e1 = NULL;
  double *us = calloc((size_t)b->iters, sizeof *us);
  if (!us) s = SL_ERR(SL_ERR_NOMEM, "bench");
  if (s == SL_OK) s = sl_event_create(dev, &e0);
  if (s == SL_OK) s = sl_event_create(dev, &e1);
  if (s == SL_OK) s = sl_graph_launch(dev, g, b->stream); /* warm the graph */
  for (int i = 0; i < b->iters && s == SL_OK; i++) {
    s = sl_event_record(dev, e0, b->stream);
    if (s == SL_OK) s = sl_graph_launch(dev, g, b->stream);
    if (s == SL_OK) s = sl_event_record(dev, e1, b->stream);
    if (s == SL_OK) s = sl_event_sync(dev, e1);
    float ms = 0;
    if (s == SL_OK) s = sl_event_elapsed_ms(dev, e0, e1, &ms);
    us[i] = ms * 1e3 / b->graph_reps;
  }
  if (s == SL_OK) {
    qsort(us, (size_t)b->iters, sizeof *us, sl_bench_cmp_double);
    *median_us = us[b->iters / 2];
  }
  free(us);
  sl_event_destroy(dev, e0);
  sl_event_destroy(dev, e1);
  sl_graph_destroy(dev, g);
  return s;
}

sl_status_t sl_bench_time(sl_bench_t *b, sl_bench_fn fn, void *ctx, bool in_graph, double *median_us) {
  return in_graph ? time_graph(b, fn, ctx, median_us) : time_plain(b, fn, ctx, median_us);
}

/* ---- ceilings ------------------------------------------------------------------------- */

typedef struct {
  sl_device_t *dev;
  void *src, *dst;
  size_t bytes;
} copy_ctx_t;

static sl_status_t copy_once(void *p, int iter, sl_stream_t *stream) {
  copy_ctx_t *c = p;
  return sl_memcpy(c->dev, c->dst, c->src, c->bytes, stream);
}

/* Rotated copies: `sets` (src, dst) pairs of `half` bytes each, one pair per repetition. */
typedef struct {
  sl_device_t *dev;
  char *src, *dst;
  size_t half;
  int sets;
} copy_rot_t;

static sl_status_t copy_rotated(void *p, int iter, sl_stream_t *stream) {
  copy_rot_t *c = p;
  size_t off = (size_t)(iter % c->sets) * c->half;
  return sl_memcpy(c->dev, c->dst + off, c->src + off, c->half, stream);
}

sl_status_t sl_bench_copy_us(sl_bench_t *b, double bytes, double *us, double *kern_us) {
  sl_device_t *dev = b->rt->dev;
  if (sl_device_backend(dev) != SL_BACKEND_CUDA) return SL_ERR_UNSUPPORTED;
  for (int i = 0; i < b->copy_at_n; i++)
    if (b->copy_at[i].bytes == bytes) {
      *us = b->copy_at[i].us;
      if (kern_us) *kern_us = b->copy_at[i].kern_us;
      return SL_OK;
    }
  copy_rot_t c = {.dev = dev, .half = ((size_t)(bytes / 2) + 15) / 16 * 16};
  /* enough pairs that one round of them (>= 256 MB) is 4x the H200's 60 MB L2 */
  c.sets = (int)(((size_t)256 << 20) / (2 * c.half + 1)) + 1;
  if (c.sets > 16) c.sets = 16;
  SL_CHECK(sl_device_malloc(dev, c.half * (size_t)c.sets, (void **)&c.src));
  sl_status_t s = sl_device_malloc(dev, c.half * (size_t)c.sets, (void **)&c.dst);
  if (s == SL_OK) s = sl_memset(dev, c.src, 1, c.half * (size_t)c.sets, b->stream);
  if (s == SL_OK) s = sl_bench_time(b, copy_rotated, &c, false, us);
  /* the copy's own device time, without disturbing the row's pending kern_us */
  const double row_kern = b->row_kernel_us;
  if (s == SL_OK) s = sl_bench_time_kernel(b, copy_rotated, &c);
  const double k = b->row_kernel_us;
  b->row_kernel_us = row_kern;
  sl_device_free(dev, c.src);
  if (c.dst) sl_device_free(dev, c.dst);
  SL_CHECK(s);
  if (kern_us) *kern_us = k;
  if (b->copy_at_n < (int)(sizeof b->copy_at / sizeof b->copy_at[0])) {
    b->copy_at[b->copy_at_n].bytes = bytes;
    b->copy_at[b->copy_at_n].kern_us = k;
    b->copy_at[b->copy_at_n++].us = *us;
  }
  return SL_OK;
}

typedef struct {
  sl_kernel_t *k;
  int launches;
} empty_ctx_t;

static sl_status_t empty_launches(void *p, int iter, sl_stream_t *stream) {
  empty_ctx_t *c = p;
  int zero = 0;
  void *args[] = {&zero};
  sl_launch_t l = {.grid = {1}, .block = {32}, .stream = stream};
  for (int i = 0; i < c->launches; i++) SL_CHECK(sl_kernel_launch(c->k, &l, args));
  return SL_OK;
}

static sl_status_t measure_ceilings(sl_bench_t *b) {
  sl_device_t *dev = b->rt->dev;
  bool gpu = sl_device_backend(dev) == SL_BACKEND_CUDA;
  /* Copy bandwidth: a buffer far larger than L2 (H200: 60 MB), read + write bytes. */
  copy_ctx_t c = {.dev = dev, .bytes = gpu ? ((size_t)1 << 30) : ((size_t)64 << 20)};
  SL_CHECK(sl_device_malloc(dev, c.bytes, &c.src));
  sl_status_t s = sl_device_malloc(dev, c.bytes, &c.dst);
  if (s == SL_OK) s = sl_memset(dev, c.src, 1, c.bytes, b->stream);
  double us = 0;
  int iters = b->iters;
  b->iters = gpu ? 20 : 5;
  if (s == SL_OK) s = sl_bench_time(b, copy_once, &c, false, &us);
  b->iters = iters;
  sl_device_free(dev, c.src);
  sl_device_free(dev, c.dst);
  SL_CHECK(s);
  b->copy_gbps = 2.0 * (double)c.bytes / (us * 1e-6) / 1e9;
  if (gpu) {
    sl_jit_spec_t spec;
    empty_ctx_t e = {.launches = 5};
    SL_CHECK(sl_probe_empty_spec(&spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &e.k));
    SL_CHECK(sl_bench_time(b, empty_launches, &e, true, &us));
    b->graph_launch_one_stream_us = us / e.launches;
    /* The process-wide launch state (H200, CUDA 13; session 33, bench/probes/graph_trigger.c): once a stream other
     * than the one a kernel runs on -- the legacy default stream, a blocking or another non-blocking one -- has
     * carried 8 kernel-class operations (kernels, device copies, memsets of >= 8 KiB; not smaller memsets, not
     * pageable host copies), every later small kernel costs ~0.17 us more per launch, as a graph node (this
     * empty kernel 0.53 -> 0.71 us) and on a stream alike, for the rest of the process (destroying the stream does
     * not undo it). Engine processes (comm streams, NCCL, setup memsets on the legacy stream) and PyTorch's (the
     * peers' harness) are in that state; the rows' own legacy-stream fills put this bench there part way through
     * (session 32 found rows reading +0.2 us after some others). So every row is timed in it: 64 empty kernels on
     * the legacy stream here, the graph ceiling printed before and after. SL_BENCH_ONE_STREAM=1 skips them (for
     * comparison; the rows' fills may still get there). */
    const char *one = getenv("SL_BENCH_ONE_STREAM");
    empty_ctx_t legacy = {.k = e.k, .launches = 64};
    if (!one || strcmp(one, "1") != 0) SL_CHECK(empty_launches(&legacy, 0, NULL));
    SL_CHECK(sl_device_sync(dev));
    SL_CHECK(sl_bench_time(b, empty_launches, &e, true, &us));
    b->graph_launch_us = us / e.launches;
    e.launches = 100;
    SL_CHECK(sl_bench_time(b, empty_launches, &e, false, &us));
    b->launch_us = us / e.launches;
  }
  return SL_OK;
}

/* One JSON object per line (cJSON escapes names and strings). */
static void write_json(sl_bench_t *b, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  if (text) fprintf(b->json, "%s\n", text);
  free(text);
  cJSON_Delete(o);
}

sl_status_t sl_bench_flush(sl_bench_t *b, int iter) {
  if (!b->flush_buf) return SL_OK;
  return sl_memset(b->rt->dev, b->flush_buf, (iter & 0x7f) + 1, SL_BENCH_FLUSH_BYTES, b->stream);
}

sl_status_t sl_bench_init(sl_runtime_t *rt, int *argc, char **argv, sl_bench_t *b) {
  memset(b, 0, sizeof *b);
  b->rt = rt;
  b->row_kernel_us = -1;
  bool gpu = sl_device_backend(rt->dev) == SL_BACKEND_CUDA;
  b->iters = gpu ? 50 : 5;
  b->warmup = gpu ? 5 : 1;
  b->graph_reps = 20;
  b->quick = !gpu;
  int out = 1;
  bool flush = false;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--flush") == 0) {
      flush = true;
    } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < *argc) {
      b->iters = atoi(argv[++i]);
      if (b->iters < 1) return SL_ERR(SL_ERR_INVALID, "--iters must be >= 1");
    } else if (strcmp(argv[i], "--graph-reps") == 0 && i + 1 < *argc) {
      /* how many repetitions one graph holds: the per-node gap is in every one, a graph launch's own cost is
       * spread over them (20 by default; e.g. 5 / 100 tell the two apart) */
      char *end;
      const long n = strtol(argv[++i], &end, 10);
      if (*end || n < 1 || n > 1000) return SL_ERR(SL_ERR_INVALID, "--graph-reps wants 1..1000, got '%s'", argv[i]);
      b->graph_reps = (int)n;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < *argc) {
      const char *path = argv[++i];
      if (rt->boot.rank == 0) {
        b->json = fopen(path, "w");
        if (!b->json) return SL_ERR(SL_ERR_IO, "cannot write --json file %s", path);
      }
    } else if (strcmp(argv[i], "--quick") == 0) {
      b->quick = true;
    } else if (strcmp(argv[i], "--full") == 0) {
      b->quick = false;
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < *argc) {
      b->filter = argv[++i];
    } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < *argc) {
      SL_CHECK(parse_list("--tokens", argv[++i], b->tokens, &b->tokens_n));
    } else if (strcmp(argv[i], "--hidden") == 0 && i + 1 < *argc) {
      SL_CHECK(parse_list("--hidden", argv[++i], b->hidden, &b->hidden_n));
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  SL_CHECK(sl_stream_create(rt->dev, &b->stream));
  SL_CHECK(measure_ceilings(b));
  if (flush && gpu) SL_CHECK(sl_device_malloc(rt->dev, SL_BENCH_FLUSH_BYTES, &b->flush_buf));
  if (rt->boot.rank == 0) {
    const sl_device_info_t *d = sl_device_info(rt->dev);
    printf("# device %s (%s), copy bandwidth %.0f GB/s (read+write)", d->name,
           gpu ? "cuda" : "cpu", b->copy_gbps);
    if (gpu)
      printf(", launch %.2f us, in graph %.2f us per kernel (%.2f before a second stream's work: every row is timed "
             "after it, launch/bench_util.c)",
             b->launch_us, b->graph_launch_us, b->graph_launch_one_stream_us);
    printf("\n");
    if (flush)
      printf("# --flush: %s\n", gpu ? "a 256 MB fill before every timed repetition (us and kern_us; not graph_us, "
                                      "not the ceilings), as triton.testing.do_bench"
                                    : "ignored on the CPU backend");
    if (b->json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddBoolToObject(o, "ceiling", 1);
      cJSON_AddStringToObject(o, "device", d->name);
      cJSON_AddNumberToObject(o, "copy_gbps", b->copy_gbps);
      cJSON_AddNumberToObject(o, "launch_us", b->launch_us);
      cJSON_AddNumberToObject(o, "graph_launch_us", b->graph_launch_us);
      cJSON_AddNumberToObject(o, "graph_launch_one_stream_us", b->graph_launch_one_stream_us);
      cJSON_AddBoolToObject(o, "flush", b->flush_buf != NULL);
      write_json(b, o);
    }
  }
  return SL_OK;
}

void sl_bench_finish(sl_bench_t *b) {
  if (b->json) fclose(b->json);
  b->json = NULL;
  if (b->flush_buf) sl_device_free(b->rt->dev, b->flush_buf);
  b->flush_buf = NULL;
  sl_stream_destroy(b->rt->dev, b->stream);
  b->stream = NULL;
}

void sl_bench_header(sl_bench_t *b, const char *title) {
  if (b->rt->boot.rank != 0) return;
  printf("\n## %s\n%-22s %-24s %-10s %10s %10s %9s %8s %10s %8s  %s\n", title, "op", "shape", "path", "us", "GB/s",
         "%copy", "%cp@sz", "graph_us", "kern_us", "");
}

void sl_bench_row(sl_bench_t *b, const char *op, const char *shape, const char *path, double us, double bytes,
                  double graph_us, const char *extra) {
  if (b->rt->boot.rank != 0) return;
  double gbps = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0;
  double pct = b->copy_gbps > 0 ? 100.0 * gbps / b->copy_gbps : 0;
  char g[32] = "-", at[32] = "-", kt[32] = "-";
  if (graph_us >= 0) snprintf(g, sizeof g, "%.2f", graph_us);
  const double kernel_us = b->row_kernel_us;
  b->row_kernel_us = -1;
  if (kernel_us >= 0) snprintf(kt, sizeof kt, "%.2f", kernel_us);
  double copy_us = 0, copy_kern_us = -1, pct_at = -1;
  if (bytes >= 16e6 && us > 0 && b->rt->boot.size == 1 &&
      sl_bench_copy_us(b, bytes, &copy_us, &copy_kern_us) == SL_OK) {
    pct_at = 100.0 * copy_us / us;
    snprintf(at, sizeof at, "%.1f%%", pct_at);
  }
  printf("%-22s %-24s %-10s %10.2f %10.1f %8.1f%% %8s %10s %8s  %s\n", op, shape, path ? path : "-", us, gbps, pct, at,
         g, kt, extra ? extra : "");
  fflush(stdout);
  if (b->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", op);
    cJSON_AddStringToObject(o, "shape", shape);
    cJSON_AddStringToObject(o, "path", path ? path : "");
    cJSON_AddNumberToObject(o, "us", us);
    cJSON_AddNumberToObject(o, "bytes", bytes);
    cJSON_AddNumberToObject(o, "gbps", gbps);
    cJSON_AddNumberToObject(o, "pct_copy", pct);
    if (graph_us >= 0) cJSON_AddNumberToObject(o, "graph_us", graph_us);
    if (kernel_us >= 0) cJSON_AddNumberToObject(o, "kernel_us", kernel_us);
    if (pct_at >= 0) {
      cJSON_AddNumberToObject(o, "copy_same_us", copy_us);
      cJSON_AddNumberToObject(o, "pct_copy_same_size", pct_at);
    }
    if (pct_at >= 0 && copy_kern_us > 0 && kernel_us > 0) {
      cJSON_AddNumberToObject(o, "copy_same_kern_us", copy_kern_us);
      cJSON_AddNumberToObject(o, "pct_copy_same_size_kern", 100.0 * copy_kern_us / kernel_us);
    }
    if (extra) cJSON_AddStringToObject(o, "extra", extra);
    write_json(b, o);
  }
}
