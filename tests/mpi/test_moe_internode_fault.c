/* Inter-node MoE faults on the CPU backend (simulated nodes, UCX over TCP loopback). The
 * victim is the last rank (on the last node, remote for node 0):
 *   stall:        sleeps 3x SL_TIMEOUT_MS before a dispatch (mid-sequence: after healthy calls);
 *   skip_combine: dispatches but never combines;
 *   pause:        its proxy stops sending in the middle of a dispatch (sl_proxy_set_paused:
 *                 the same-node messages go out, the network ones do not), then it waits;
 *   every other rank must fail with SL_ERR_TIMEOUT naming it ("for rank N:") with its node
 *   and host, within 2x the timeout (plus slack), in both dispatch modes; nobody hangs.
 *   (pause: the ranks of the other node must name it; the victim's node-mates time out
 *   naming whoever they waited on, since the victim's node-mates depend on the other node.)
 *   kill:  (kill_driver.cmake, -np 3, one rank per node) the victim SIGKILLs itself in the
 *          middle of a call sequence: the job must end promptly;
 *   sweep: the next start creates and destroys a handle. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/moe_comm_impl.h"
#include "comm/moe_ep.h"
#include "comm/moe_internode.h"
#include "kernels/sl_dtype.h"
#include "runtime/sluice.h"

enum { EPR = 2, HD = 128, T = 8 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* every token has one expert on every rank: everyone waits on everyone */
static sl_status_t call(sl_moe_comm_t *h, int skip_combine, sl_moe_net_mode_t mode) {
  int size = sl_moe_comm_size(h);
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  static uint16_t x[T * HD] __attribute__((aligned(16))), out[T * HD] __attribute__((aligned(16)));
  int32_t ids[T * 16];
  float w[T * 16];
  for (int i = 0; i < T * HD; i++)
    x[i] = sl_f32_to_bf16((float)(i % 13) * 0.25f);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < size; k++) {
      ids[t * size + k] = k * EPR + t % EPR;
      w[t * size + k] = 0.5f;
    }
  sl_moe_comm_dispatch_args_t d = {.num_tokens = T, .x = x, .topk_ids = ids, .topk_weights = w, .net_mode = mode};
  sl_status_t s = sl_moe_comm_dispatch(h, &d, NULL);
  if (s != SL_OK || skip_combine) return s;
  sl_moe_comm_combine_args_t c = {
      .num_tokens = T, .topk_ids = ids, .topk_weights = w, .expert_out = ex->expert_x, .out = out};
  return sl_moe_comm_combine(h, &c, NULL);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  setenv("UCX_TLS", "tcp", 0);
  const char *mode = argc > 1 ? argv[1] : "";
  sl_moe_net_mode_t net = argc > 2 && !strcmp(argv[2], "agg") ? SL_MOE_NET_NODE_AGG : SL_MOE_NET_DIRECT;
  int kill_mode = !strcmp(mode, "kill"), sweep = !strcmp(mode, "sweep");
  if (kill_mode || sweep) setenv("SL_RANKS_PER_NODE", "1", 0);
  sl_runtime_t rt;
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  int rank = rt.boot.rank, size = rt.boot.size;
  if (rt.boot.num_nodes < 2 || size > 16) {
    printf("SKIPPED: needs 2+ (simulated) nodes and at most 16 ranks\n");
    sl_runtime_finalize(&rt);
    return 77;
  }
  sl_moe_comm_config_t cfg = {
      .num_experts = EPR * size, .top_k = size, .hidden = HD, .payload = SL_MOE_EP_PAYLOAD_BF16, .max_tokens = T};
  sl_moe_comm_t *h = NULL;
  if (sl_moe_comm_create_world(rt.dev, &rt.boot, &cfg, &h) != SL_OK) {
    fprintf(stderr, "rank %d: create failed: %s\n", rank, sl_last_error());
    return 1;
  }
  const int victim = size - 1;
  int ok = 1, rc = 0;
  if (kill_mode) {
    printf("SLUICE_PID %ld\n", (long)getpid());
    fflush(stdout);
    MPI_Barrier(rt.boot.world);
    for (int it = 0;; it++) {
      if (it == 20 && rank == victim) raise(SIGKILL);
      if (call(h, 0, it % 2 ? SL_MOE_NET_NODE_AGG : SL_MOE_NET_DIRECT) != SL_OK) {
        fprintf(stderr, "rank %d: MoE call failed: %s\n", rank, sl_last_error());
        rc = 3;
        break;
      }
    }
    sl_moe_comm_destroy(h);
    sl_runtime_finalize(&rt);
    return rc;
  }
  if (sweep) {
    sl_moe_comm_destroy(h);
    sl_runtime_finalize(&rt);
    return 0;
  }
  int stall = !strcmp(mode, "stall"), skip_c = !strcmp(mode, "skip_combine"), pause = !strcmp(mode, "pause");
  if (!stall && !skip_c && !pause) {
    fprintf(stderr, "usage: %s stall|skip_combine|pause|kill|sweep [direct|agg]\n", argv[0]);
    return 2;
  }
  long timeout_ms = rt.config.timeout_ms;
  for (int i = 0; i < 2 && ok; i++)
    if (call(h, 0, net) != SL_OK) {
      fprintf(stderr, "rank %d: healthy call %d failed: %s\n", rank, i, sl_last_error());
      ok = 0;
    }
  double t0 = now_s();
  if (ok && rank == victim) {
    if (stall) {
      usleep((useconds_t)(3 * timeout_ms * 1000));
      sl_status_t s = call(h, 0, net);
      printf("rank %d (stalled) returned %s after %.2f s\n", rank, sl_status_str(s), now_s() - t0);
    } else if (pause) {
      /* drain, pause, and let a proxy round already under way end (pause is checked
       * between rounds; a round in flight would still take the next descriptors) */
      if (sl_proxy_quiesce(sl_moe_net_proxy(h->net)) != SL_OK) ok = 0;
      sl_proxy_set_paused(sl_moe_net_proxy(h->net), true);
      usleep(200000);
      sl_status_t s = call(h, 0, net);
      printf("rank %d (network paused) returned %s after %.2f s\n", rank, sl_status_str(s), now_s() - t0);
      sl_proxy_set_paused(sl_moe_net_proxy(h->net), false);
      if (s == SL_OK) {
        fprintf(stderr, "rank %d: a call with its network paused succeeded\n", rank);
        ok = 0;
      }
    } else if (call(h, 1, net) != SL_OK) {
      fprintf(stderr, "rank %d: its dispatch failed: %s\n", rank, sl_last_error());
      ok = 0;
    }
  } else if (ok) {
    sl_status_t s = call(h, 0, net);
    double took = now_s() - t0;
    char want[32], node[32];
    snprintf(want, sizeof want, "for rank %d:", victim);
    snprintf(node, sizeof node, "node %d, host", rt.boot.num_nodes - 1);
    int mate = rt.boot.node == rt.boot.num_nodes - 1; /* on the victim's node */
    if (pause && mate && s == SL_ERR_TIMEOUT) {
      printf("rank %d (node-mate of the victim): SL_ERR_TIMEOUT after %.2f s: %s\n", rank, took, sl_last_error());
    } else if (s != SL_ERR_TIMEOUT || !strstr(sl_last_error(), want) || !strstr(sl_last_error(), node)) {
      fprintf(stderr, "rank %d: want SL_ERR_TIMEOUT naming rank %d (%s), got %s: %s\n", rank, victim, node,
              sl_status_str(s), sl_last_error());
      ok = 0;
    } else if (took > 2.0 * timeout_ms / 1000.0 + 2.0) {
      fprintf(stderr, "rank %d: the timeout took %.2f s (SL_TIMEOUT_MS=%ld)\n", rank, took, timeout_ms);
      ok = 0;
    } else {
      printf("rank %d: SL_ERR_TIMEOUT naming rank %d after %.2f s, as wanted: %s\n", rank, victim, took,
             sl_last_error());
    }
    if (sl_moe_comm_dispatch(h, &(sl_moe_comm_dispatch_args_t){0}, NULL) != SL_ERR_PEER) {
      fprintf(stderr, "rank %d: a failed handle must refuse further calls\n", rank);
      ok = 0;
    }
  }
  fflush(stdout);
  MPI_Barrier(rt.boot.world);
  sl_moe_comm_destroy(h);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, rt.boot.world);
  sl_runtime_finalize(&rt);
  return all ? 0 : 1;
}
