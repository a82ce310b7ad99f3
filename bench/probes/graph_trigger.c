/* Probe (built with the project: build-gpu/sl_probe_graph_trigger; run by hand on a GPU): what turns on the +0.2 us per
 * CUDA-graph node that session 32 found (calls 3-10: once the FP8-out SiLU-and-mul's bench row has run at T >= 128,
 * every later small kernel's graph node costs ~0.2 us more for the rest of the process, its kernel time unchanged;
 * the kernels alone in a fresh process, bench/probes/graph_gap.cu, do not do it).
 *
 * Found (session 33, bench/results/2026-12-01-s33-h200-call{1..6}/): not the kernels but the row's fills. Once a stream
 * other than the one a kernel runs on (the legacy default stream, a blocking or another non-blocking stream) has
 * carried 8 kernel-class operations -- kernel launches, device-to-device copies, memsets of >= 8 KiB; not smaller
 * memsets, not pageable host copies, not work on the kernel's own stream -- every later short kernel costs ~0.17 us
 * more per launch, as a graph node and as a stream launch, for the rest of the process: destroying that stream does
 * not undo it, CUDA_DEVICE_MAX_CONNECTIONS does not move the count. Long kernels and programmatic dependent launches
 * hide it (call 8). `sluice bench` now enters that state before its rows (launch/bench_util.c measure_ceilings).
 *
 * The victim is what the bench times: GELU-tanh-and-mul bf16 -> bf16 at T=1, I=2048 (sl_act), 20 launches per graph
 * over 8 rotated input sets, the median of 30 replays, best of 3 (launch/bench_util.c's time_graph). It is timed
 * fresh, after each action of the command line (in order, everything kept allocated), and on new buffers at the end;
 * also as 200 stream launches queued behind ~1 ms of work (the device's time per launch outside a graph):
 *   row:silu8:T[:nofill]  the SiLU-and-mul bench row's sets (-> FP8 groups; silu16: -> bf16), I=2048, allocated and
 *                         filled as launch/bench_quant.c does (nofill: allocated only), then 100 launches with events
 *   malloc:N              cudaMalloc of N bytes
 *   memset:N / memset0:N  and cudaMemsetAsync of it to 0x35 / 0 on the legacy stream (the bench's fill)
 *   memsetS:N             ... to 0x35 on the victim's own (non-blocking) stream
 *   memsetB:N / memsetN:N ... to 0x35 on a blocking stream / on another non-blocking stream
 *   h2d:N                 ... and a pageable host -> device copy into it (the bench's bf16 fill)
 *   d2d:N                 ... and a device -> device copy of it on the legacy stream
 *   actL:N                N launches of the victim's kernel on the legacy stream
 *   ACTION~               (the nine above) without the device sync and the report after it
 *   sync                  a device sync
 *   destroyN              memsetN's stream destroyed
 * Usage: sl_probe_graph_trigger ACTION... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/act.h"
#include "runtime/sl_device.h"

#define CHECK(x)                                                                                                       \
  do {                                                                                                                 \
    sl_status_t s_ = (x);                                                                                              \
    if (s_ != SL_OK) {                                                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, sl_last_error());                                     \
      exit(1);                                                                                                         \
    }                                                                                                                  \
  } while (0)

enum { SETS = 8, REPS = 20, REPLAYS = 30 };

typedef struct {
  sl_act_args_t a[SETS];
  int sets;
  void *buf[SETS][3];
} row_t;

static sl_device_t *dev;
static sl_stream_t *st;

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* The bench's fill: bf16 inputs copied from a pageable host block, other buffers memset on the legacy stream. */
static void fill(void *dst, size_t bytes, bool bf16) {
  enum { BLOCK = 1 << 20 };
  static uint16_t block[BLOCK / 2];
  for (int i = 0; i < BLOCK / 2; i++)
    block[i] = (uint16_t)(0x3c00u + (i * 37u & 0x3ffu));
  for (size_t off = 0; off < bytes; off += BLOCK) {
    size_t n = bytes - off < BLOCK ? bytes - off : BLOCK;
    if (bf16)
      CHECK(sl_memcpy(dev, (char *)dst + off, block, n, NULL));
    else
      CHECK(sl_memset(dev, (char *)dst + off, 0x35, n, NULL));
  }
}

static void row_alloc(row_t *r, sl_act_kind_t kind, sl_dtype_t out_t, int T, int I, bool fill_too) {
  const bool fp8 = out_t == SL_DTYPE_FP8_E4M3;
  const size_t in_b = (size_t)T * 2 * I * 2, out_b = (size_t)T * I * (fp8 ? 1 : 2), sc_b = fp8 ? (size_t)T * I / 32 : 0;
  const size_t set = in_b + out_b + sc_b;
  r->sets = (int)((((size_t)256 << 20) + set - 1) / set);
  if (r->sets > SETS) r->sets = SETS;
  for (int s = 0; s < r->sets; s++) {
    memset(r->buf[s], 0, sizeof r->buf[s]);
    CHECK(sl_device_malloc(dev, in_b, &r->buf[s][0]));
    CHECK(sl_device_malloc(dev, out_b, &r->buf[s][1]));
    if (sc_b) CHECK(sl_device_malloc(dev, sc_b, &r->buf[s][2]));
    if (fill_too) fill(r->buf[s][0], in_b, true);
    if (fill_too && sc_b) fill(r->buf[s][2], sc_b, false);
    r->a[s] = (sl_act_args_t){.kind = kind,
                              .num_tokens = T,
                              .inter = I,
                              .in_dtype = SL_DTYPE_BF16,
                              .out_dtype = out_t,
                              .in = r->buf[s][0],
                              .out = r->buf[s][1],
                              .out_scales = r->buf[s][2]};
  }
  CHECK(sl_device_sync(dev));
}

static void row_free(row_t *r) {
  for (int s = 0; s < r->sets; s++)
    for (int k = 0; k < 3; k++)
      sl_device_free(dev, r->buf[s][k]);
  r->sets = 0;
}

/* time_graph: REPS launches per graph, median of REPLAYS replays, us per launch */
static double graph_node_us(row_t *r) {
  for (int i = 0; i < 3; i++)
    CHECK(sl_act(dev, &r->a[i % r->sets], st));
  CHECK(sl_stream_sync(dev, st));
  CHECK(sl_graph_begin_capture(dev, st));
  for (int i = 0; i < REPS; i++)
    CHECK(sl_act(dev, &r->a[i % r->sets], st));
  sl_graph_t *g = NULL;
  CHECK(sl_graph_end_capture(dev, st, &g));
  sl_event_t *e0, *e1;
  CHECK(sl_event_create(dev, &e0));
  CHECK(sl_event_create(dev, &e1));
  CHECK(sl_graph_launch(dev, g, st));
  double us[REPLAYS];
  for (int i = 0; i < REPLAYS; i++) {
    float ms;
    CHECK(sl_event_record(dev, e0, st));
    CHECK(sl_graph_launch(dev, g, st));
    CHECK(sl_event_record(dev, e1, st));
    CHECK(sl_event_sync(dev, e1));
    CHECK(sl_event_elapsed_ms(dev, e0, e1, &ms));
    us[i] = ms * 1e3 / REPS;
  }
  qsort(us, REPLAYS, sizeof us[0], cmp);
  sl_event_destroy(dev, e0);
  sl_event_destroy(dev, e1);
  sl_graph_destroy(dev, g);
  CHECK(sl_device_check(dev, "graph"));
  return us[REPLAYS / 2];
}

static row_t victim, blocker;
static cudaStream_t other_b, other_n; /* memsetB's and memsetN's streams */

/* Stream launches: the victim 200 times behind ~1 ms of queued work (10 SiLU T=32768 launches), so the host is
 * ahead and the events see the device's time per launch. */
static double stream_launch_us(void) {
  enum { N = 200 };
  sl_event_t *e0, *e1;
  CHECK(sl_event_create(dev, &e0));
  CHECK(sl_event_create(dev, &e1));
  double us[5];
  for (int r = 0; r < 5; r++) {
    for (int i = 0; i < 10; i++)
      CHECK(sl_act(dev, &blocker.a[0], st));
    CHECK(sl_event_record(dev, e0, st));
    for (int i = 0; i < N; i++)
      CHECK(sl_act(dev, &victim.a[i % victim.sets], st));
    CHECK(sl_event_record(dev, e1, st));
    CHECK(sl_event_sync(dev, e1));
    float ms;
    CHECK(sl_event_elapsed_ms(dev, e0, e1, &ms));
    us[r] = ms * 1e3 / N;
  }
  qsort(us, 5, sizeof us[0], cmp);
  sl_event_destroy(dev, e0);
  sl_event_destroy(dev, e1);
  return us[2];
}

static void report(const char *step) {
  double best = 1e30;
  for (int k = 0; k < 3; k++) {
    double u = graph_node_us(&victim);
    if (u < best) best = u;
  }
  printf("  %-34s victim gelu bf16 T=1 I=2048 graph node %.3f us, stream launch %.3f us\n", step, best,
         stream_launch_us());
  fflush(stdout);
}

/* One action of the command line (see the usage line at the top), then the victim's report. */
static void act_on(const char *what) {
  char op[16] = "";
  long n = 0;
  int T = 0;
  if (sscanf(what, "row:%15[a-z0-9]:%d", op, &T) == 2) {
    const bool fill_too = strstr(what, ":nofill") == NULL;
    static row_t trig;
    if (trig.sets) row_free(&trig);
    const sl_dtype_t out_t = strcmp(op, "silu8") == 0 ? SL_DTYPE_FP8_E4M3 : SL_DTYPE_BF16;
    row_alloc(&trig, SL_ACT_SILU_MUL, out_t, T, 2048, fill_too);
    report(what);
    sl_event_t *ev[200];
    for (int i = 0; i < 200; i++)
      CHECK(sl_event_create(dev, &ev[i]));
    for (int i = 0; i < 100; i++) {
      CHECK(sl_event_record(dev, ev[2 * i], st));
      CHECK(sl_act(dev, &trig.a[i % trig.sets], st));
      CHECK(sl_event_record(dev, ev[2 * i + 1], st));
    }
    CHECK(sl_stream_sync(dev, st));
    for (int i = 0; i < 200; i++)
      sl_event_destroy(dev, ev[i]);
    report("  + 100 launches");
    return;
  }
  if (strcmp(what, "destroyN") == 0) { /* destroy memsetN's stream */
    CHECK(sl_device_sync(dev));
    if (other_n && cudaStreamDestroy(other_n) != cudaSuccess) exit(1);
    other_n = NULL;
    report(what);
    return;
  }
  if (strcmp(what, "sync") == 0) {
    CHECK(sl_device_sync(dev));
    report(what);
    return;
  }
  if (sscanf(what, "%15[a-zA-Z0-9]:%ld", op, &n) != 2 || n <= 0) {
    fprintf(stderr, "bad action '%s'\n", what);
    exit(2);
  }
  void *p = NULL;
  CHECK(sl_device_malloc(dev, (size_t)n, &p)); /* kept: the bench's buffers live until their row ends */
  if (strcmp(op, "memset") == 0)
    CHECK(sl_memset(dev, p, 0x35, (size_t)n, NULL)); /* the legacy stream, as the bench's fill */
  else if (strcmp(op, "memset0") == 0)
    CHECK(sl_memset(dev, p, 0, (size_t)n, NULL));
  else if (strcmp(op, "memsetS") == 0)
    CHECK(sl_memset(dev, p, 0x35, (size_t)n, st));                     /* the victim's own stream */
  else if (strcmp(op, "memsetB") == 0 || strcmp(op, "memsetN") == 0) { /* a blocking / another non-blocking stream */
    cudaStream_t *x = op[6] == 'B' ? &other_b : &other_n;
    if (!*x && cudaStreamCreateWithFlags(x, op[6] == 'B' ? cudaStreamDefault : cudaStreamNonBlocking) != cudaSuccess)
      exit(1);
    if (cudaMemsetAsync(p, 0x35, (size_t)n, *x) != cudaSuccess) exit(1);
  } else if (strcmp(op, "d2d") == 0) {
    void *q = NULL;
    CHECK(sl_device_malloc(dev, (size_t)n, &q));
    CHECK(sl_memcpy(dev, q, p, (size_t)n, NULL));
  } else if (strcmp(op, "actL") == 0) { /* n launches of the victim's kernel on the legacy stream */
    for (long i = 0; i < n; i++)
      CHECK(sl_act(dev, &victim.a[i % victim.sets], NULL));
  } else if (strcmp(op, "h2d") == 0)
    fill(p, (size_t)n, true);
  else if (strcmp(op, "malloc") != 0) {
    fprintf(stderr, "bad action '%s'\n", what);
    exit(2);
  }
  if (what[strlen(what) - 1] == '~') return; /* no sync, no report: the next action follows at once */
  CHECK(sl_device_sync(dev));
  report(what);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s ACTION...   ACTION: row:silu8|silu16:T[:nofill] | malloc:N | memset:N | memset0:N | memsetS:N"
            " | memsetB:N | memsetN:N | h2d:N | d2d:N | actL:N (each of these with a trailing ~: no sync) | sync"
            " | destroyN\n",
            argv[0]);
    return 2;
  }
  CHECK(sl_device_open(SL_DEVICE_CUDA, 0, &dev));
  CHECK(sl_stream_create(dev, &st));
  row_alloc(&blocker, SL_ACT_SILU_MUL, SL_DTYPE_BF16, 32768, 2048, false);
  row_alloc(&victim, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, 1, 2048, true);
  report("fresh");
  for (int i = 1; i < argc; i++)
    act_on(argv[i]);
  row_free(&victim);
  row_alloc(&victim, SL_ACT_GELU_TANH_MUL, SL_DTYPE_BF16, 1, 2048, true);
  report("victim on new buffers");
  sl_stream_destroy(dev, st);
  sl_device_close(dev);
  return 0;
}
