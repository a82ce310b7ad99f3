/* `sl_bench_proxy`: latency and bandwidth of proxy puts between nodes, MPI alongside. */
#include "bench_proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"

enum { FLAG_PING = 0, FLAG_PONG = 1, FLAG_STREAM = 2, FLAG_ACK = 3, NUM_FLAGS = 4 };
static const size_t MAX_BYTES = (size_t)16 << 20;
/* Bytes in flight per bandwidth repetition (puts of one size cycle through the area). */
static const size_t STREAM_BYTES = (size_t)64 << 20;

typedef struct {
  sl_proxy_t *px;
  MPI_Comm world;
  int peer;
  bool initiator;
  uint64_t epoch; /* grows per use, never reset */
  char *mpi_buf;
} pair_t;

/* One ping-pong: the initiator puts `bytes` + flag, the responder answers in kind. */
static sl_status_t proxy_pingpong(pair_t *p, size_t bytes) {
  uint64_t e = ++p->epoch;
  if (p->initiator) {
    SL_CHECK(sl_proxy_post_put(p->px, p->peer, MAX_BYTES, 0, bytes, FLAG_PING, e));
    SL_CHECK(sl_proxy_wait_flag(p->px, p->peer, FLAG_PONG, e));
  } else {
    SL_CHECK(sl_proxy_wait_flag(p->px, p->peer, FLAG_PING, e));
    SL_CHECK(sl_proxy_post_put(p->px, p->peer, MAX_BYTES, 0, bytes, FLAG_PONG, e));
  }
  return SL_OK;
}

static sl_status_t mpi_pingpong(pair_t *p, size_t bytes) {
  if (p->initiator) {
    SL_MPI_CHECK(MPI_Send(p->mpi_buf, (int)bytes, MPI_BYTE, p->peer, 7, p->world));
    SL_MPI_CHECK(MPI_Recv(p->mpi_buf, (int)bytes, MPI_BYTE, p->peer, 7, p->world, MPI_STATUS_IGNORE));
  } else {
    SL_MPI_CHECK(MPI_Recv(p->mpi_buf, (int)bytes, MPI_BYTE, p->peer, 7, p->world, MPI_STATUS_IGNORE));
    SL_MPI_CHECK(MPI_Send(p->mpi_buf, (int)bytes, MPI_BYTE, p->peer, 7, p->world));
  }
  return SL_OK;
}

/* One stream: the initiator puts STREAM_BYTES in puts of `bytes` (each with the stream
 * flag), the responder waits for the last epoch and acknowledges with a flag-only put. */
static sl_status_t proxy_stream(pair_t *p, size_t bytes, int puts) {
  uint64_t first = p->epoch + 1;
  p->epoch += (uint64_t)puts;
  if (p->initiator) {
    for (int i = 0; i < puts; i++) {
      size_t off = ((size_t)i * bytes) % MAX_BYTES;
      if (off + bytes > MAX_BYTES) off = 0;
      SL_CHECK(sl_proxy_post_put(p->px, p->peer, MAX_BYTES + off, off, bytes, FLAG_STREAM, first + (uint64_t)i));
    }
    SL_CHECK(sl_proxy_wait_flag(p->px, p->peer, FLAG_ACK, p->epoch));
  } else {
    SL_CHECK(sl_proxy_wait_flag(p->px, p->peer, FLAG_STREAM, p->epoch));
    SL_CHECK(sl_proxy_post_put(p->px, p->peer, 0, 0, 0, FLAG_ACK, p->epoch));
  }
  return SL_OK;
}

static sl_status_t mpi_stream(pair_t *p, size_t bytes, int puts) {
  MPI_Request reqs[64];
  for (int done = 0; done < puts;) {
    int n = puts - done < 64 ? puts - done : 64;
    for (int i = 0; i < n; i++) {
      if (p->initiator)
        SL_MPI_CHECK(MPI_Isend(p->mpi_buf, (int)bytes, MPI_BYTE, p->peer, 8, p->world, &reqs[i]));
      else
        SL_MPI_CHECK(MPI_Irecv(p->mpi_buf + MAX_BYTES, (int)bytes, MPI_BYTE, p->peer, 8, p->world, &reqs[i]));
    }
    SL_MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    done += n;
  }
  char ack = 0;
  if (p->initiator)
    SL_MPI_CHECK(MPI_Recv(&ack, 1, MPI_BYTE, p->peer, 9, p->world, MPI_STATUS_IGNORE));
  else
    SL_MPI_CHECK(MPI_Send(&ack, 1, MPI_BYTE, p->peer, 9, p->world));
  return SL_OK;
}

typedef enum { LAT_PROXY, LAT_MPI, BW_PROXY, BW_MPI } what_t;

/* Median seconds of one repetition, agreed by all ranks (max over ranks of the median). */
static sl_status_t time_it(sl_bench_t *b, pair_t *p, what_t what, size_t bytes, int puts, double *seconds) {
  int n = b->iters, reps = what == LAT_PROXY || what == LAT_MPI ? 20 : 1;
  double *t = calloc((size_t)n, sizeof *t);
  if (!t) return SL_ERR(SL_ERR_NOMEM, "bench timings");
  sl_status_t s = SL_OK;
  for (int i = -b->warmup; i < n && s == SL_OK; i++) {
    s = sl_mpi_status(MPI_Barrier(p->world), "bench barrier");
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps && s == SL_OK; r++) {
      switch (what) {
      case LAT_PROXY: s = proxy_pingpong(p, bytes); break;
      case LAT_MPI: s = mpi_pingpong(p, bytes); break;
      case BW_PROXY: s = proxy_stream(p, bytes, puts); break;
      case BW_MPI: s = mpi_stream(p, bytes, puts); break;
      }
    }
    if (i >= 0) t[i] = (MPI_Wtime() - t0) / reps;
  }
  if (s == SL_OK) s = sl_proxy_quiesce(p->px);
  if (s == SL_OK) {
    qsort(t, (size_t)n, sizeof *t, sl_bench_cmp_double);
    double med = t[n / 2];
    s = sl_mpi_status(MPI_Allreduce(&med, seconds, 1, MPI_DOUBLE, MPI_MAX, p->world), "bench allreduce");
  }
  free(t);
  return s;
}

sl_status_t sl_bench_proxy(sl_bench_t *b) {
  const sl_boot_t *boot = &b->rt->boot;
  if (boot->size < 2 || (boot->num_nodes == 1 && boot->size % 2)) {
    if (boot->rank == 0) printf("# proxy bench: needs an even number of ranks >= 2 (have %d)\n", boot->size);
    return SL_OK;
  }
  pair_t p = {.world = boot->world};
  if (boot->num_nodes > 1) {
    /* Nodes hold equal numbers of consecutive ranks (sl_boot's simulated nodes; mpirun's
     * default by-slot mapping on real ones): pair with the same local rank one node on. */
    int half = boot->size / 2;
    p.peer = boot->rank < half ? boot->rank + half : boot->rank - half;
    p.initiator = boot->rank < half;
  } else {
    p.peer = boot->rank ^ 1;
    p.initiator = (boot->rank & 1) == 0;
  }
  sl_proxy_options_t o = {.all_peers_remote = boot->num_nodes == 1};
  SL_CHECK(sl_proxy_create(boot, b->rt->dev, 2 * MAX_BYTES, NUM_FLAGS, &o, &p.px));
  sl_status_t s = SL_OK;
  if (!sl_proxy_is_remote(p.px, p.peer)) {
    s = SL_ERR(SL_ERR_INVALID,
               "proxy bench: rank %d's partner %d is on the same node: run with nodes of equal "
               "size (e.g. SL_RANKS_PER_NODE=k, -np 2k)",
               boot->rank, p.peer);
    goto out;
  }
  p.mpi_buf = malloc(2 * MAX_BYTES);
  if (!p.mpi_buf) {
    s = SL_ERR(SL_ERR_NOMEM, "proxy bench MPI buffers");
    goto out;
  }
  memset(p.mpi_buf, 1, 2 * MAX_BYTES);
  void *win;
  sl_proxy_window(p.px, &win, NULL);
  if (win) memset(win, 1, 2 * MAX_BYTES);
  static const size_t full[] = {8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20};
  static const size_t quick[] = {8, 4096, 262144, 4 << 20};
  const size_t *sizes = b->quick ? quick : full;
  int nsizes = b->quick ? (int)(sizeof quick / sizeof *quick) : (int)(sizeof full / sizeof *full);
  char title[160];
  snprintf(title, sizeof title, "UCX proxy between %s nodes (%d ranks, %s mode); ceiling: MPI between the same pairs",
           boot->simulated_nodes ? "simulated" : (boot->num_nodes > 1 ? "real" : "(no: all ranks remote)"), boot->size,
           sl_proxy_mode(p.px) == SL_PROXY_DIRECT ? "direct" : "staged");
  sl_bench_header(b, title);
  for (int i = 0; i < nsizes && s == SL_OK; i++) {
    size_t bytes = sizes[i];
    char shape[48], extra[128];
    snprintf(shape, sizeof shape, "%zu B", bytes);
    if (sl_bench_selected(b, "proxy_lat")) {
      double tp = 0, tm = 0;
      s = time_it(b, &p, LAT_PROXY, bytes, 1, &tp);
      if (s == SL_OK) s = time_it(b, &p, LAT_MPI, bytes, 1, &tm);
      if (s != SL_OK) break;
      snprintf(extra, sizeof extra, "mpi %.2f us, proxy/mpi %.2fx", tm * 1e6, tp / tm);
      sl_bench_row(b, "proxy_lat", shape, "put+flag", tp * 1e6 / 2, (double)bytes, -1, extra);
    }
    if (sl_bench_selected(b, "proxy_bw")) {
      int puts = (int)(STREAM_BYTES / bytes);
      if (puts > 256) puts = 256;
      if (puts < 2) puts = 2;
      double tp = 0, tm = 0;
      s = time_it(b, &p, BW_PROXY, bytes, puts, &tp);
      if (s == SL_OK) s = time_it(b, &p, BW_MPI, bytes, puts, &tm);
      if (s != SL_OK) break;
      double moved = (double)bytes * puts;
      snprintf(extra, sizeof extra, "%d puts; mpi %.2f GB/s, proxy/mpi %.2f", puts, moved / tm / 1e9, tm / tp);
      sl_bench_row(b, "proxy_bw", shape, "stream", tp * 1e6, moved, -1, extra);
    }
  }
out:
  free(p.mpi_buf);
  sl_status_t d = sl_proxy_destroy(p.px);
  return s != SL_OK ? s : d;
}
