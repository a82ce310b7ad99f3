/* Benchmark helpers shared by every `sluice bench ...`: device timing (CUDA events, median
 * over repetitions, optionally inside a CUDA graph), the ceilings measured in the same run
 * (device copy bandwidth, launch latency), and one table row + one JSON line per result. */
#ifndef SL_BENCH_H
#define SL_BENCH_H

#include <stdbool.h>
#include <stdio.h>

#include "runtime/sluice.h"

typedef struct {
  sl_runtime_t *rt;
  sl_stream_t *stream;
  int iters;            /* timed repetitions (--iters N; default 50) */
  int warmup;           /* untimed repetitions first (5) */
  int graph_reps;       /* repetitions per CUDA graph of the graph timing (--graph-reps N; default 20) */
  bool quick;           /* --quick: fewer shapes/iterations (CPU backend default) */
  double copy_gbps;     /* device copy bandwidth, read+write bytes / s, in GB/s */
  double launch_us;     /* back-to-back empty launch on a stream (0 on CPU) */
  double graph_launch_us; /* per kernel inside a CUDA graph (0 on CPU), in the multi-stream launch state every row
                             is timed in (launch/bench_util.c measure_ceilings) */
  double graph_launch_one_stream_us; /* the same before any second stream's work (the fresh process's state) */
  FILE *json;           /* --json FILE: one JSON object per line; NULL when not asked */
  const char *filter;   /* --only SUBSTR: run only rows whose op contains it */
  int tokens[16];       /* --tokens N[,N...]: run only these token counts (none: all) */
  int tokens_n;
  int hidden[16];       /* --hidden N[,N...]: run only these hidden sizes (none: all) */
  int hidden_n;
  struct {              /* same-size copy ceilings measured so far (bytes -> us; kern_us: its device
                           time by CUPTI, < 0 where not measured) */
    double bytes, us, kern_us;
  } copy_at[64];
  int copy_at_n;
  double row_kernel_us; /* the next row's kernel device time (sl_bench_kernel_us), < 0: none;
                           sl_bench_row prints it and resets it */
  void *flush_buf;      /* --flush (GPU): SL_BENCH_FLUSH_BYTES written before every timed
                           repetition of the plain and kernel timings, NULL otherwise */
} sl_bench_t;

/* --flush: the L2 flush of triton.testing.do_bench (a 256 MB fill before each repetition,
 * outside the timed span), so rows compare with peers timed that way (bench/torch_peers.py). */
#define SL_BENCH_FLUSH_BYTES ((size_t)256 << 20)

/* Under --flush, enqueue the fill that precedes repetition `iter` (no-op otherwise). */
sl_status_t sl_bench_flush(sl_bench_t *b, int iter);

/* Parse the common options (--iters, --graph-reps, --json, --quick, --only, --tokens, --hidden, --flush),
 * create a stream and measure the ceilings (never flushed). Unknown options are left for the
 * caller: *argc/argv are compacted. */
sl_status_t sl_bench_init(sl_runtime_t *rt, int *argc, char **argv, sl_bench_t *b);
void sl_bench_finish(sl_bench_t *b);

/* One repetition of the work, enqueued on `stream`; `iter` lets the caller rotate inputs
 * so L2 does not serve them. Must not synchronise (it may be captured in a graph). */
typedef sl_status_t (*sl_bench_fn)(void *ctx, int iter, sl_stream_t *stream);

/* Median device time of one repetition in microseconds. With in_graph, b->graph_reps
 * repetitions are captured into one CUDA graph and the graph's time is divided by it
 * (SL_ERR_UNSUPPORTED on the CPU backend). */
sl_status_t sl_bench_time(sl_bench_t *b, sl_bench_fn fn, void *ctx, bool in_graph, double *median_us);

/* Median device time of one repetition by CUPTI (launch/bench_cupti.c): repetitions run back to
 * back as in the plain timing, and each one's time is the span from the start of its first
 * kernel (memset, memcpy) to the end of its last, on the GPU clock -- no launch gap, no events
 * (the kernel time DeepEP's benchmarks report through the PyTorch profiler). SL_ERR_UNSUPPORTED
 * on the CPU backend or where libcupti cannot be opened. */
sl_status_t sl_bench_kernel_us(sl_bench_t *b, sl_bench_fn fn, void *ctx, double *median_us);
/* sl_bench_kernel_us into b->row_kernel_us for the next row (-1, and SL_OK, where CUPTI is not
 * available). */
sl_status_t sl_bench_time_kernel(sl_bench_t *b, sl_bench_fn fn, void *ctx);

/* qsort comparator of doubles, ascending (the medians). */
int sl_bench_cmp_double(const void *a, const void *b);

/* Should a row named `op` run under --only? */
bool sl_bench_selected(const sl_bench_t *b, const char *op);

/* Should a shape with `tokens` tokens run under --tokens? With hidden size `hidden` under --hidden? */
bool sl_bench_tokens_selected(const sl_bench_t *b, int tokens);
bool sl_bench_hidden_selected(const sl_bench_t *b, int hidden);

/* Device time of a device-to-device copy that reads bytes/2 and writes bytes/2, timed the way
 * the rows are (same repetitions, buffers rotated so L2 does not serve them): the ceiling for
 * a kernel moving `bytes` at that size, fixed costs included. kern_us (may be NULL): the same
 * copy's device time by CUPTI (the rows' kern_us clock: no launch gaps), -1 without CUPTI.
 * Memoized per size; GPU only (SL_ERR_UNSUPPORTED on the CPU backend). */
sl_status_t sl_bench_copy_us(sl_bench_t *b, double bytes, double *us, double *kern_us);

/* Print one row (and a JSON line): op, shape, path taken, µs, GB/s for `bytes` moved,
 * % of copy bandwidth; graph_us < 0 when not measured; kern_us: b->row_kernel_us (then reset). `extra` may be NULL. From 16 MB moved on
 * the GPU, in single-rank runs, the row also shows "%cp@sz": a same-size copy's time (sl_bench_copy_us) / us,
 * and where both kernel times exist the JSON carries the same ratio by kernel time (pct_copy_same_size_kern). */
void sl_bench_row(sl_bench_t *b, const char *op, const char *shape, const char *path, double us, double bytes,
                  double graph_us, const char *extra);
/* Print the header of the row table. */
void sl_bench_header(sl_bench_t *b, const char *title);

#endif
