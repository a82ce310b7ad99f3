/* `sluice bench allreduce`: nccl-tests-style sweep of the node all-reduce, 8 B .. 256 MiB:
 * time (slowest rank's median), algbw = bytes / time, busbw = algbw x 2(n-1)/n, the
 * algorithm AUTO chose, the same call inside a CUDA graph, and NCCL side by side in the same
 * run when the ranks are on distinct GPUs. Then the fused decode step (all-reduce +
 * residual + RMSNorm) against the plain all-reduce of the same bytes.
 *   sluice bench allreduce [--dtype bf16|f16|f32] [--max-bytes N] [--algo auto|oneshot|oneshot-ll|twoshot]
 *                          [--iters N] [--quick|--full] [--json FILE] [--only SUBSTR]
 * The CPU backend runs quick (8 B .. 1 MiB) so CI can smoke-test it. Ranks sharing one GPU
 * (a correctness set-up: contexts time-slice, ~2.3 ms per flag round) also default to the
 * quick sweep with 10 iterations, unless --full / --iters say otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "comm/symm.h"
#include "launch/sl_bench.h"
#include "sl_cmd.h"

typedef struct {
  sl_comm_t *comm;
  void *in, *out;
  size_t count;
  sl_dtype_t dtype;
  int algo;
  sl_ar_rmsnorm_args_t fused;
} ar_ctx_t;

static sl_status_t allreduce_once(void *p, int iter, sl_stream_t *stream) {
  ar_ctx_t *c = p;
  sl_comm_set_algo(c->comm, c->algo);
  return sl_allreduce(c->comm, c->in, c->out, c->count, c->dtype, stream);
}

static sl_status_t fused_once(void *p, int iter, sl_stream_t *stream) {
  ar_ctx_t *c = p;
  return sl_allreduce_residual_rmsnorm(c->comm, &c->fused, stream);
}

/* The collective's time is the slowest rank's. */
static double slowest(sl_runtime_t *rt, double us) {
  double m = us;
  MPI_Allreduce(&us, &m, 1, MPI_DOUBLE, MPI_MAX, rt->boot.node_comm);
  return m;
}

static sl_status_t time_both(sl_bench_t *b, sl_bench_fn fn, ar_ctx_t *c, bool gpu, double *us, double *graph_us) {
  SL_CHECK(sl_bench_time(b, fn, c, false, us));
  *us = slowest(b->rt, *us);
  *graph_us = -1;
  if (gpu) {
    SL_CHECK(sl_bench_time(b, fn, c, true, graph_us));
    *graph_us = slowest(b->rt, *graph_us);
  }
  return SL_OK;
}

static void format_bytes(char *buf, size_t len, size_t bytes) {
  if (bytes >= (1u << 20))
    snprintf(buf, len, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024)
    snprintf(buf, len, "%zu KiB", bytes >> 10);
  else
    snprintf(buf, len, "%zu B", bytes);
}

/* Do the ranks of this node share a GPU? */
static bool node_shares_gpu(sl_runtime_t *rt) {
  char mine[32], all[8][32];
  int n = rt->boot.local_size;
  if (n < 2 || n > 8 || sl_device_backend(rt->dev) != SL_BACKEND_CUDA) return false;
  snprintf(mine, sizeof mine, "%s", sl_device_info(rt->dev)->pci_bus_id);
  MPI_Allgather(mine, 32, MPI_CHAR, all, 32, MPI_CHAR, rt->boot.node_comm);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(all[i], all[j]) == 0) return true;
  return false;
}

typedef struct {
  sl_device_t *dev;
  void *dst, *src;
  size_t bytes;
  bool active;
} p2p_ctx_t;

static sl_status_t p2p_once(void *p, int iter, sl_stream_t *stream) {
  p2p_ctx_t *c = p;
  return c->active ? sl_memcpy(c->dev, c->dst, c->src, c->bytes, stream) : SL_OK;
}

/* Peer-to-peer ceiling (ranks on distinct GPUs): a copy-engine copy of 256 MiB from this GPU's
 * memory into the next rank's (CUDA IPC mapping), first rank 0 -> 1 alone, then every rank to
 * its right-hand neighbour at once (each link direction busy). Printed as bytes crossing the
 * link per second (one direction); the copy reads as many bytes locally as it writes remotely. */
static sl_status_t p2p_ceiling(sl_bench_t *b, sl_runtime_t *rt) {
  const size_t bytes = (size_t)256 << 20;
  sl_symm_t *symm = NULL;
  void *src = NULL;
  SL_CHECK(sl_symm_create(rt->dev, rt->boot.node_comm, bytes, "p2p-bench", &symm));
  sl_status_t s = sl_device_malloc(rt->dev, bytes, &src);
  if (s == SL_OK) s = sl_memset(rt->dev, src, 1, bytes, b->stream);
  if (s == SL_OK) s = sl_stream_sync(rt->dev, b->stream);
  const int me = sl_symm_rank(symm), n = sl_symm_size(symm);
  p2p_ctx_t c = {.dev = rt->dev, .src = src, .bytes = bytes, .dst = sl_symm_peer(symm, (me + 1) % n)};
  double one = 0, all = 0;
  int iters = b->iters;
  b->iters = 10;
  for (int pass = 0; pass < 2 && s == SL_OK; pass++) {
    c.active = pass == 1 || me == 0;
    MPI_Barrier(rt->boot.node_comm);
    double us = 0;
    s = sl_bench_time(b, p2p_once, &c, false, &us);
    if (s == SL_OK && c.active) (pass ? &all : &one)[0] = (double)bytes / (us * 1e-6) / 1e9;
  }
  b->iters = iters;
  double slow_all = all;
  MPI_Allreduce(&all, &slow_all, 1, MPI_DOUBLE, MPI_MIN, rt->boot.node_comm);
  if (s == SL_OK && rt->boot.rank == 0)
    printf("# p2p (copy engine, 256 MiB into the next rank's GPU): rank 0 -> 1 alone %.1f GB/s; all %d ranks at "
           "once %.1f GB/s per GPU (slowest); local copy %.0f GB/s read+write\n",
           one, n, slow_all, b->copy_gbps);
  MPI_Barrier(rt->boot.node_comm);
  sl_device_free(rt->dev, src);
  sl_symm_destroy(symm);
  return s;
}

int sl_cmd_bench_allreduce(sl_runtime_t *rt, int argc, char **argv) {
  bool iters_given = false, full_given = false;
  for (int i = 1; i < argc; i++) {
    iters_given |= strcmp(argv[i], "--iters") == 0;
    full_given |= strcmp(argv[i], "--full") == 0;
  }
  const bool shared_gpu = node_shares_gpu(rt);
  sl_bench_t b;
  if (sl_bench_init(rt, &argc, argv, &b) != SL_OK) {
    fprintf(stderr, "bench allreduce: %s\n", sl_last_error());
    return 1;
  }
  if (shared_gpu) {
    if (!full_given) b.quick = true;
    if (!iters_given) b.iters = 10;
  }
  const bool gpu = sl_device_backend(rt->dev) == SL_BACKEND_CUDA;
  sl_dtype_t dtype = SL_DTYPE_BF16;
  int force = SL_AR_AUTO;
  size_t max_bytes = gpu && !b.quick ? ((size_t)256 << 20) : gpu ? ((size_t)16 << 20) : ((size_t)1 << 20);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
      const char *d = argv[++i];
      dtype = strcmp(d, "f32") == 0 ? SL_DTYPE_F32 : strcmp(d, "f16") == 0 ? SL_DTYPE_F16 : SL_DTYPE_BF16;
      if (strcmp(d, "f32") && strcmp(d, "f16") && strcmp(d, "bf16")) {
        fprintf(stderr, "bench allreduce: --dtype %s: use bf16, f16 or f32\n", d);
        return 2;
      }
    } else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
      max_bytes = strtoull(argv[++i], NULL, 0);
      if (max_bytes < 8) max_bytes = 8;
    } else if (strcmp(argv[i], "--algo") == 0 && i + 1 < argc) {
      const char *a = argv[++i];
      force = strcmp(a, "oneshot") == 0      ? SL_AR_ONESHOT
              : strcmp(a, "oneshot-ll") == 0 ? SL_AR_ONESHOT_LL
              : strcmp(a, "twoshot") == 0    ? SL_AR_TWOSHOT
                                             : SL_AR_AUTO;
    } else {
      fprintf(stderr, "bench allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  int rc = 1;
  const size_t esz = sl_dtype_bytes(dtype, 1);
  /* Symmetric buffers for up to 64 MiB per call; larger messages go in pieces (or NCCL). */
  size_t comm_max = max_bytes < ((size_t)64 << 20) ? max_bytes : ((size_t)64 << 20);
  ar_ctx_t c = {.dtype = dtype};
  if (sl_comm_create(&rt->boot, rt->dev, &rt->config, comm_max, &c.comm) != SL_OK) goto out;
  if (sl_device_malloc(rt->dev, max_bytes, &c.in) != SL_OK || sl_device_malloc(rt->dev, max_bytes, &c.out) != SL_OK)
    goto out;
  if (sl_memset(rt->dev, c.in, 0, max_bytes, b.stream) != SL_OK) goto out;
  const int n = sl_comm_size(c.comm);
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  const bool nccl = sl_comm_has_nccl(c.comm);
  if (rt->boot.rank == 0) {
    printf("# all-reduce over %d rank(s) per node, %s, iters %d%s\n", n, sl_dtype_name(dtype), b.iters,
           b.quick ? " (quick)" : "");
    if (!gpu)
      printf("# CPU backend: shared memory between processes; GPU rows (graph, NCCL) not applicable\n");
    else if (!nccl && n > 1)
      printf("# NCCL skipped: ranks share a GPU (NCCL refuses duplicate GPUs)\n");
    if (shared_gpu)
      printf("# ranks share one GPU: contexts time-slice, so these times check the path, not its speed\n");
    printf("# busbw = algbw x 2(n-1)/n; ceiling for busbw on one GPU = copy bandwidth\n");
  }
  if (gpu && n > 1 && !shared_gpu && p2p_ceiling(&b, rt) != SL_OK) goto out;
  sl_bench_header(&b, "all-reduce");
  size_t step = b.quick ? 4 : 2;
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= step) {
    if (!sl_bench_selected(&b, "allreduce")) break;
    c.count = bytes / esz;
    c.algo = force;
    double us, graph_us;
    if (time_both(&b, allreduce_once, &c, gpu, &us, &graph_us) != SL_OK) goto out;
    double algbw = (double)bytes / (us * 1e-6) / 1e9;
    char shape[48], size[24], extra[256];
    format_bytes(size, sizeof size, bytes);
    snprintf(shape, sizeof shape, "%s %s", size, sl_dtype_name(dtype));
    int chosen = force != SL_AR_AUTO ? force : sl_comm_choose_algo(c.comm, bytes);
    int len = snprintf(extra, sizeof extra, "algbw %.2f busbw %.2f GB/s", algbw, algbw * bus_factor);
    /* The full sweep also times the other symmetric-memory algorithms up to 16 MiB (the LL
     * one-shot up to its SL_AR_LL_MAX_BYTES capacity), to place the crossovers (SL_AR_LL_MAX_BYTES,
     * SL_AR_ONESHOT_MAX_BYTES) from measurements. */
    if (!b.quick && force == SL_AR_AUTO && n > 1 && bytes <= ((size_t)16 << 20) &&
        (chosen == SL_AR_ONESHOT || chosen == SL_AR_TWOSHOT || chosen == SL_AR_ONESHOT_LL)) {
      static const int alts[] = {SL_AR_ONESHOT_LL, SL_AR_ONESHOT, SL_AR_TWOSHOT};
      for (int k = 0; k < 3; k++) {
        if (alts[k] == chosen) continue;
        if (alts[k] == SL_AR_ONESHOT_LL && (!gpu || bytes > SL_AR_LL_MAX_BYTES || bytes > comm_max)) continue;
        ar_ctx_t ca = c;
        ca.algo = alts[k];
        double aus, agraph;
        if (time_both(&b, allreduce_once, &ca, false, &aus, &agraph) != SL_OK) goto out;
        len += snprintf(extra + len, sizeof extra - (size_t)len, " | %s %.2f us", sl_allreduce_algo_name(ca.algo), aus);
      }
    }
    if (nccl) {
      ar_ctx_t cn = c;
      cn.algo = SL_AR_NCCL;
      double nus, ngraph;
      if (time_both(&b, allreduce_once, &cn, gpu, &nus, &ngraph) != SL_OK) goto out;
      double nbw = (double)bytes / (nus * 1e-6) / 1e9;
      snprintf(extra + len, sizeof extra - (size_t)len, " | nccl %.2f us busbw %.2f GB/s, ours/nccl time %.2fx", nus,
               nbw * bus_factor, us / nus);
    }
    sl_bench_row(&b, "allreduce", shape, sl_allreduce_algo_name(chosen), us, (double)bytes, graph_us, extra);
  }
  sl_comm_set_algo(c.comm, SL_AR_AUTO);

  /* Fused decode step vs the plain all-reduce of the same bytes (hidden 4096). */
  if (sl_bench_selected(&b, "allreduce+rmsnorm")) {
    const int hidden = 4096, row_counts[] = {1, 8, 32};
    void *res = NULL, *w = NULL;
    size_t most = sl_dtype_bytes(dtype, (size_t)32 * hidden);
    if (most <= comm_max && most <= max_bytes && sl_device_malloc(rt->dev, most, &res) == SL_OK &&
        sl_device_malloc(rt->dev, sl_dtype_bytes(dtype, hidden), &w) == SL_OK &&
        sl_memset(rt->dev, res, 0, most, b.stream) == SL_OK &&
        sl_memset(rt->dev, w, 0, sl_dtype_bytes(dtype, hidden), b.stream) == SL_OK) {
      sl_bench_header(&b, "fused all-reduce + residual + RMSNorm (decode)");
      for (int r = 0; r < 3; r++) {
        c.fused = (sl_ar_rmsnorm_args_t){.x = c.in,
                                         .residual = res,
                                         .weight = w,
                                         .out = c.out,
                                         .rows = row_counts[r],
                                         .hidden = hidden,
                                         .dtype = dtype,
                                         .eps = 1e-6f,
                                         .weight_bias = 1.0f};
        double us, graph_us, pus, pgraph;
        if (time_both(&b, fused_once, &c, gpu, &us, &graph_us) != SL_OK) goto out;
        c.count = (size_t)row_counts[r] * hidden;
        c.algo = SL_AR_AUTO;
        if (time_both(&b, allreduce_once, &c, gpu, &pus, &pgraph) != SL_OK) goto out;
        char shape[48], extra[120];
        snprintf(shape, sizeof shape, "%dx%d %s", row_counts[r], hidden, sl_dtype_name(dtype));
        snprintf(extra, sizeof extra, "plain all-reduce alone %.2f us (fused/plain %.2fx)", pus, us / pus);
        sl_bench_row(&b, "allreduce+rmsnorm", shape, "fused", us, (double)sl_dtype_bytes(dtype, c.count), graph_us,
                     extra);
      }
    }
    sl_device_free(rt->dev, res);
    sl_device_free(rt->dev, w);
  }
  rc = 0;
out:
  if (rc) fprintf(stderr, "bench allreduce: %s\n", sl_last_error());
  sl_device_free(rt->dev, c.in);
  sl_device_free(rt->dev, c.out);
  sl_comm_destroy(c.comm);
  sl_bench_finish(&b);
  return rc;
}
