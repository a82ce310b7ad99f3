/* `sluice bench moe`: node-level MoE dispatch and combine (comm/moe_ep.h) across the ranks
 * of each node, any rank count including 1, under mpirun.
 * Shapes: DeepSeek-V3 routing (hidden 7168, 256 experts, top-8) and Qwen3-30B-A3B (hidden
 * 2048, 128 experts, top-8); 128 tokens per rank (decode) and 4096 (prefill); dispatch
 * payload FP8 by default (--payload bf16|fp8|mxfp8|nvfp4), combine bf16; EP and TP
 * deployments (--deploy ep|tp|both). Uniform random routing.
 * Reported: dispatch and combine µs (the slowest rank's median), the bytes each moves
 * (tokens sent to peers + rows gathered; rows sent back + rows read by the sources), GB/s
 * and % of the device copy bandwidth measured in the same run, the path that ran, and on
 * the GPU the per-call time inside a CUDA graph. The CPU backend runs a quick version
 * (16 and 128 tokens) so CI can smoke-test it.
 *
 * --nodes-sim (under SL_RANKS_PER_NODE, e.g. -np 4 -x SL_RANKS_PER_NODE=2): the EP group is
 * every rank of the job (sl_moe_comm_create_world): shm inside a node, the UCX proxy across.
 * Prints the transport to every peer, then per shape dispatch and combine in both dispatch
 * modes (direct: one message per remote rank; node-agg: one per remote node, forwarded
 * inside it): µs (slowest rank), the payload bytes this rank put over the network per call
 * and GB/s of those, and the AUTO rule's pick; then the proxy's own put+flag latency and
 * bandwidth (sl_bench_proxy) as the ceiling measured in the same run. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_proxy.h"
#include "comm/moe_ep.h"
#include "kernels/sl_dtype.h"
#include "sl_bench.h"
#include "sl_cmd.h"

typedef struct {
  const char *name;
  int E, K, H;
} model_t;

static const model_t models[] = {{"dsv3", 256, 8, 7168}, {"qwen3-30b-a3b", 128, 8, 2048}};

typedef struct {
  sl_moe_comm_t *h;
  sl_moe_comm_dispatch_args_t da;
  sl_moe_comm_combine_args_t ca;
} ctx_t;

static sl_status_t run_dispatch(void *p, int iter, sl_stream_t *st) {
  ctx_t *c = p;
  return sl_moe_comm_dispatch(c->h, &c->da, st);
}
static sl_status_t run_both(void *p, int iter, sl_stream_t *st) {
  ctx_t *c = p;
  SL_CHECK(sl_moe_comm_dispatch(c->h, &c->da, st));
  return sl_moe_comm_combine(c->h, &c->ca, st);
}
/* Inter-node handles need a combine after every dispatch (it is their flow control), so the
 * dispatch figure is the mean time of the dispatch inside dispatch+combine iterations (the
 * host-driven GPU path synchronises inside dispatch). */
static double g_dispatch_us_acc;
static int g_dispatch_n;
static sl_status_t run_dispatch_then_combine_untimed(void *p, int iter, sl_stream_t *st) {
  ctx_t *c = p;
  double t0 = MPI_Wtime();
  SL_CHECK(sl_moe_comm_dispatch(c->h, &c->da, st));
  g_dispatch_us_acc += (MPI_Wtime() - t0) * 1e6;
  g_dispatch_n++;
  return sl_moe_comm_combine(c->h, &c->ca, st);
}

/* The slowest rank's figure (every rank calls it). */
static double group_max(double v, MPI_Comm comm) {
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

static void fill(uint16_t *x, size_t n, int32_t *ids, float *w, int T, int K, int E, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = sl_f32_to_bf16((float)(s >> 8) * (1.0f / 4194304.0f) - 2.0f);
  }
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e, dup;
      do {
        s = s * 1664525u + 1013904223u;
        e = (int)((s >> 8) % (uint32_t)E);
        dup = 0;
        for (int j = 0; j < k; j++)
          dup |= ids[(size_t)t * K + j] == e;
      } while (dup);
      ids[(size_t)t * K + k] = e;
      w[(size_t)t * K + k] = 1.0f / (float)K;
    }
}

static int parse_payload(const char *s) {
  static const char *names[] = {"bf16", "fp8", "mxfp8", "nvfp4"};
  for (int i = 0; i < SL_MOE_EP_NUM_PAYLOADS; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* Do ranks of the group share a GPU (the test machine: several ranks on one H200)? Their
 * contexts time-slice, so every flag round costs milliseconds: time fewer calls. */
static bool gpu_shared(const sl_bench_t *b, MPI_Comm group) {
  if (sl_device_backend(b->rt->dev) != SL_BACKEND_CUDA) return false;
  int n;
  MPI_Comm_size(group, &n);
  char *all = calloc((size_t)n, 32);
  if (!all) return false;
  MPI_Allgather(sl_device_info(b->rt->dev)->pci_bus_id, 32, MPI_CHAR, all, 32, MPI_CHAR, group);
  bool shared = false;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      shared |= strncmp(all + 32 * i, all + 32 * j, 32) == 0;
  free(all);
  return shared;
}

static sl_status_t bench_one(sl_bench_t *b, MPI_Comm group, const model_t *m, sl_moe_deploy_t deploy, int payload,
                             int T, int sm_budget, bool shared) {
  sl_device_t *dev = b->rt->dev;
  int rank, n;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &n);
  if (m->E % n) {
    if (b->rt->boot.rank == 0) printf("# %s: %d experts do not divide over %d ranks: skipped\n", m->name, m->E, n);
    return SL_OK;
  }
  const int E = m->E, K = m->K, H = m->H;
  /* Capacity: 3x the mean rows per expert plus 64 (uniform routing never overflows it at
   * these sizes), capped at dropless; the bench reports SL_ERR_CAPACITY if it ever did. */
  long senders = deploy == SL_MOE_DEPLOY_TP ? 1 : n;
  long mean = senders * T * K / E;
  long cap = 3 * mean + 64, dropless = senders * T;
  sl_moe_comm_config_t cfg = {.deploy = deploy,
                              .num_experts = E,
                              .top_k = K,
                              .hidden = H,
                              .payload = payload,
                              .nvfp4_global_scale = 448.0f * 6.0f / 4.0f,
                              .max_tokens = T,
                              .expert_capacity = (int)(cap < dropless ? cap : dropless),
                              .sm_budget = sm_budget};
  ctx_t c = {0};
  sl_status_t s = SL_OK;
  uint16_t *hx = malloc((size_t)T * H * 2);
  int32_t *hids = malloc((size_t)T * K * 4);
  float *hw = malloc((size_t)T * K * 4);
  void *x = NULL, *ids = NULL, *w = NULL, *out = NULL, *eout = NULL;
  if (!hx || !hids || !hw) {
    s = SL_ERR(SL_ERR_NOMEM, "bench inputs");
    goto done;
  }
  /* TP: the same tokens on every rank; EP: each rank its own */
  fill(hx, (size_t)T * H, hids, hw, T, K, E, 17u + (deploy == SL_MOE_DEPLOY_TP ? 0u : (uint32_t)rank * 7919u));
  SL_CHECK_GOTO(sl_moe_comm_create(dev, group, &cfg, &c.h), s, done);
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(c.h);
  const sl_moe_ep_layout_t *l = sl_moe_comm_layout(c.h);
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * H * 2, &x), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * K * 4, &ids), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * K * 4, &w), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * H * 2, &out), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * H * 2, &eout), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, x, hx, (size_t)T * H * 2, b->stream), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, ids, hids, (size_t)T * K * 4, b->stream), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, w, hw, (size_t)T * K * 4, b->stream), s, done);
  SL_CHECK_GOTO(sl_memset(dev, eout, 0x3c, rows * H * 2, b->stream), s, done); /* finite bf16 */
  SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, done);
  sl_moe_comm_path_t path = SL_MOE_COMM_PATH_AUTO;
  c.da =
      (sl_moe_comm_dispatch_args_t){.num_tokens = T, .x = x, .topk_ids = ids, .topk_weights = w, .path_taken = &path};
  c.ca =
      (sl_moe_comm_combine_args_t){.num_tokens = T, .topk_ids = ids, .topk_weights = w, .expert_out = eout, .out = out};
  /* Bytes: dispatch sends one entry per (token, destination rank) and gathers one row per
   * (token, k) on the receivers; combine sends one bf16 row per (token, k) and the source
   * reads K rows and writes one per token. This rank's share. */
  long sends = 0, pairs = 0;
  for (int t = 0; t < T; t++)
    for (int d = 0; d < n; d++) {
      int any = 0;
      for (int k = 0; k < K; k++) {
        int e = hids[(size_t)t * K + k];
        if (sl_moe_ep_goes_to(l, e, d)) any = 1, pairs++;
      }
      sends += any;
    }
  double row = (double)(l->codes_bytes + l->scales_bytes);
  double dbytes = (double)sends * (double)l->entry_bytes + (double)pairs * row;
  double cbytes = deploy == SL_MOE_DEPLOY_TP ? (double)pairs * H * 2 + (double)T * H * (4.0 * n + 2)
                                             : (double)pairs * H * 2 * 2 + (double)T * H * 2;
  MPI_Barrier(group);
  double d_us = 0, both_us = 0, g_us = -1, gboth_us = -1;
  SL_CHECK_GOTO(sl_bench_time(b, run_dispatch, &c, false, &d_us), s, done);
  SL_CHECK_GOTO(sl_moe_comm_check(c.h, b->stream), s, done);
  MPI_Barrier(group);
  SL_CHECK_GOTO(sl_bench_time(b, run_both, &c, false, &both_us), s, done);
  SL_CHECK_GOTO(sl_moe_comm_check(c.h, b->stream), s, done);
  if (sl_device_backend(dev) == SL_BACKEND_CUDA && !shared) { /* a graph replays 20 calls per timing */
    MPI_Barrier(group);
    SL_CHECK_GOTO(sl_bench_time(b, run_dispatch, &c, true, &g_us), s, done);
    MPI_Barrier(group);
    SL_CHECK_GOTO(sl_bench_time(b, run_both, &c, true, &gboth_us), s, done);
    SL_CHECK_GOTO(sl_moe_comm_check(c.h, b->stream), s, done);
  }
  d_us = group_max(d_us, group);
  both_us = group_max(both_us, group);
  g_us = group_max(g_us, group);
  gboth_us = group_max(gboth_us, group);
  double c_us = both_us - d_us, gc_us = g_us >= 0 ? gboth_us - g_us : -1;
  char shape[96], extra[96];
  snprintf(shape, sizeof shape, "%s %s%d T=%d", m->name, deploy == SL_MOE_DEPLOY_TP ? "tp" : "ep", n, T);
  snprintf(extra, sizeof extra, "payload %s, cap %d, %s",
           payload == 0   ? "bf16"
           : payload == 1 ? "fp8"
           : payload == 2 ? "mxfp8"
                          : "nvfp4",
           ex->capacity, n > 1 ? sl_moe_transport_name(sl_moe_comm_transport(c.h, (rank + 1) % n)) : "self");
  if (sl_bench_selected(b, "moe_ep_dispatch"))
    sl_bench_row(b, "moe_ep_dispatch", shape, sl_moe_comm_path_name(path), d_us, dbytes, g_us, extra);
  if (sl_bench_selected(b, "moe_ep_combine"))
    sl_bench_row(b, "moe_ep_combine", shape, sl_moe_comm_path_name(path), c_us, cbytes, gc_us,
                 "combine = "
                 "(dispatch+combine) - dispatch");
done:
  if (s != SL_OK && b->rt->boot.rank == 0) fprintf(stderr, "bench moe %s T=%d: %s\n", m->name, T, sl_last_error());
  sl_device_free(dev, x);
  sl_device_free(dev, ids);
  sl_device_free(dev, w);
  sl_device_free(dev, out);
  sl_device_free(dev, eout);
  sl_moe_comm_destroy(c.h);
  free(hx);
  free(hids);
  free(hw);
  return s;
}

/* --nodes-sim: one shape, one dispatch mode, over the whole job. */
static sl_status_t bench_net(sl_bench_t *b, const model_t *m, int payload, int T, sl_moe_net_mode_t mode) {
  sl_device_t *dev = b->rt->dev;
  const sl_boot_t *boot = &b->rt->boot;
  int rank = boot->rank, n = boot->size;
  if (m->E % n) {
    if (rank == 0) printf("# %s: %d experts do not divide over %d ranks: skipped\n", m->name, m->E, n);
    return SL_OK;
  }
  const int E = m->E, K = m->K, H = m->H;
  long mean = (long)n * T * K / E, cap = 3 * mean + 64, dropless = (long)n * T;
  sl_moe_comm_config_t cfg = {.deploy = SL_MOE_DEPLOY_EP,
                              .num_experts = E,
                              .top_k = K,
                              .hidden = H,
                              .payload = payload,
                              .nvfp4_global_scale = 448.0f * 6.0f / 4.0f,
                              .max_tokens = T,
                              .expert_capacity = (int)(cap < dropless ? cap : dropless)};
  ctx_t c = {0};
  sl_status_t s = SL_OK;
  uint16_t *hx = malloc((size_t)T * H * 2);
  int32_t *hids = malloc((size_t)T * K * 4);
  float *hw = malloc((size_t)T * K * 4);
  void *x = NULL, *ids = NULL, *w = NULL, *out = NULL, *eout = NULL;
  if (!hx || !hids || !hw) {
    s = SL_ERR(SL_ERR_NOMEM, "bench inputs");
    goto done;
  }
  fill(hx, (size_t)T * H, hids, hw, T, K, E, 17u + (uint32_t)rank * 7919u);
  SL_CHECK_GOTO(sl_moe_comm_create_world(dev, boot, &cfg, &c.h), s, done);
  static bool printed;
  if (rank == 0 && !printed) {
    printed = true;
    printf("# transport from rank 0 to each peer:");
    for (int r = 0; r < n; r++)
      printf(" %d:%s", r, sl_moe_transport_name(sl_moe_comm_transport(c.h, r)));
    printf("\n");
  }
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(c.h);
  size_t rows = (size_t)ex->num_local_experts * ex->capacity;
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * H * 2, &x), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * K * 4, &ids), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * K * 4, &w), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)T * H * 2, &out), s, done);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * H * 2, &eout), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, x, hx, (size_t)T * H * 2, b->stream), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, ids, hids, (size_t)T * K * 4, b->stream), s, done);
  SL_CHECK_GOTO(sl_memcpy(dev, w, hw, (size_t)T * K * 4, b->stream), s, done);
  SL_CHECK_GOTO(sl_memset(dev, eout, 0x3c, rows * H * 2, b->stream), s, done);
  SL_CHECK_GOTO(sl_stream_sync(dev, b->stream), s, done);
  sl_moe_net_mode_t taken = mode, auto_pick = SL_MOE_NET_AUTO;
  c.da = (sl_moe_comm_dispatch_args_t){
      .num_tokens = T, .x = x, .topk_ids = ids, .topk_weights = w, .net_mode = mode, .net_taken = &taken};
  c.ca =
      (sl_moe_comm_combine_args_t){.num_tokens = T, .topk_ids = ids, .topk_weights = w, .expert_out = eout, .out = out};
  /* one call to count the bytes over the network, and one AUTO call to show its pick */
  sl_moe_net_stats_t s0, s1;
  sl_moe_comm_net_stats(c.h, &s0);
  SL_CHECK_GOTO(run_both(&c, 0, b->stream), s, done);
  sl_moe_comm_net_stats(c.h, &s1);
  c.da.net_mode = SL_MOE_NET_AUTO;
  c.da.net_taken = &auto_pick;
  SL_CHECK_GOTO(run_both(&c, 0, b->stream), s, done);
  c.da.net_mode = mode;
  c.da.net_taken = &taken;
  double dnet = (double)(s1.dispatch_net_bytes - s0.dispatch_net_bytes);
  double cnet = (double)(s1.combine_net_bytes - s0.combine_net_bytes);
  double fwd = (double)(s1.forward_bytes - s0.forward_bytes);
  MPI_Barrier(boot->world);
  double d_us = 0, both_us = 0, ignored = 0;
  g_dispatch_us_acc = 0;
  g_dispatch_n = 0;
  SL_CHECK_GOTO(sl_bench_time(b, run_dispatch_then_combine_untimed, &c, false, &ignored), s, done);
  d_us = g_dispatch_n ? g_dispatch_us_acc / g_dispatch_n : 0;
  MPI_Barrier(boot->world);
  SL_CHECK_GOTO(sl_bench_time(b, run_both, &c, false, &both_us), s, done);
  d_us = group_max(d_us, boot->world);
  both_us = group_max(both_us, boot->world);
  double tot[3] = {dnet, cnet, fwd}, sum[3];
  MPI_Allreduce(tot, sum, 3, MPI_DOUBLE, MPI_SUM, boot->world);
  char shape[96], extra[160];
  snprintf(shape, sizeof shape, "%s ep%d/%dnodes T=%d", m->name, n, boot->num_nodes, T);
  snprintf(extra, sizeof extra,
           "%s; net bytes/call all ranks: dispatch %.0f KiB, combine %.0f KiB, fwd in-node %.0f KiB; auto picks %s",
           payload == 0   ? "bf16"
           : payload == 1 ? "fp8"
           : payload == 2 ? "mxfp8"
                          : "nvfp4",
           sum[0] / 1024, sum[1] / 1024, sum[2] / 1024, sl_moe_net_mode_name(auto_pick));
  if (sl_bench_selected(b, "moe_net_dispatch"))
    sl_bench_row(b, "moe_net_dispatch", shape, sl_moe_net_mode_name(taken), d_us, dnet, -1, extra);
  if (sl_bench_selected(b, "moe_net_combine"))
    sl_bench_row(b, "moe_net_combine", shape, sl_moe_net_mode_name(taken), both_us - d_us, cnet, -1,
                 "combine = (dispatch+combine) - dispatch; bytes: this rank's over the network");
done:
  if (s != SL_OK && rank == 0) fprintf(stderr, "bench moe --nodes-sim %s T=%d: %s\n", m->name, T, sl_last_error());
  sl_device_free(dev, x);
  sl_device_free(dev, ids);
  sl_device_free(dev, w);
  sl_device_free(dev, out);
  sl_device_free(dev, eout);
  sl_moe_comm_destroy(c.h);
  free(hx);
  free(hids);
  free(hw);
  return s;
}

static int bench_nodes_sim(sl_bench_t *b, int payload) {
  const sl_boot_t *boot = &b->rt->boot;
  if (boot->num_nodes < 2) {
    if (boot->rank == 0)
      fprintf(stderr, "sluice bench moe --nodes-sim: one node; run under SL_RANKS_PER_NODE (e.g. mpirun -np 4 -x "
                      "SL_RANKS_PER_NODE=2) or on several nodes\n");
    return 2;
  }
  if (boot->rank == 0) {
    printf("# inter-node MoE EP over %d ranks on %d nodes of %d; %s\n", boot->size, boot->num_nodes, boot->local_size,
           sl_device_backend(b->rt->dev) == SL_BACKEND_CUDA ? "GPU: host-driven (stream sync, host moves rows)"
                                                            : "CPU backend");
  }
  sl_bench_header(b, "MoE dispatch/combine across nodes (sluice bench moe --nodes-sim)");
  const int gpu_T[] = {128, 512}, cpu_T[] = {16, 128};
  const int *Ts = b->quick ? cpu_T : gpu_T;
  int rc = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof models[0] && rc == 0; mi++)
    for (int ti = 0; ti < 2 && rc == 0; ti++)
      for (int mode = SL_MOE_NET_DIRECT; mode <= SL_MOE_NET_NODE_AGG && rc == 0; mode++)
        if (bench_net(b, &models[mi], payload, Ts[ti], (sl_moe_net_mode_t)mode) != SL_OK) rc = 1;
  if (rc == 0 && (sl_bench_selected(b, "proxy_lat") || sl_bench_selected(b, "proxy_bw"))) {
    sl_bench_header(b, "inter-node proxy put+flag (sl_bench_proxy): the ceiling of the rows above");
    if (sl_bench_proxy(b) != SL_OK) {
      if (boot->rank == 0) fprintf(stderr, "bench proxy: %s\n", sl_last_error());
      rc = 1;
    }
  }
  sl_bench_finish(b);
  return rc;
}

int sl_cmd_bench_moe(sl_runtime_t *rt, int argc, char **argv) {
  sl_bench_t b;
  if (sl_bench_init(rt, &argc, argv, &b) != SL_OK) {
    fprintf(stderr, "bench init: %s\n", sl_last_error());
    return 1;
  }
  int payload = SL_MOE_EP_PAYLOAD_FP8, sm_budget = 0, want_ep = 1, want_tp = 1, nodes_sim = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--payload") == 0 && i + 1 < argc) {
      payload = parse_payload(argv[++i]);
      if (payload < 0) {
        fprintf(stderr, "--payload: bf16, fp8, mxfp8 or nvfp4\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--deploy") == 0 && i + 1 < argc) {
      const char *d = argv[++i];
      want_ep = !strcmp(d, "ep") || !strcmp(d, "both");
      want_tp = !strcmp(d, "tp") || !strcmp(d, "both");
      if (!want_ep && !want_tp) {
        fprintf(stderr, "--deploy: ep, tp or both\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--sm-budget") == 0 && i + 1 < argc) {
      sm_budget = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--nodes-sim") == 0) {
      nodes_sim = 1;
    } else {
      fprintf(stderr,
              "sluice bench moe: unknown option %s (common: --iters N --json FILE --quick --only OP; "
              "own: --payload P --deploy ep|tp|both --sm-budget N --nodes-sim)\n",
              argv[i]);
      return 2;
    }
  }
  if (nodes_sim) return bench_nodes_sim(&b, payload);
  MPI_Comm group = rt->boot.node_comm;
  int n;
  MPI_Comm_size(group, &n);
  if (rt->boot.num_nodes > 1 && rt->boot.rank == 0)
    printf("# %d nodes: each node's %d ranks form one group (the inter-node transport is not part of this "
           "benchmark: add --nodes-sim); rows are node 0's\n",
           rt->boot.num_nodes, n);
  bool shared = gpu_shared(&b, group);
  if (shared) {
    if (b.iters > 10) b.iters = 10;
    if (b.warmup > 2) b.warmup = 2;
    if (rt->boot.rank == 0)
      printf("# ranks share a GPU: contexts time-slice, so times show correctness and overheads only; "
             "%d iterations, no graph timing\n",
             b.iters);
  }
  sl_bench_header(&b, "MoE dispatch/combine across the ranks of a node (sluice bench moe)");
  const int gpu_T[] = {128, 4096}, cpu_T[] = {16, 128};
  const int *Ts = b.quick ? cpu_T : gpu_T;
  int rc = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof models[0] && rc == 0; mi++)
    for (int ti = 0; ti < 2 && rc == 0; ti++)
      for (int dep = 0; dep < 2 && rc == 0; dep++) {
        if ((dep == 0 && !want_ep) || (dep == 1 && !want_tp)) continue;
        if (bench_one(&b, group, &models[mi], dep ? SL_MOE_DEPLOY_TP : SL_MOE_DEPLOY_EP, payload, Ts[ti], sm_budget,
                      shared) != SL_OK)
          rc = 1;
      }
  sl_bench_finish(&b);
  return rc;
}
