/* Inter-node proxy: a CPU thread per rank that drains descriptor rings (comm/ring.h) and
 * issues UCX RMA puts: data, remote completion (endpoint flush), then the flag. */
#define _GNU_SOURCE
#include "comm/proxy.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/sl_config.h"
#include "runtime/sl_log.h"
#include "runtime/sl_topo.h"

static sl_status_t test_kernel_spec(sl_jit_spec_t *spec, const char *entry, int threads) {
  if (threads <= 0 || threads > 1024 || (threads & 31))
    return SL_ERR(SL_ERR_INVALID, "proxy test kernel %s: %d threads per block (want a multiple of 32, <= 1024)", entry,
                  threads);
  sl_jit_spec_init(spec, "comm/proxy_post.cu", entry);
  SL_CHECK(sl_jit_spec_define(spec, "PROXY_THREADS", "%d", threads));
  return SL_OK;
}

sl_status_t sl_proxy_post_kernel_spec(sl_jit_spec_t *spec, int threads) {
  return test_kernel_spec(spec, "sl_proxy_post_pattern", threads);
}

sl_status_t sl_proxy_check_kernel_spec(sl_jit_spec_t *spec, int threads) {
  return test_kernel_spec(spec, "sl_proxy_check_pattern", threads);
}

sl_status_t sl_proxy_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  (void)arch;
  sl_jit_spec_t spec;
  SL_CHECK(sl_proxy_post_kernel_spec(&spec, 128));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_proxy_check_kernel_spec(&spec, 128));
  return fn(&spec, user);
}

#ifndef SLUICE_HAVE_UCX

sl_status_t sl_proxy_create(const sl_boot_t *boot, sl_device_t *dev, size_t window_bytes, size_t flag_slots,
                            const sl_proxy_options_t *opts, sl_proxy_t **out) {
  *out = NULL;
  return SL_ERR(SL_ERR_UNSUPPORTED, "the inter-node proxy needs UCX: this build has none (install libucx-dev, "
                                    "re-run cmake)");
}
sl_status_t sl_proxy_destroy(sl_proxy_t *proxy) {
  return SL_OK;
}
void sl_proxy_window(const sl_proxy_t *proxy, void **host_ptr, void **dev_ptr) {}
void sl_proxy_flags(const sl_proxy_t *proxy, uint64_t **host_ptr, uint64_t **dev_ptr) {}
sl_proxy_mode_t sl_proxy_mode(const sl_proxy_t *proxy) {
  return SL_PROXY_STAGED;
}
bool sl_proxy_is_remote(const sl_proxy_t *proxy, int rank) {
  return false;
}
sl_status_t sl_proxy_post_put(sl_proxy_t *proxy, int dst_rank, size_t remote_offset, size_t local_offset, size_t bytes,
                              uint32_t flag_index, uint64_t epoch) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no UCX in this build");
}
sl_status_t sl_proxy_wait_flag(sl_proxy_t *proxy, int src_rank, uint32_t flag_index, uint64_t epoch) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no UCX in this build");
}
sl_status_t sl_proxy_quiesce(sl_proxy_t *proxy) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no UCX in this build");
}
void sl_proxy_device_ring(const sl_proxy_t *proxy, sl_proxy_dev_ring_t *out) {
  memset(out, 0, sizeof *out);
}
sl_status_t sl_proxy_post_device_ring(sl_proxy_t *proxy, const sl_ring_desc_t *desc) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no UCX in this build");
}
const char *sl_proxy_error(const sl_proxy_t *proxy) {
  return "no UCX in this build";
}
void sl_proxy_set_paused(sl_proxy_t *proxy, bool paused) {}
void sl_proxy_stats(const sl_proxy_t *proxy, sl_proxy_stats_t *out) {
  memset(out, 0, sizeof *out);
}

#else /* SLUICE_HAVE_UCX */

#include <ucp/api/ucp.h>

enum {
  RING_HOST = 0,   /* CPU producers (sl_proxy_post_put) */
  RING_DEVICE = 1, /* GPU kernels (comm/ring.cuh) or CPU-backend device producers */
  NUM_RINGS = 2,
  BATCH_MAX = 64, /* descriptors issued per flush round */
  DEFAULT_RING_SLOTS = 1024,
  IDLE_SPIN_NS = 1000000,        /* spin this long with nothing to do before napping */
  IDLE_NAP_NS = 20000,           /* nap between progress calls once idle (keeps TCP/shm targets served) */
  WAIT_SPINS_BEFORE_YIELD = 256, /* proxy flush waits: spin, then yield */
  WAIT_SPINS_BEFORE_NAP = 4096,  /* caller waits: spin a few us, then nap (ranks may share cores) */
};

static const char *ring_names[NUM_RINGS] = {"host", "device"};

enum { PHASE_RUN = 0, PHASE_CLOSE = 1, PHASE_CLOSED = 2 };

typedef struct {
  int rank, node;
  char host[64];
  bool remote;
  bool no_err_handling; /* connected with UCP_ERR_HANDLING_MODE_NONE */
  ucp_ep_h ep;
  ucp_rkey_h window_rkey, flags_rkey;
  uint64_t window_addr, flags_addr;
  sl_proxy_t *proxy; /* for the error callback */
} peer_t;

/* Descriptors the proxy took from the rings in one round. */
typedef struct {
  int n;
  sl_ring_desc_t desc[BATCH_MAX];
  int ring_of[BATCH_MAX];
  uint64_t done_at[NUM_RINGS];  /* each ring's consumed count once this batch was taken */
  uint64_t flag_src[BATCH_MAX]; /* sources of the flag puts: valid until their flush */
} batch_t;

struct sl_proxy {
  int rank, size, node;
  MPI_Comm world;
  sl_device_t *dev;
  size_t window_bytes, flag_slots;
  sl_proxy_mode_t mode;
  long timeout_ms;

  void *window_host, *window_dev; /* staged: pinned host + device alias; direct: dev only */
  uint64_t *flags_host, *flags_dev;
  sl_ring_header_t *ring_host[NUM_RINGS];
  void *ring_dev[NUM_RINGS];
  uint64_t host_head;           /* CPU producers' counter of the host ring */
  unsigned long long *dev_head; /* producers' counter of the device ring */
  uint32_t capacity;

  ucp_context_h context;
  ucp_worker_h worker;
  ucp_mem_h window_memh, flags_memh;
  peer_t *peers;

  pthread_t thread;
  bool thread_started;
  atomic_int stop;
  atomic_int phase;
  atomic_bool paused;
  atomic_bool closing; /* this rank is shutting down: transport errors are expected */
  atomic_int failed;   /* 0 or the sl_status_t that failed the proxy */
  pthread_mutex_t error_lock;
  char error_text[512];

  /* proxy-thread state */
  uint64_t consumed[NUM_RINGS];
  batch_t batches[2]; /* the batch whose flags are in flight, and the one being taken */
  int flags_batch;    /* index of the batch whose flags are in flight */

  atomic_uint_least64_t stat_puts, stat_bytes, stat_batches, stat_full_waits;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void nap_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* A polite wait step for callers' waits: spin a few us, then nap (ranks may share cores). */
static void wait_step(unsigned *spins) {
  if (++*spins > WAIT_SPINS_BEFORE_NAP) nap_ns(10000);
}

static const char *peer_name(const sl_proxy_t *p, int rank, char *buf, size_t len) {
  if (rank < 0 || rank >= p->size) {
    snprintf(buf, len, "rank %d (not in the job)", rank);
  } else {
    const peer_t *q = &p->peers[rank];
    snprintf(buf, len, "rank %d (node %d, host %s)", rank, q->node, q->host);
  }
  return buf;
}

/* Fail the proxy (first failure wins): rings carry the status so producers stop waiting. */
static void proxy_fail(sl_proxy_t *p, sl_status_t status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void proxy_fail(sl_proxy_t *p, sl_status_t status, const char *fmt, ...) {
  pthread_mutex_lock(&p->error_lock);
  if (atomic_load(&p->failed) == 0) {
    /* The text first, then the status (seq_cst store): whoever sees the status sees the text. */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error_text, sizeof p->error_text, fmt, ap);
    va_end(ap);
    atomic_store(&p->failed, (int)status);
    for (int r = 0; r < NUM_RINGS; r++)
      sl_ring_store_release(&p->ring_host[r]->error, (uint64_t)(-(int64_t)status));
    SL_LOG_ERROR("UCX proxy failed: %s", p->error_text);
  }
  pthread_mutex_unlock(&p->error_lock);
}

static sl_status_t proxy_failure(const sl_proxy_t *p) {
  int f = atomic_load(&p->failed);
  if (!f) return SL_OK;
  return SL_ERR((sl_status_t)f, "UCX proxy of rank %d failed: %s", p->rank, p->error_text);
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
  peer_t *q = arg;
  sl_proxy_t *p = q->proxy;
  if (atomic_load(&p->closing)) return;
  proxy_fail(p, SL_ERR_PEER,
             "lost connection to rank %d (node %d, host %s): UCX: %s. The peer probably died; "
             "end the job",
             q->rank, q->node, q->host, ucs_status_string(status));
}

/* ---- the proxy thread ------------------------------------------------------------ */

/* Wait (progressing) for a UCX request; bounded. Returns the request's final status. */
static ucs_status_t wait_request(sl_proxy_t *p, void *req, double deadline_ms) {
  if (req == NULL) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  ucs_status_t st;
  unsigned spins = 0;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    unsigned events = ucp_worker_progress(p->worker);
    /* The clock is read even while other traffic keeps progress busy: a dead target must
     * not be hidden by live ones. */
    if ((++spins & 63) == 0 && now_ms() > deadline_ms) {
      ucp_request_free(req); /* released by UCX when it completes, if ever */
      return UCS_ERR_TIMED_OUT;
    }
    if (!events && spins > WAIT_SPINS_BEFORE_YIELD) sched_yield();
  }
  ucp_request_free(req);
  return st;
}

/* Remote completion of everything issued to the peers marked in `touched`. Flushes are
 * issued to all of them first, then awaited, so peers complete in parallel. */
static bool flush_peers(sl_proxy_t *p, const int *touched, int ntouched, const char *what) {
  void *reqs[2 * BATCH_MAX]; /* at most two batches' distinct destinations */
  ucp_request_param_t prm = {.op_attr_mask = 0};
  for (int i = 0; i < ntouched; i++)
    reqs[i] = ucp_ep_flush_nbx(p->peers[touched[i]].ep, &prm);
  double deadline = now_ms() + (double)p->timeout_ms;
  bool ok = true;
  for (int i = 0; i < ntouched; i++) {
    ucs_status_t st = wait_request(p, reqs[i], deadline);
    if (st != UCS_OK && ok) {
      const peer_t *q = &p->peers[touched[i]];
      if (st == UCS_ERR_TIMED_OUT)
        proxy_fail(p, SL_ERR_TIMEOUT,
                   "rank %d (node %d, host %s) did not complete the %s puts within "
                   "SL_TIMEOUT_MS=%ld ms: is it alive and progressing?",
                   q->rank, q->node, q->host, what, p->timeout_ms);
      else
        proxy_fail(p, SL_ERR_PEER, "puts to rank %d (node %d, host %s) failed: UCX: %s", q->rank, q->node, q->host,
                   ucs_status_string(st));
      ok = false;
    }
  }
  return ok;
}

static bool issue_put(sl_proxy_t *p, const peer_t *q, const void *src, size_t bytes, uint64_t raddr, ucp_rkey_h rkey,
                      bool from_window) {
  ucp_request_param_t prm = {.op_attr_mask = 0};
  if (from_window) {
    prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    prm.memh = p->window_memh;
    if (p->mode == SL_PROXY_DIRECT) {
      prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      prm.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
  }
  void *req = ucp_put_nbx(q->ep, src, bytes, raddr, rkey, &prm);
  if (UCS_PTR_IS_ERR(req)) {
    proxy_fail(p, SL_ERR_PEER, "put of %zu bytes to rank %d (node %d, host %s) failed: UCX: %s", bytes, q->rank,
               q->node, q->host, ucs_status_string(UCS_PTR_STATUS(req)));
    return false;
  }
  /* Completion is observed through the endpoint flush; the request itself is released. */
  if (req) ucp_request_free(req);
  return true;
}

/* Descriptors from kernels are checked here as CPU posts are checked at the call. */
static bool desc_valid(sl_proxy_t *p, const sl_ring_desc_t *d, int ring) {
  const char *why = NULL;
  if (d->dst_rank < 0 || d->dst_rank >= p->size || !p->peers[d->dst_rank].remote)
    why = "destination is not a remote peer";
  else if (d->op != SL_RING_OP_PUT && d->op != SL_RING_OP_FLAG_ONLY)
    why = "unknown op";
  else if (d->bytes > p->window_bytes || d->remote_offset > p->window_bytes - d->bytes ||
           d->local_offset > p->window_bytes - d->bytes)
    why = "bytes/offsets outside the window";
  else if (d->flag_index >= p->flag_slots)
    why = "flag index out of range";
  if (!why) return true;
  proxy_fail(p, SL_ERR_RANGE,
             "bad descriptor on the %s ring: %s (dst %d, remote_offset %llu, local_offset %llu, "
             "bytes %llu, flag %u, window %zu bytes, %zu flags)",
             ring_names[ring], why, d->dst_rank, (unsigned long long)d->remote_offset,
             (unsigned long long)d->local_offset, (unsigned long long)d->bytes, d->flag_index, p->window_bytes,
             p->flag_slots);
  return false;
}

/* The proxy pipelines two batches. Each round:
 *   1. takes up to BATCH_MAX newly published descriptors (batch N) and puts their data;
 *   2. flushes every peer touched by N or by the previous batch F, whose flags went out
 *      last round: one flush completes N's data AND F's flags at their destinations;
 *   3. reports F done, then puts N's flags (N becomes F).
 * Invariant: a flag is put only after the flush that completed its data, so it never
 * arrives first; `done` moves only after the flush that completed the flag. One flush
 * per round in steady state; a lone descriptor takes two rounds to be reported done, but
 * its flag leaves after the first. Returns the descriptors handled (0: nothing to do). */
static bool take_batch(sl_proxy_t *p, batch_t *b) {
  b->n = 0;
  for (int r = 0; r < NUM_RINGS; r++) {
    sl_ring_header_t *ring = p->ring_host[r];
    int before = b->n;
    while (b->n < BATCH_MAX && sl_ring_is_published(ring, p->consumed[r])) {
      b->desc[b->n] = *sl_ring_slot(ring, p->consumed[r]);
      b->ring_of[b->n++] = r;
      p->consumed[r]++;
    }
    /* The descriptors are copied: their slots may be reused at once. */
    if (b->n > before) sl_ring_store_release(&ring->tail, p->consumed[r]);
    b->done_at[r] = p->consumed[r];
  }
  return b->n > 0;
}

static void mark_peers(const batch_t *b, bool *seen, int *touched, int *ntouched) {
  for (int i = 0; i < b->n; i++) {
    int dst = b->desc[i].dst_rank;
    if (!seen[dst]) {
      seen[dst] = true;
      touched[(*ntouched)++] = dst;
    }
  }
}

static int proxy_round(sl_proxy_t *p) {
  batch_t *next = &p->batches[p->flags_batch ^ 1], *flagged = &p->batches[p->flags_batch];
  bool have_next = take_batch(p, next);
  if (!have_next && flagged->n == 0) return 0;
  if (atomic_load(&p->failed)) { /* failed: consume and drop, producers see the error */
    flagged->n = 0;
    return next->n;
  }
  for (int i = 0; i < next->n; i++)
    if (!desc_valid(p, &next->desc[i], next->ring_of[i])) return next->n;
  char *window = p->mode == SL_PROXY_DIRECT ? p->window_dev : p->window_host;
  for (int i = 0; i < next->n; i++) {
    const sl_ring_desc_t *d = &next->desc[i];
    const peer_t *q = &p->peers[d->dst_rank];
    if (d->op == SL_RING_OP_PUT && d->bytes &&
        !issue_put(p, q, window + d->local_offset, d->bytes, q->window_addr + d->remote_offset, q->window_rkey, true))
      return next->n;
  }
  int touched[2 * BATCH_MAX], ntouched = 0;
  bool seen[p->size];
  memset(seen, 0, sizeof seen);
  mark_peers(next, seen, touched, &ntouched);
  mark_peers(flagged, seen, touched, &ntouched);
  if (!flush_peers(p, touched, ntouched, flagged->n ? "data and flag" : "data")) return next->n;
  if (flagged->n) {
    uint64_t payload = 0;
    for (int i = 0; i < flagged->n; i++)
      payload += flagged->desc[i].bytes;
    for (int r = 0; r < NUM_RINGS; r++)
      sl_ring_store_release(&p->ring_host[r]->done, flagged->done_at[r]);
    atomic_fetch_add(&p->stat_puts, (uint64_t)flagged->n);
    atomic_fetch_add(&p->stat_bytes, payload);
    flagged->n = 0;
  }
  atomic_fetch_add(&p->stat_batches, 1);
  for (int i = 0; i < next->n; i++) {
    const sl_ring_desc_t *d = &next->desc[i];
    const peer_t *q = &p->peers[d->dst_rank];
    next->flag_src[i] = d->epoch;
    if (!issue_put(p, q, &next->flag_src[i], sizeof(uint64_t), q->flags_addr + (uint64_t)d->flag_index * 8u,
                   q->flags_rkey, false))
      return next->n;
  }
  if (next->n) p->flags_batch ^= 1; /* next's flags are out: it is the flagged batch now */
  return next->n ? next->n : 1;
}

/* Close endpoints (flush mode: everything issued is delivered first), bounded. */
static void proxy_close_endpoints(sl_proxy_t *p) {
  void *reqs[p->size];
  for (int i = 0; i < p->size; i++) {
    peer_t *q = &p->peers[i];
    reqs[i] = NULL;
    if (q->window_rkey) ucp_rkey_destroy(q->window_rkey);
    if (q->flags_rkey) ucp_rkey_destroy(q->flags_rkey);
    q->window_rkey = q->flags_rkey = NULL;
    if (!q->ep) continue;
    /* Force (no flush) only after a failure, and only where both sides can take it. */
    bool force = atomic_load(&p->failed) && !q->no_err_handling;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    reqs[i] = ucp_ep_close_nbx(q->ep, &prm);
    q->ep = NULL;
  }
  double deadline = now_ms() + (double)p->timeout_ms;
  for (int i = 0; i < p->size; i++) {
    ucs_status_t st = wait_request(p, reqs[i], deadline);
    if (st != UCS_OK && st != UCS_ERR_CANCELED && st != UCS_ERR_CONNECTION_RESET && st != UCS_ERR_ENDPOINT_TIMEOUT &&
        st != UCS_ERR_NOT_CONNECTED)
      SL_LOG_WARN("closing the UCX endpoint to rank %d: %s", i, ucs_status_string(st));
  }
}

static void *proxy_main(void *arg) {
  sl_proxy_t *p = arg;
  double idle_since = -1;
  while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
    if (atomic_load(&p->phase) == PHASE_CLOSE) {
      proxy_close_endpoints(p);
      atomic_store(&p->phase, PHASE_CLOSED);
    }
    int did = atomic_load(&p->phase) == PHASE_RUN && !atomic_load(&p->paused) ? proxy_round(p) : 0;
    /* Progress even with nothing to send: over TCP and shared memory, peers' puts into
     * this rank's window complete only while this worker is progressed. */
    unsigned events = ucp_worker_progress(p->worker);
    if (did || events) {
      idle_since = -1;
    } else {
      double t = now_ms();
      if (idle_since < 0) idle_since = t;
      if ((t - idle_since) * 1e6 > IDLE_SPIN_NS) nap_ns(IDLE_NAP_NS);
    }
  }
  return NULL;
}

/* ---- creation -------------------------------------------------------------------- */

static uint32_t round_pow2(uint32_t v) {
  uint32_t c = 1;
  while (c < v && c < (1u << 30))
    c <<= 1;
  return c;
}

static sl_status_t ucs_check(ucs_status_t st, const char *what) {
  if (st == UCS_OK) return SL_OK;
  return SL_ERR(SL_ERR_IO, "%s: UCX: %s (check UCX_TLS / UCX_NET_DEVICES; `ucx_info -d` lists transports)", what,
                ucs_status_string(st));
}
#define UCS_CHECK_GOTO(call, res, label) SL_CHECK_GOTO(ucs_check((call), #call), res, label)

/* Does a UCX_TLS value leave room for InfiniBand transports? Naming an IB device in
 * NET_DEVICES while only tcp/shm are allowed would leave UCX without any transport. */
static bool tls_may_use_verbs(const char *tls) {
  if (!tls || !*tls || tls[0] == '^' || strstr(tls, "all")) return true;
  static const char *const ib[] = {"rc", "ud", "dc", "ib", "mlx5"};
  for (size_t i = 0; i < sizeof ib / sizeof ib[0]; i++)
    if (strstr(tls, ib[i])) return true;
  return false;
}

static sl_status_t init_ucx(sl_proxy_t *p, const sl_proxy_options_t *opts) {
  ucp_config_t *config;
  SL_CHECK(ucs_check(ucp_config_read(NULL, NULL, &config), "ucp_config_read"));
  char net[96] = "";
  if (opts->net_devices && opts->net_devices[0]) {
    snprintf(net, sizeof net, "%s", opts->net_devices);
  } else if (!getenv("UCX_NET_DEVICES") && tls_may_use_verbs(getenv("UCX_TLS"))) {
    sl_topo_t topo;
    if (sl_topo_discover(sl_device_info(p->dev), &topo) == SL_OK)
      sl_topo_ucx_net_devices(&topo, net, sizeof net);
    else
      sl_clear_error();
  }
  if (net[0]) {
    ucs_status_t st = ucp_config_modify(config, "NET_DEVICES", net);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return SL_ERR(SL_ERR_INVALID, "UCX rejected NET_DEVICES=%s: %s", net, ucs_status_string(st));
    }
    SL_LOG_DEBUG("UCX proxy: NET_DEVICES=%s", net);
  }
  ucp_params_t params = {
      .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME,
      .features = UCP_FEATURE_RMA,
      .estimated_num_eps = (size_t)p->size,
      .name = "sluice-proxy",
  };
  ucs_status_t st = ucp_init(&params, config, &p->context);
  ucp_config_release(config);
  SL_CHECK(ucs_check(st, "ucp_init"));

  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
  SL_CHECK(ucs_check(ucp_worker_create(p->context, &wp, &p->worker), "ucp_worker_create"));

  /* Direct (GPUDirect RDMA) only when this UCX build handles CUDA memory. */
  ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
  SL_CHECK(ucs_check(ucp_context_query(p->context, &attr), "ucp_context_query"));
  bool ucx_cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  bool gpu = sl_device_backend(p->dev) == SL_BACKEND_CUDA;
  p->mode = (ucx_cuda && gpu) ? SL_PROXY_DIRECT : SL_PROXY_STAGED;
  SL_LOG_INFO("UCX proxy: %s mode (%s; UCX %s CUDA memory)",
              p->mode == SL_PROXY_DIRECT ? "direct (GPUDirect RDMA from device memory)"
                                         : "staged (pinned host window mapped into the device)",
              gpu ? "GPU backend" : "CPU backend", ucx_cuda ? "supports" : "does not support");
  return SL_OK;
}

static sl_status_t map_region(sl_proxy_t *p, void *addr, size_t bytes, bool cuda, ucp_mem_h *memh, const char *what) {
  ucp_mem_map_params_t mp = {
      .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
      .address = addr,
      .length = bytes,
  };
  if (cuda) {
    mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.memory_type = UCS_MEMORY_TYPE_CUDA;
  }
  ucs_status_t st = ucp_mem_map(p->context, &mp, memh);
  if (st != UCS_OK)
    return SL_ERR(SL_ERR_IO, "registering the proxy %s (%zu bytes) with UCX failed: %s", what, bytes,
                  ucs_status_string(st));
  return SL_OK;
}

static sl_status_t alloc_memory(sl_proxy_t *p) {
  /* The window: device memory in direct mode, else pinned host memory mapped into the
   * device, which GPU kernels write (send side) and read (receive side) directly. */
  if (p->mode == SL_PROXY_DIRECT) {
    SL_CHECK(sl_device_malloc(p->dev, p->window_bytes, &p->window_dev));
    SL_CHECK(sl_memset(p->dev, p->window_dev, 0, p->window_bytes, NULL));
    SL_CHECK(sl_device_sync(p->dev));
  } else {
    SL_CHECK(sl_host_alloc_mapped(p->dev, p->window_bytes, &p->window_host, &p->window_dev));
    memset(p->window_host, 0, p->window_bytes);
  }
  void *fd;
  SL_CHECK(sl_host_alloc_mapped(p->dev, p->flag_slots * sizeof(uint64_t), (void **)&p->flags_host, &fd));
  p->flags_dev = fd;
  memset(p->flags_host, 0, p->flag_slots * sizeof(uint64_t));
  for (int r = 0; r < NUM_RINGS; r++) {
    void *h;
    SL_CHECK(sl_host_alloc_mapped(p->dev, sl_ring_bytes(p->capacity), &h, &p->ring_dev[r]));
    memset(h, 0, sl_ring_bytes(p->capacity));
    p->ring_host[r] = h;
    p->ring_host[r]->capacity = p->capacity;
    p->ring_host[r]->id = (uint32_t)r;
  }
  SL_CHECK(sl_device_malloc(p->dev, sizeof(unsigned long long), (void **)&p->dev_head));
  SL_CHECK(sl_memset(p->dev, p->dev_head, 0, sizeof(unsigned long long), NULL));
  SL_CHECK(sl_device_sync(p->dev));
  SL_CHECK(map_region(p, p->mode == SL_PROXY_DIRECT ? p->window_dev : p->window_host, p->window_bytes,
                      p->mode == SL_PROXY_DIRECT, &p->window_memh, "window"));
  SL_CHECK(map_region(p, p->flags_host, p->flag_slots * sizeof(uint64_t), false, &p->flags_memh, "flags"));
  return SL_OK;
}

/* What each rank tells every other: fixed part, then worker address and the two packed
 * remote keys, back to back. */
typedef struct {
  uint64_t window_addr, flags_addr;
  uint32_t address_len, window_rkey_len, flags_rkey_len;
  int32_t node;
  char host[64];
} card_t;

static sl_status_t exchange_and_connect(sl_proxy_t *p, const sl_boot_t *boot, bool all_remote) {
  sl_status_t s = SL_OK;
  ucp_address_t *address = NULL;
  size_t address_len = 0;
  void *wkey = NULL, *fkey = NULL;
  size_t wkey_len = 0, fkey_len = 0;
  char *mine = NULL, *all = NULL;
  int *lens = NULL, *displs = NULL;
  UCS_CHECK_GOTO(ucp_worker_get_address(p->worker, &address, &address_len), s, out);
  UCS_CHECK_GOTO(ucp_rkey_pack(p->context, p->window_memh, &wkey, &wkey_len), s, out);
  UCS_CHECK_GOTO(ucp_rkey_pack(p->context, p->flags_memh, &fkey, &fkey_len), s, out);
  card_t card = {
      .window_addr = (uint64_t)(uintptr_t)(p->mode == SL_PROXY_DIRECT ? p->window_dev : p->window_host),
      .flags_addr = (uint64_t)(uintptr_t)p->flags_host,
      .address_len = (uint32_t)address_len,
      .window_rkey_len = (uint32_t)wkey_len,
      .flags_rkey_len = (uint32_t)fkey_len,
      .node = boot->node,
  };
  snprintf(card.host, sizeof card.host, "%s", boot->hostname);
  int my_len = (int)(sizeof card + address_len + wkey_len + fkey_len);
  mine = malloc((size_t)my_len);
  lens = calloc((size_t)p->size, sizeof(int));
  displs = calloc((size_t)p->size, sizeof(int));
  if (!mine || !lens || !displs) {
    s = SL_ERR(SL_ERR_NOMEM, "proxy address exchange buffers");
    goto out;
  }
  memcpy(mine, &card, sizeof card);
  memcpy(mine + sizeof card, address, address_len);
  memcpy(mine + sizeof card + address_len, wkey, wkey_len);
  memcpy(mine + sizeof card + address_len + wkey_len, fkey, fkey_len);
  SL_CHECK_GOTO(sl_mpi_status(MPI_Allgather(&my_len, 1, MPI_INT, lens, 1, MPI_INT, p->world), "proxy: allgather sizes"),
                s, out);
  size_t total = 0;
  for (int i = 0; i < p->size; i++) {
    displs[i] = (int)total;
    total += (size_t)lens[i];
  }
  all = malloc(total);
  if (!all) {
    s = SL_ERR(SL_ERR_NOMEM, "proxy address exchange (%zu bytes)", total);
    goto out;
  }
  SL_CHECK_GOTO(sl_mpi_status(MPI_Allgatherv(mine, my_len, MPI_BYTE, all, lens, displs, MPI_BYTE, p->world),
                              "proxy: allgather addresses and keys"),
                s, out);
  int nremote = 0;
  for (int i = 0; i < p->size; i++) {
    peer_t *q = &p->peers[i];
    card_t c;
    const char *blob = all + displs[i];
    memcpy(&c, blob, sizeof c);
    q->rank = i;
    q->node = c.node;
    q->proxy = p;
    snprintf(q->host, sizeof q->host, "%s", c.host);
    q->remote = i != p->rank && (all_remote || c.node != p->node);
    if (!q->remote) continue;
    nremote++;
    q->window_addr = c.window_addr;
    q->flags_addr = c.flags_addr;
    ucp_ep_params_t ep = {
        .field_mask =
            UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)(blob + sizeof c),
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error_cb, .arg = q},
    };
    char what[160], name[96];
    snprintf(what, sizeof what, "connecting to %s", peer_name(p, i, name, sizeof name));
    ucs_status_t st = ucp_ep_create(p->worker, &ep, &q->ep);
    if (st == UCS_ERR_UNREACHABLE) {
      /* Some transports (shared memory in UCX 1.13) cannot report a peer's failure:
       * connect without it; a lost peer is then found by the bounded flushes instead. */
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      st = ucp_ep_create(p->worker, &ep, &q->ep);
      if (st == UCS_OK) {
        q->no_err_handling = true;
        SL_LOG_DEBUG("UCX proxy: %s reached without peer-failure reporting", name);
      }
    }
    SL_CHECK_GOTO(ucs_check(st, what), s, out);
    snprintf(what, sizeof what, "unpacking the window key of %s", name);
    SL_CHECK_GOTO(ucs_check(ucp_ep_rkey_unpack(q->ep, blob + sizeof c + c.address_len, &q->window_rkey), what), s, out);
    snprintf(what, sizeof what, "unpacking the flag key of %s", name);
    SL_CHECK_GOTO(
        ucs_check(ucp_ep_rkey_unpack(q->ep, blob + sizeof c + c.address_len + c.window_rkey_len, &q->flags_rkey), what),
        s, out);
  }
  SL_LOG_DEBUG("UCX proxy: %d remote peers%s", nremote, all_remote ? " (every other rank treated as remote)" : "");
out:
  if (address) ucp_worker_release_address(p->worker, address);
  if (wkey) ucp_rkey_buffer_release(wkey);
  if (fkey) ucp_rkey_buffer_release(fkey);
  free(mine);
  free(all);
  free(lens);
  free(displs);
  return s;
}

static void free_all(sl_proxy_t *p) {
  if (!p) return;
  if (p->peers) {
    for (int i = 0; i < p->size; i++) {
      peer_t *q = &p->peers[i];
      if (q->window_rkey) ucp_rkey_destroy(q->window_rkey);
      if (q->flags_rkey) ucp_rkey_destroy(q->flags_rkey);
      if (q->ep) {
        ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                   .flags = q->no_err_handling ? 0 : UCP_EP_CLOSE_FLAG_FORCE};
        void *req = ucp_ep_close_nbx(q->ep, &prm);
        (void)wait_request(p, req, now_ms() + 1000.0);
      }
    }
  }
  if (p->window_memh) ucp_mem_unmap(p->context, p->window_memh);
  if (p->flags_memh) ucp_mem_unmap(p->context, p->flags_memh);
  if (p->worker) ucp_worker_destroy(p->worker);
  if (p->context) ucp_cleanup(p->context);
  if (p->mode == SL_PROXY_DIRECT)
    sl_device_free(p->dev, p->window_dev);
  else
    sl_host_free_mapped(p->dev, p->window_host);
  sl_host_free_mapped(p->dev, p->flags_host);
  for (int r = 0; r < NUM_RINGS; r++)
    sl_host_free_mapped(p->dev, p->ring_host[r]);
  sl_device_free(p->dev, p->dev_head);
  pthread_mutex_destroy(&p->error_lock);
  free(p->peers);
  free(p);
}

sl_status_t sl_proxy_create(const sl_boot_t *boot, sl_device_t *dev, size_t window_bytes, size_t flag_slots,
                            const sl_proxy_options_t *opts, sl_proxy_t **out) {
  *out = NULL;
  sl_proxy_options_t defaults = {0};
  if (!opts) opts = &defaults;
  if (window_bytes == 0 || flag_slots == 0)
    return SL_ERR(SL_ERR_INVALID, "sl_proxy_create: window of %zu bytes and %zu flag slots (both must be > 0)",
                  window_bytes, flag_slots);
  /* The same sizes everywhere: offsets are checked against the local window only. */
  unsigned long long mine[2] = {window_bytes, flag_slots}, lo[2], hi[2];
  SL_MPI_CHECK(MPI_Allreduce(mine, lo, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, boot->world));
  SL_MPI_CHECK(MPI_Allreduce(mine, hi, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, boot->world));
  if (lo[0] != hi[0] || lo[1] != hi[1])
    return SL_ERR(SL_ERR_INVALID,
                  "sl_proxy_create: ranks disagree on the window (%llu..%llu bytes) or flags "
                  "(%llu..%llu slots): every rank must pass the same sizes",
                  lo[0], hi[0], lo[1], hi[1]);

  sl_proxy_t *p = calloc(1, sizeof *p);
  if (!p) return SL_ERR(SL_ERR_NOMEM, "sl_proxy_t");
  sl_status_t s = SL_OK;
  pthread_mutex_init(&p->error_lock, NULL);
  p->rank = boot->rank;
  p->size = boot->size;
  p->node = boot->node;
  p->world = boot->world;
  p->dev = dev;
  p->window_bytes = window_bytes;
  p->flag_slots = flag_slots;
  p->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : sl_config()->timeout_ms;
  p->capacity = round_pow2(opts->ring_slots ? opts->ring_slots : DEFAULT_RING_SLOTS);
  p->peers = calloc((size_t)p->size, sizeof(peer_t));
  if (!p->peers) {
    s = SL_ERR(SL_ERR_NOMEM, "proxy peer table");
    goto fail;
  }
  SL_CHECK_GOTO(init_ucx(p, opts), s, fail);
  SL_CHECK_GOTO(alloc_memory(p), s, fail);
  SL_CHECK_GOTO(exchange_and_connect(p, boot, opts->all_peers_remote), s, fail);
  if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
    s = SL_ERR(SL_ERR_INTERNAL, "could not start the proxy thread");
    goto fail;
  }
  p->thread_started = true;
  /* Nobody posts before every rank's thread is up and its endpoints exist. */
  SL_CHECK_GOTO(sl_mpi_status(MPI_Barrier(p->world), "proxy: start barrier"), s, fail);
  *out = p;
  return SL_OK;
fail:
  /* A failed create on one rank fails the others at their next collective (or their
   * bounded flushes): the job must end. */
  if (p->thread_started) {
    atomic_store(&p->closing, true);
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    pthread_join(p->thread, NULL);
  }
  free_all(p);
  return s;
}

/* Bounded barrier: MPI_Ibarrier polled against SL_TIMEOUT_MS. */
static sl_status_t bounded_barrier(sl_proxy_t *p, const char *what) {
  MPI_Request req;
  SL_CHECK(sl_mpi_status(MPI_Ibarrier(p->world, &req), what));
  /* Other ranks may legitimately still be working: the job-wide bound applies, not a
   * shorter one this proxy was given. */
  long bound = p->timeout_ms > sl_config()->timeout_ms ? p->timeout_ms : sl_config()->timeout_ms;
  double deadline = now_ms() + (double)bound;
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    SL_CHECK(sl_mpi_status(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what));
    if (done) return SL_OK;
    if (now_ms() > deadline)
      return SL_ERR(SL_ERR_TIMEOUT,
                    "%s: not every rank arrived within SL_TIMEOUT_MS=%ld ms (a rank stalled or "
                    "died; end the job)",
                    what, bound);
    wait_step(&spins);
  }
}

sl_status_t sl_proxy_destroy(sl_proxy_t *p) {
  if (!p) return SL_OK;
  sl_status_t first = SL_OK;
  sl_status_t s = sl_proxy_quiesce(p);
  if (s != SL_OK) first = s;
  /* From here on peers closing their endpoints may look like transport errors. */
  atomic_store(&p->closing, true);
  bool healthy = atomic_load(&p->failed) == 0;
  if (healthy) {
    /* Peers may still be putting into our window: keep progressing until all arrive. */
    s = bounded_barrier(p, "sl_proxy_destroy: barrier before closing");
    if (s != SL_OK && first == SL_OK) first = s;
    healthy = s == SL_OK;
  }
  atomic_store(&p->phase, PHASE_CLOSE);
  double deadline = now_ms() + 2.0 * (double)p->timeout_ms;
  unsigned spins = 0;
  while (atomic_load(&p->phase) != PHASE_CLOSED && now_ms() < deadline)
    wait_step(&spins);
  if (healthy) {
    /* Peers' endpoint closes need this worker progressed until they finish too. */
    s = bounded_barrier(p, "sl_proxy_destroy: barrier after closing");
    if (s != SL_OK && first == SL_OK) first = s;
  }
  atomic_store_explicit(&p->stop, 1, memory_order_release);
  pthread_join(p->thread, NULL);
  free_all(p);
  return first;
}

/* ---- accessors ------------------------------------------------------------------- */

void sl_proxy_window(const sl_proxy_t *p, void **host_ptr, void **dev_ptr) {
  if (host_ptr) *host_ptr = p->window_host;
  if (dev_ptr) *dev_ptr = p->window_dev;
}
void sl_proxy_flags(const sl_proxy_t *p, uint64_t **host_ptr, uint64_t **dev_ptr) {
  if (host_ptr) *host_ptr = p->flags_host;
  if (dev_ptr) *dev_ptr = p->flags_dev;
}
sl_proxy_mode_t sl_proxy_mode(const sl_proxy_t *p) {
  return p->mode;
}
void sl_proxy_set_paused(sl_proxy_t *p, bool paused) {
  atomic_store(&p->paused, paused);
}
bool sl_proxy_is_remote(const sl_proxy_t *p, int rank) {
  return rank >= 0 && rank < p->size && p->peers[rank].remote;
}
const char *sl_proxy_error(const sl_proxy_t *p) {
  return atomic_load(&p->failed) ? p->error_text : "";
}
void sl_proxy_device_ring(const sl_proxy_t *p, sl_proxy_dev_ring_t *out) {
  out->ring = p->ring_dev[RING_DEVICE];
  out->head = p->dev_head;
  out->timeout_ns = (unsigned long long)p->timeout_ms * 1000000ull;
}
void sl_proxy_stats(const sl_proxy_t *p, sl_proxy_stats_t *out) {
  out->puts = atomic_load(&((sl_proxy_t *)p)->stat_puts);
  out->bytes = atomic_load(&((sl_proxy_t *)p)->stat_bytes);
  out->batches = atomic_load(&((sl_proxy_t *)p)->stat_batches);
  out->ring_full_waits = atomic_load(&((sl_proxy_t *)p)->stat_full_waits);
}

/* ---- producers and waiters ------------------------------------------------------- */

static sl_status_t check_desc(const sl_proxy_t *p, const sl_ring_desc_t *d) {
  char name[96];
  if (d->dst_rank < 0 || d->dst_rank >= p->size)
    return SL_ERR(SL_ERR_RANGE, "proxy put: destination rank %d outside the job's %d ranks", d->dst_rank, p->size);
  if (!p->peers[d->dst_rank].remote)
    return SL_ERR(SL_ERR_RANGE,
                  "proxy put: %s is not a remote peer of rank %d (same node or self): use symmetric "
                  "memory, or create the proxy with all_peers_remote",
                  peer_name(p, d->dst_rank, name, sizeof name), p->rank);
  if (d->op != SL_RING_OP_PUT && d->op != SL_RING_OP_FLAG_ONLY)
    return SL_ERR(SL_ERR_INVALID, "proxy put: unknown descriptor op %u", d->op);
  if (d->bytes > p->window_bytes || d->remote_offset > p->window_bytes - d->bytes ||
      d->local_offset > p->window_bytes - d->bytes)
    return SL_ERR(SL_ERR_RANGE,
                  "proxy put to rank %d: %llu bytes at remote offset %llu / local offset %llu do not "
                  "fit the %zu-byte window",
                  d->dst_rank, (unsigned long long)d->bytes, (unsigned long long)d->remote_offset,
                  (unsigned long long)d->local_offset, p->window_bytes);
  if (d->flag_index >= p->flag_slots)
    return SL_ERR(SL_ERR_RANGE, "proxy put to rank %d: flag index %u >= %zu flag slots", d->dst_rank, d->flag_index,
                  p->flag_slots);
  return SL_OK;
}

static sl_status_t post_on(sl_proxy_t *p, int ring_id, uint64_t *head, const sl_ring_desc_t *d) {
  SL_CHECK(proxy_failure(p));
  SL_CHECK(check_desc(p, d));
  sl_ring_header_t *ring = p->ring_host[ring_id];
  uint64_t index;
  if (!sl_ring_try_reserve(ring, head, &index)) {
    atomic_fetch_add(&p->stat_full_waits, 1);
    /* Twice the bound: a stuck destination makes the proxy fail first (its flushes are
     * bounded by one timeout each), and that error names the peer. */
    double deadline = now_ms() + 2.0 * (double)p->timeout_ms;
    unsigned spins = 0;
    while (!sl_ring_try_reserve(ring, head, &index)) {
      SL_CHECK(proxy_failure(p));
      if (now_ms() > deadline)
        return SL_ERR(SL_ERR_TIMEOUT,
                      "the proxy's %s ring (rank %d, %u slots) stayed full for 2 x SL_TIMEOUT_MS=%ld ms: "
                      "%llu descriptors consumed, %llu completed; the proxy thread is stuck or a destination is "
                      "not completing puts",
                      ring_names[ring_id], p->rank, ring->capacity, p->timeout_ms,
                      (unsigned long long)sl_ring_load_acquire(&ring->tail),
                      (unsigned long long)sl_ring_load_acquire(&ring->done));
      wait_step(&spins);
    }
  }
  sl_ring_publish(ring, index, d);
  return SL_OK;
}

sl_status_t sl_proxy_post_put(sl_proxy_t *p, int dst_rank, size_t remote_offset, size_t local_offset, size_t bytes,
                              uint32_t flag_index, uint64_t epoch) {
  sl_ring_desc_t d = {
      .remote_offset = remote_offset,
      .local_offset = local_offset,
      .bytes = bytes,
      .epoch = epoch,
      .dst_rank = dst_rank,
      .flag_index = flag_index,
      .op = bytes ? SL_RING_OP_PUT : SL_RING_OP_FLAG_ONLY,
  };
  return post_on(p, RING_HOST, &p->host_head, &d);
}

sl_status_t sl_proxy_post_device_ring(sl_proxy_t *p, const sl_ring_desc_t *desc) {
  if (sl_device_backend(p->dev) != SL_BACKEND_CPU)
    return SL_ERR(SL_ERR_UNSUPPORTED, "sl_proxy_post_device_ring: on a GPU the device ring's producers are kernels "
                                      "(comm/ring.cuh)");
  return post_on(p, RING_DEVICE, (uint64_t *)p->dev_head, desc);
}

sl_status_t sl_proxy_wait_flag(sl_proxy_t *p, int src_rank, uint32_t flag_index, uint64_t epoch) {
  if (flag_index >= p->flag_slots)
    return SL_ERR(SL_ERR_RANGE, "sl_proxy_wait_flag: flag index %u >= %zu flag slots", flag_index, p->flag_slots);
  const uint64_t *flag = &p->flags_host[flag_index];
  if (sl_ring_load_acquire(flag) == epoch) return SL_OK;
  double deadline = now_ms() + (double)p->timeout_ms;
  unsigned spins = 0;
  for (;;) {
    if (sl_ring_load_acquire(flag) == epoch) return SL_OK;
    SL_CHECK(proxy_failure(p));
    if (now_ms() > deadline) {
      char name[96];
      return SL_ERR(SL_ERR_TIMEOUT,
                    "rank %d waited SL_TIMEOUT_MS=%ld ms for flag %u = epoch %llu from %s; the flag "
                    "holds %llu: that peer stalled, died, or did not post",
                    p->rank, p->timeout_ms, flag_index, (unsigned long long)epoch,
                    peer_name(p, src_rank, name, sizeof name), (unsigned long long)sl_ring_load_acquire(flag));
    }
    wait_step(&spins);
  }
}

sl_status_t sl_proxy_quiesce(sl_proxy_t *p) {
  /* A descriptor takes two flush rounds, each bounded by one timeout: a stuck destination
   * fails the proxy (naming the peer) before this bound expires. */
  double deadline = now_ms() + 2.0 * (double)p->timeout_ms;
  for (int r = 0; r < NUM_RINGS; r++) {
    sl_ring_header_t *ring = p->ring_host[r];
    unsigned spins = 0;
    for (;;) {
      /* Everything published is consumed (the next slot is not published) and done. */
      uint64_t done = sl_ring_load_acquire(&ring->done);
      uint64_t tail = sl_ring_load_acquire(&ring->tail);
      if (done == tail && !sl_ring_is_published(ring, tail)) break;
      SL_CHECK(proxy_failure(p));
      if (now_ms() > deadline)
        return SL_ERR(SL_ERR_TIMEOUT,
                      "sl_proxy_quiesce: the %s ring of rank %d did not drain within 2 x SL_TIMEOUT_MS=%ld "
                      "ms (%llu consumed, %llu completed)",
                      ring_names[r], p->rank, p->timeout_ms, (unsigned long long)tail, (unsigned long long)done);
      wait_step(&spins);
    }
  }
  return SL_OK;
}

#endif /* SLUICE_HAVE_UCX */
