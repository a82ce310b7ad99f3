/* MoE EP dispatch/combine across nodes: shared memory inside a node, the UCX proxy between
 * nodes, direct or node-aggregated dispatch. Protocol, memory map and the GPU's host-driven
 * mode: comm/moe_internode.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_comm_impl.h"
#include "comm/moe_internode.h"
#include "runtime/sl_config.h"
#include "runtime/sl_log.h"

#define NET_MODE_FWD 3 /* header mode of a message a forwarder copied */

typedef struct {
  uint64_t count;                      /* entries */
  uint64_t mode;                       /* SL_MOE_NET_DIRECT / SL_MOE_NET_NODE_AGG / NET_MODE_FWD */
  uint32_t base[SL_MOE_NET_MAX_RANKS]; /* first combine row of each responder at the source */
} net_hdr_t;

struct sl_moe_net {
  int n, rank, node, nnodes, L, lrank;
  int node_of[SL_MOE_NET_MAX_RANKS], local_of[SL_MOE_NET_MAX_RANKS];
  char host[SL_MOE_NET_MAX_RANKS][64];
  sl_device_t *hostdev; /* CUDA: a CPU device owning the host-side shm and window */
  sl_device_t *devp;    /* the handle's device (frees the pinned mirrors) */
  sl_proxy_t *proxy;
  unsigned char *win;
  uint64_t *pflags;
  sl_symm_t *symm;
  unsigned char *sp[SL_SYMM_MAX_RANKS]; /* node shm by local rank */
  int kr;
  long long hdr, msg, rowb;
  long long w_recv, w_comb, w_send, w_csend, w_bytes;
  long long s_dflag, s_cflag, s_recv, s_comb, s_bytes;
  /* per call, host */
  int T;
  int *pair_off;          /* [M*K] combine row (at this source) of (t, k); -1: invalid id */
  int *rx_n, *rx_base;    /* [n] rows received from sender s, and s's base for this rank */
  int *rx_row;            /* [n][M*Kr] expert row of each received pair, -1 dropped */
  unsigned char *staging; /* [M, token_bytes] quantized tokens */
  float *acc;
  /* host mirrors (CUDA host-driven; on the CPU backend they alias the real buffers) */
  unsigned char *hx, *hids, *hw, *hout, *hexp_out, *hex_x, *hex_s;
  int *hex_counts;
  float *hex_w;
  sl_moe_net_stats_t stats;
};

const char *sl_moe_net_mode_name(sl_moe_net_mode_t m) {
  switch (m) {
  case SL_MOE_NET_AUTO: return "auto";
  case SL_MOE_NET_DIRECT: return "direct";
  case SL_MOE_NET_NODE_AGG: return "node-agg";
  }
  return "?";
}

sl_moe_transport_t sl_moe_net_transport(const sl_moe_net_t *n, int peer) {
  if (peer < 0 || peer >= n->n || peer == n->rank) return SL_MOE_TRANSPORT_SELF;
  return n->node_of[peer] != n->node ? SL_MOE_TRANSPORT_PROXY : SL_MOE_TRANSPORT_SHM;
}

void sl_moe_net_stats(const sl_moe_net_t *n, sl_moe_net_stats_t *out) {
  *out = n->stats;
}
sl_proxy_t *sl_moe_net_proxy(const sl_moe_net_t *n) {
  return n->proxy;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static int is_cuda(const sl_moe_comm_t *h) {
  return h->backend == SL_BACKEND_CUDA;
}

sl_status_t sl_moe_net_create(sl_moe_comm_t *h, const sl_boot_t *boot) {
  const sl_moe_ep_layout_t *l = &h->l;
  sl_moe_net_t *n = calloc(1, sizeof *n);
  if (!n) return SL_ERR(SL_ERR_NOMEM, "moe inter-node state");
  h->net = n;
  n->devp = h->dev;
  n->n = boot->size;
  n->rank = boot->rank;
  n->node = boot->node;
  n->nnodes = boot->num_nodes;
  n->L = boot->local_size;
  n->lrank = boot->local_rank;
  int mine[2] = {boot->node, boot->local_rank}, all[2 * SL_MOE_NET_MAX_RANKS];
  SL_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, boot->world));
  char hostbuf[64];
  snprintf(hostbuf, sizeof hostbuf, "%s", boot->hostname);
  SL_MPI_CHECK(MPI_Allgather(hostbuf, 64, MPI_CHAR, n->host, 64, MPI_CHAR, boot->world));
  for (int r = 0; r < n->n; r++) {
    n->node_of[r] = all[2 * r];
    n->local_of[r] = all[2 * r + 1];
    n->host[r][63] = 0;
  }
  int lmin = n->L, lmax = n->L;
  SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lmin, 1, MPI_INT, MPI_MIN, boot->world));
  SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lmax, 1, MPI_INT, MPI_MAX, boot->world));
  if (lmin != lmax)
    return SL_ERR(SL_ERR_INVALID,
                  "moe comm: nodes hold %d to %d ranks; the inter-node path needs the same number of ranks on every "
                  "node (its forwarder of a sender is the rank with the sender's local index)",
                  lmin, lmax);
  /* ranks of a node must be consecutive world ranks (boot numbers nodes by lowest rank) */
  for (int r = 0; r < n->n; r++)
    if (n->node_of[r] * n->L + n->local_of[r] != r)
      return SL_ERR(SL_ERR_INVALID,
                    "moe comm: rank %d is local rank %d of node %d; the inter-node path needs nodes of consecutive "
                    "ranks (mpirun --map-by node breaks this: use the default by-slot mapping)",
                    r, n->local_of[r], n->node_of[r]);
  n->kr = l->top_k < l->experts_per_rank ? l->top_k : l->experts_per_rank;
  long long M = l->max_tokens, K = l->top_k, a = SL_MOE_EP_ALIGN;
  n->hdr = sl_moe_ep_align((long long)sizeof(net_hdr_t), 64);
  n->msg = sl_moe_ep_align(n->hdr + M * l->entry_bytes, a);
  n->rowb = 2LL * l->hidden;
  long long off = 0;
  n->w_recv = off;
  off += n->n * n->msg;
  n->w_comb = off;
  off = sl_moe_ep_align(off + M * K * n->rowb, a);
  n->w_send = off;
  off += n->n * n->msg;
  n->w_csend = off;
  off = sl_moe_ep_align(off + (long long)n->n * M * n->kr * n->rowb, a);
  n->w_bytes = off;
  off = 0;
  n->s_dflag = off;
  n->s_cflag = off + 8LL * SL_MOE_NET_MAX_RANKS;
  off = sl_moe_ep_align(16LL * SL_MOE_NET_MAX_RANKS, a);
  n->s_recv = off;
  off += n->n * n->msg;
  n->s_comb = off;
  off = sl_moe_ep_align(off + M * K * n->rowb, a);
  n->s_bytes = off;

  sl_device_t *hd = h->dev;
  if (is_cuda(h)) { /* host-driven: windows and shm in host memory */
    SL_CHECK(sl_device_open(SL_DEVICE_CPU, boot->local_rank, &n->hostdev));
    hd = n->hostdev;
  }
  SL_CHECK(sl_proxy_create(boot, hd, (size_t)n->w_bytes, 2 * (size_t)n->n, NULL, &n->proxy));
  sl_proxy_window(n->proxy, (void **)&n->win, NULL);
  sl_proxy_flags(n->proxy, &n->pflags, NULL);
  if (!n->win)
    return SL_ERR(SL_ERR_UNSUPPORTED, "moe comm: the proxy window has no host mapping (direct mode); the inter-node "
                                      "MoE path is host-driven and needs a staged window");
  SL_CHECK(sl_symm_create(hd, boot->node_comm, (size_t)n->s_bytes, "moe-net", &n->symm));
  for (int q = 0; q < n->L; q++)
    n->sp[q] = sl_symm_peer(n->symm, q);

  size_t rows = (size_t)l->experts_per_rank * (size_t)l->capacity;
  n->pair_off = malloc((size_t)M * K * sizeof(int));
  n->rx_n = calloc((size_t)n->n, sizeof(int));
  n->rx_base = calloc((size_t)n->n, sizeof(int));
  n->rx_row = malloc((size_t)n->n * M * n->kr * sizeof(int));
  n->staging = malloc((size_t)(M * l->token_bytes));
  n->acc = malloc((size_t)l->hidden * sizeof(float));
  if (!n->pair_off || !n->rx_n || !n->rx_base || !n->rx_row || !n->staging || !n->acc)
    return SL_ERR(SL_ERR_NOMEM, "moe inter-node work buffers");
  if (is_cuda(h)) { /* pinned, so the host-driven copies run at PCIe speed */
    struct {
      void **p;
      size_t bytes;
    } m[] = {{(void **)&n->hx, (size_t)(M * n->rowb)},
             {(void **)&n->hids, (size_t)(M * K * 4)},
             {(void **)&n->hw, (size_t)(M * K * 4)},
             {(void **)&n->hout, (size_t)(M * n->rowb)},
             {(void **)&n->hexp_out, rows * (size_t)n->rowb},
             {(void **)&n->hex_x, rows * (size_t)l->codes_bytes},
             {(void **)&n->hex_s, rows * (size_t)(l->scales_bytes ? l->scales_bytes : 16)},
             {(void **)&n->hex_counts, (size_t)l->experts_per_rank * 4},
             {(void **)&n->hex_w, rows * 4}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
      void *dev_alias = NULL;
      SL_CHECK(sl_host_alloc_mapped(h->dev, m[i].bytes, m[i].p, &dev_alias));
    }
  } else {
    n->hex_x = h->experts.expert_x;
    n->hex_s = h->experts.expert_scales;
    n->hex_counts = h->experts.expert_counts;
    n->hex_w = h->experts.expert_weights;
  }
  if (n->rank == 0)
    SL_LOG_INFO("moe comm: inter-node EP over %d ranks on %d nodes of %d, proxy window %.1f MiB, node shm %.1f MiB, "
                "%s",
                n->n, n->nnodes, n->L, (double)n->w_bytes / 1048576.0, (double)n->s_bytes / 1048576.0,
                is_cuda(h) ? "host-driven (GPU)" : "CPU backend");
  return SL_OK;
}

void sl_moe_net_destroy(sl_moe_net_t *n) {
  if (!n) return;
  sl_status_t s = sl_proxy_destroy(n->proxy);
  if (s != SL_OK) SL_LOG_WARN("moe comm: proxy shutdown: %s", sl_last_error());
  sl_symm_destroy(n->symm);
  if (n->hostdev) {
    void *m[] = {n->hx, n->hids, n->hw, n->hout, n->hexp_out, n->hex_x, n->hex_s, n->hex_counts, n->hex_w};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
      if (m[i]) sl_host_free_mapped(n->devp, m[i]);
    sl_device_close(n->hostdev);
  }
  free(n->pair_off);
  free(n->rx_n);
  free(n->rx_base);
  free(n->rx_row);
  free(n->staging);
  free(n->acc);
  free(n);
}

/* ---- waits ------------------------------------------------------------------------------- */

/* Wait until *a == epoch (returns 0) or b && *b == epoch (returns 1), bounded; the error
 * names `peer` with its node and host, and `via` (a forwarder) when there is one. */
static sl_status_t wait_either(sl_moe_comm_t *h, const uint64_t *a, const uint64_t *b, unsigned long long epoch,
                               int peer, int via, const char *what, int *which) {
  sl_moe_net_t *n = h->net;
  unsigned long long start = sl_flag_now_ns(), limit = (unsigned long long)h->timeout_ms * 1000000ull;
  for (unsigned spins = 0;; spins++) {
    if (sl_flag_load_acquire((const sl_flag_t *)a) == epoch) {
      if (which) *which = 0;
      return SL_OK;
    }
    if (b && sl_flag_load_acquire((const sl_flag_t *)b) == epoch) {
      if (which) *which = 1;
      return SL_OK;
    }
    if ((spins & 63u) == 63u) {
      const char *pe = sl_proxy_error(n->proxy);
      if (pe && pe[0]) {
        h->failed = SL_ERR_PEER;
        return SL_ERR(SL_ERR_PEER, "moe comm: rank %d: the inter-node proxy failed while waiting for rank %d: %s",
                      n->rank, peer, pe);
      }
      unsigned long long now = sl_flag_now_ns();
      if (now - start >= limit) {
        char v[128] = "", w[96];
        snprintf(w, sizeof w, "%s", what);
        if (via >= 0 && via != peer && via != n->rank) {
          /* the forwarder sends its own message to this rank (same node) before it forwards:
           * if that has not come either, the forwarder is the one behind */
          const uint64_t *vf = (const uint64_t *)(n->sp[n->lrank] + n->s_dflag + 8LL * via);
          if (sl_flag_load_acquire((const sl_flag_t *)vf) != epoch) {
            snprintf(w, sizeof w, "forwarding of rank %d's %s (rank %d did not start this call)", peer, what, via);
            peer = via;
          } else {
            snprintf(v, sizeof v, " (forwarder rank %d, node %d, host %s, is in this call)", via, n->node_of[via],
                     n->host[via]);
          }
        }
        h->failed = SL_ERR_TIMEOUT;
        return SL_ERR(SL_ERR_TIMEOUT,
                      "moe comm: rank %d (node %d) waited %.0f ms (SL_TIMEOUT_MS=%ld) for rank %d: %s of call %llu "
                      "never came%s. Rank %d (node %d, host %s, reached over %s) stalled, died, or skipped a "
                      "dispatch/combine; this handle is unusable now",
                      n->rank, n->node, (double)(now - start) / 1e6, h->timeout_ms, peer, w, epoch, v, peer,
                      n->node_of[peer], n->host[peer], sl_moe_transport_name(sl_moe_net_transport(n, peer)));
      }
      sched_yield();
    }
  }
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static int expert_rank(const sl_moe_ep_layout_t *l, int e) {
  return e / l->experts_per_rank;
}

/* Write the entries of this rank's tokens for destination `d` (a rank; or, node_agg, every
 * rank of node d) into msg; returns the entry count. */
static int build_msg(sl_moe_comm_t *h, unsigned char *msg, const int32_t *ids, const float *w, int d, int node_agg,
                     int mode) {
  sl_moe_net_t *n = h->net;
  const sl_moe_ep_layout_t *l = &h->l;
  int cnt = 0;
  for (int t = 0; t < n->T; t++) {
    sl_moe_ep_meta_t m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < l->top_k; k++) {
      int e = ids[(long long)t * l->top_k + k];
      if (!sl_moe_ep_valid_expert(l, e)) continue;
      int q = expert_rank(l, e);
      if (node_agg ? n->node_of[q] != d : q != d) continue;
      m.entry[m.nexp] = (k << 16) | e;
      m.weight[m.nexp] = w[(long long)t * l->top_k + k];
      m.nexp++;
    }
    if (!m.nexp) continue;
    m.token = t;
    unsigned char *entry = msg + n->hdr + (long long)cnt * l->entry_bytes;
    memcpy(entry, n->staging + (long long)t * l->token_bytes, (size_t)l->token_bytes);
    memcpy(entry + l->token_bytes, &m, sizeof m);
    cnt++;
  }
  net_hdr_t *hd = (net_hdr_t *)msg;
  hd->count = (uint64_t)cnt;
  hd->mode = (uint64_t)mode;
  return cnt;
}

static sl_status_t net_dispatch_host(sl_moe_comm_t *h, const unsigned short *x, const int32_t *ids, const float *w,
                                     sl_moe_net_mode_t want, sl_moe_net_mode_t *taken) {
  sl_moe_net_t *n = h->net;
  const sl_moe_ep_layout_t *l = &h->l;
  unsigned long long epoch = h->epoch;
  int K = l->top_k, T = n->T;
  sl_status_t err = SL_OK;
  /* route: pair counts per responder rank -> base; combine row of every pair */
  uint32_t base[SL_MOE_NET_MAX_RANKS];
  int cnt[SL_MOE_NET_MAX_RANKS] = {0};
  long long rank_entries = 0, node_entries = 0;
  for (int t = 0; t < T; t++) {
    int seen_r[SL_MOE_NET_MAX_RANKS] = {0}, seen_n[SL_MOE_NET_MAX_RANKS] = {0};
    for (int k = 0; k < K; k++) {
      int e = ids[(long long)t * K + k];
      if (!sl_moe_ep_valid_expert(l, e)) {
        if (err == SL_OK)
          err = SL_ERR(SL_ERR_RANGE,
                       "moe dispatch: rank %d token %d k %d has expert id %d outside [0, %d); the pair is skipped",
                       n->rank, t, k, e, l->num_experts);
        continue;
      }
      int q = expert_rank(l, e);
      cnt[q]++;
      if (n->node_of[q] != n->node) {
        rank_entries += !seen_r[q];
        node_entries += !seen_n[n->node_of[q]];
        seen_r[q] = seen_n[n->node_of[q]] = 1;
      }
    }
  }
  for (int q = 0, acc = 0; q < n->n; q++) {
    base[q] = (uint32_t)acc;
    acc += cnt[q];
  }
  for (int q = 0; q < n->n; q++)
    cnt[q] = 0;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e = ids[(long long)t * K + k];
      if (!sl_moe_ep_valid_expert(l, e)) {
        n->pair_off[t * K + k] = -1;
        continue;
      }
      int q = expert_rank(l, e);
      n->pair_off[t * K + k] = (int)base[q] + cnt[q]++;
    }
  sl_moe_net_mode_t mode = want;
  if (mode == SL_MOE_NET_AUTO)
    mode = T >= SL_MOE_NET_AGG_MIN_TOKENS && node_entries * 4 <= rank_entries * 3 ? SL_MOE_NET_NODE_AGG
                                                                                  : SL_MOE_NET_DIRECT;
  if (n->nnodes == 1) mode = SL_MOE_NET_DIRECT;
  if (taken) *taken = mode;
  if (mode == SL_MOE_NET_DIRECT)
    n->stats.calls_direct++;
  else
    n->stats.calls_node_agg++;
  /* quantize once */
  for (int t = 0; t < T; t++) {
    unsigned char *stg = n->staging + (long long)t * l->token_bytes;
    const unsigned short *row = x + (long long)t * l->hidden;
    if (l->payload == SL_MOE_EP_PAYLOAD_BF16) {
      memcpy(stg, row, (size_t)l->codes_bytes);
    } else {
      int nb = l->hidden / sl_moe_ep_block_elems(l->payload);
      for (int b = 0; b < nb; b++)
        sl_moe_ep_quant_token_block(l, row, b, h->experts.global_scale, stg);
    }
  }
  /* send: remote first (network latency overlaps the local copies) */
  for (int d = 0; d < n->n; d++) {
    if (n->node_of[d] == n->node) continue;
    /* node-aggregated: only to this rank's forwarder on d's node (same local rank) */
    if (mode == SL_MOE_NET_NODE_AGG && n->local_of[d] != n->lrank) continue;
    int dst = d;
    unsigned char *msg = n->win + n->w_send + (long long)dst * n->msg;
    int c =
        build_msg(h, msg, ids, w, mode == SL_MOE_NET_NODE_AGG ? n->node_of[d] : d, mode == SL_MOE_NET_NODE_AGG, mode);
    memcpy(((net_hdr_t *)msg)->base, base, sizeof base);
    size_t bytes = (size_t)(n->hdr + (long long)c * l->entry_bytes);
    SL_CHECK(sl_proxy_post_put(n->proxy, dst, (size_t)(n->w_recv + (long long)n->rank * n->msg),
                               (size_t)(n->w_send + (long long)dst * n->msg), bytes, (uint32_t)n->rank, epoch));
    n->stats.dispatch_net_bytes += bytes;
    n->stats.net_msgs++;
  }
  for (int lq = 0; lq < n->L; lq++) {
    int d = n->node * n->L + lq;
    unsigned char *msg = n->sp[lq] + n->s_recv + (long long)n->rank * n->msg;
    build_msg(h, msg, ids, w, d, 0, SL_MOE_NET_DIRECT);
    memcpy(((net_hdr_t *)msg)->base, base, sizeof base);
    sl_flag_store_release((sl_flag_t *)(n->sp[lq] + n->s_dflag + 8LL * n->rank), epoch);
  }
  /* forward: remote senders whose forwarder this rank is */
  for (int s = 0; s < n->n; s++) {
    if (n->node_of[s] == n->node || n->local_of[s] != n->lrank) continue;
    int which = 0;
    SL_CHECK(wait_either(h, &n->pflags[s], NULL, epoch, s, -1, "dispatch message", &which));
    const unsigned char *msg = n->win + n->w_recv + (long long)s * n->msg;
    const net_hdr_t *hd = (const net_hdr_t *)msg;
    if (hd->mode != SL_MOE_NET_NODE_AGG) continue;
    for (int lq = 0; lq < n->L; lq++) {
      int q = n->node * n->L + lq;
      unsigned char *dmsg = n->sp[lq] + n->s_recv + (long long)s * n->msg;
      int c = 0;
      for (uint64_t i = 0; i < hd->count; i++) {
        const unsigned char *entry = msg + n->hdr + (long long)i * l->entry_bytes;
        sl_moe_ep_meta_t m, f;
        memcpy(&m, entry + l->token_bytes, sizeof m);
        memset(&f, 0, sizeof f);
        f.token = m.token;
        for (int j = 0; j < m.nexp && j < SL_MOE_EP_MAX_TOPK; j++)
          if (expert_rank(l, m.entry[j] & 0xffff) == q) {
            f.entry[f.nexp] = m.entry[j];
            f.weight[f.nexp++] = m.weight[j];
          }
        if (!f.nexp) continue;
        unsigned char *dentry = dmsg + n->hdr + (long long)c * l->entry_bytes;
        memcpy(dentry, entry, (size_t)l->token_bytes);
        memcpy(dentry + l->token_bytes, &f, sizeof f);
        c++;
        if (q != n->rank) n->stats.forward_bytes += (unsigned long long)l->entry_bytes;
      }
      net_hdr_t *dh = (net_hdr_t *)dmsg;
      dh->count = (uint64_t)c;
      dh->mode = NET_MODE_FWD;
      memcpy(dh->base, hd->base, sizeof dh->base);
      sl_flag_store_release((sl_flag_t *)(n->sp[lq] + n->s_dflag + 8LL * s), epoch);
    }
  }
  /* gather, sender by sender */
  unsigned char *own = n->sp[n->lrank];
  memset(n->hex_counts, 0, (size_t)l->experts_per_rank * 4);
  long long mkr = (long long)l->max_tokens * n->kr;
  for (int s = 0; s < n->n; s++) {
    const unsigned char *msg = NULL;
    const uint64_t *sflag = (const uint64_t *)(own + n->s_dflag + 8LL * s);
    if (n->node_of[s] == n->node) {
      SL_CHECK(wait_either(h, sflag, NULL, epoch, s, -1, "dispatch message", NULL));
      msg = own + n->s_recv + (long long)s * n->msg;
    } else {
      int fwd = n->node * n->L + n->local_of[s];
      const unsigned char *wmsg = n->win + n->w_recv + (long long)s * n->msg;
      for (;;) {
        int which = 0;
        SL_CHECK(wait_either(h, sflag, &n->pflags[s], epoch, s, fwd, "dispatch message", &which));
        if (which == 0) {
          msg = own + n->s_recv + (long long)s * n->msg;
          break;
        }
        if (((const net_hdr_t *)wmsg)->mode == SL_MOE_NET_DIRECT) {
          msg = wmsg;
          break;
        }
        /* the forwarder's own copy of a node message: its forward already filled sflag */
        SL_CHECK(wait_either(h, sflag, NULL, epoch, s, fwd, "forwarded dispatch message", NULL));
        msg = own + n->s_recv + (long long)s * n->msg;
        break;
      }
    }
    const net_hdr_t *hd = (const net_hdr_t *)msg;
    n->rx_base[s] = (int)hd->base[n->rank];
    int got = 0;
    for (uint64_t i = 0; i < hd->count; i++) {
      const unsigned char *entry = msg + n->hdr + (long long)i * l->entry_bytes;
      sl_moe_ep_meta_t m;
      memcpy(&m, entry + l->token_bytes, sizeof m);
      for (int j = 0; j < m.nexp && j < SL_MOE_EP_MAX_TOPK; j++) {
        int e = m.entry[j] & 0xffff;
        if (expert_rank(l, e) != n->rank || got >= mkr) continue;
        int le = e - n->rank * l->experts_per_rank;
        int row = n->hex_counts[le]++;
        if (row >= l->capacity) {
          if (err == SL_OK)
            err = SL_ERR(SL_ERR_CAPACITY,
                         "moe dispatch: local expert %d of rank %d got more than its capacity of %d rows (from rank "
                         "%d); the excess contributes zero. Create the handle with a larger expert_capacity (0 = "
                         "dropless)",
                         le, n->rank, l->capacity, s);
          n->rx_row[s * mkr + got++] = -1;
          continue;
        }
        long long r = sl_moe_ep_expert_row(l, le, row);
        memcpy(n->hex_x + r * l->codes_bytes, entry, (size_t)l->codes_bytes);
        if (l->scales_bytes)
          memcpy(n->hex_s + r * l->scales_bytes, entry + sl_moe_ep_align(l->codes_bytes, 16), (size_t)l->scales_bytes);
        n->hex_w[r] = m.weight[j];
        n->rx_row[s * mkr + got++] = (int)r;
      }
    }
    n->rx_n[s] = got;
  }
  return err;
}

sl_status_t sl_moe_net_dispatch(sl_moe_comm_t *h, const sl_moe_comm_dispatch_args_t *a, sl_stream_t *stream) {
  sl_moe_net_t *n = h->net;
  const sl_moe_ep_layout_t *l = &h->l;
  n->T = a->num_tokens;
  const void *x = a->x, *ids = a->topk_ids, *w = a->topk_weights;
  if (is_cuda(h)) { /* host-driven: inputs to the host */
    SL_CHECK(sl_stream_sync(h->dev, stream));
    size_t T = (size_t)a->num_tokens, K = (size_t)l->top_k;
    if (T) {
      SL_CHECK(sl_memcpy(h->dev, n->hx, x, T * (size_t)n->rowb, NULL));
      SL_CHECK(sl_memcpy(h->dev, n->hids, ids, T * K * 4, NULL));
      SL_CHECK(sl_memcpy(h->dev, n->hw, w, T * K * 4, NULL));
      SL_CHECK(sl_device_sync(h->dev));
    }
    x = n->hx;
    ids = n->hids;
    w = n->hw;
  }
  sl_status_t s = net_dispatch_host(h, x, ids, w, a->net_mode, a->net_taken);
  if (s != SL_OK && s != SL_ERR_RANGE && s != SL_ERR_CAPACITY) return s;
  if (is_cuda(h)) { /* the rows each local expert received (contiguous per expert) */
    sl_moe_comm_experts_t *ex = &h->experts;
    SL_CHECK(sl_memcpy(h->dev, ex->expert_counts, n->hex_counts, (size_t)l->experts_per_rank * 4, stream));
    for (int le = 0; le < l->experts_per_rank; le++) {
      int c = n->hex_counts[le] < l->capacity ? n->hex_counts[le] : l->capacity;
      if (c <= 0) continue;
      size_t r0 = (size_t)sl_moe_ep_expert_row(l, le, 0), nr = (size_t)c;
      SL_CHECK(sl_memcpy(h->dev, (unsigned char *)ex->expert_x + r0 * l->codes_bytes, n->hex_x + r0 * l->codes_bytes,
                         nr * (size_t)l->codes_bytes, stream));
      if (l->scales_bytes)
        SL_CHECK(sl_memcpy(h->dev, (unsigned char *)ex->expert_scales + r0 * l->scales_bytes,
                           n->hex_s + r0 * l->scales_bytes, nr * (size_t)l->scales_bytes, stream));
      SL_CHECK(sl_memcpy(h->dev, ex->expert_weights + r0, n->hex_w + r0, nr * 4, stream));
    }
    SL_CHECK(sl_stream_sync(h->dev, stream)); /* the host mirrors are rewritten next call */
  }
  return s;
}

/* ---- combine ----------------------------------------------------------------------------- */

static sl_status_t net_combine_host(sl_moe_comm_t *h, const int32_t *ids, const float *w,
                                    const unsigned short *expert_out, unsigned short *out) {
  sl_moe_net_t *n = h->net;
  const sl_moe_ep_layout_t *l = &h->l;
  unsigned long long epoch = h->epoch;
  long long mkr = (long long)l->max_tokens * n->kr, rowb = n->rowb;
  /* rows back to every source (empty messages too: they are the flow control) */
  long long staged = 0;
  for (int s = 0; s < n->n; s++) {
    int same = n->node_of[s] == n->node;
    unsigned char *dst = same ? n->sp[n->local_of[s]] + n->s_comb + (long long)n->rx_base[s] * rowb
                              : n->win + n->w_csend + staged * rowb;
    for (int j = 0; j < n->rx_n[s]; j++) {
      int r = n->rx_row[s * mkr + j];
      if (r >= 0)
        memcpy(dst + j * rowb, expert_out + (long long)r * l->hidden, (size_t)rowb);
      else
        memset(dst + j * rowb, 0, (size_t)rowb);
    }
    if (same) {
      sl_flag_store_release((sl_flag_t *)(n->sp[n->local_of[s]] + n->s_cflag + 8LL * n->rank), epoch);
    } else {
      size_t bytes = (size_t)(n->rx_n[s] * rowb);
      SL_CHECK(sl_proxy_post_put(n->proxy, s, (size_t)(n->w_comb + (long long)n->rx_base[s] * rowb),
                                 (size_t)(n->w_csend + staged * rowb), bytes, (uint32_t)(n->n + n->rank), epoch));
      staged += n->rx_n[s];
      n->stats.combine_net_bytes += bytes;
      n->stats.net_msgs++;
    }
  }
  /* every responder's rows, then the k-order sums */
  unsigned char *own = n->sp[n->lrank];
  for (int q = 0; q < n->n; q++) {
    const uint64_t *f =
        n->node_of[q] == n->node ? (const uint64_t *)(own + n->s_cflag + 8LL * q) : &n->pflags[n->n + q];
    SL_CHECK(wait_either(h, f, NULL, epoch, q, -1, "combine rows", NULL));
  }
  for (int t = 0; t < n->T; t++) {
    for (int i = 0; i < l->hidden; i++)
      n->acc[i] = 0.0f;
    for (int k = 0; k < l->top_k; k++) {
      int off = n->pair_off[t * l->top_k + k];
      if (off < 0) continue;
      int q = expert_rank(l, ids[(long long)t * l->top_k + k]);
      const uint16_t *row =
          (const uint16_t *)((n->node_of[q] == n->node ? own + n->s_comb : n->win + n->w_comb) + (long long)off * rowb);
      float wk = w[(long long)t * l->top_k + k];
      for (int i = 0; i < l->hidden; i++)
        n->acc[i] = fmaf(wk, sl_bf16_to_f32(row[i]), n->acc[i]);
    }
    for (int i = 0; i < l->hidden; i++)
      out[(long long)t * l->hidden + i] = sl_f32_to_bf16(n->acc[i]);
  }
  return SL_OK;
}

sl_status_t sl_moe_net_combine(sl_moe_comm_t *h, const sl_moe_comm_combine_args_t *a, sl_stream_t *stream) {
  sl_moe_net_t *n = h->net;
  const sl_moe_ep_layout_t *l = &h->l;
  if (a->num_tokens != n->T)
    return SL_ERR(SL_ERR_INVALID, "moe combine: %d tokens, but the matching dispatch had %d", a->num_tokens, n->T);
  const void *ids = a->topk_ids, *w = a->topk_weights, *eo = a->expert_out;
  void *out = a->out;
  if (is_cuda(h)) {
    size_t T = (size_t)n->T, K = (size_t)l->top_k;
    SL_CHECK(sl_stream_sync(h->dev, stream));
    for (int le = 0; le < l->experts_per_rank; le++) { /* only the rows dispatch filled */
      int c = n->hex_counts[le] < l->capacity ? n->hex_counts[le] : l->capacity;
      if (c <= 0) continue;
      size_t r0 = (size_t)sl_moe_ep_expert_row(l, le, 0);
      SL_CHECK(sl_memcpy(h->dev, n->hexp_out + r0 * (size_t)n->rowb, (const unsigned char *)eo + r0 * (size_t)n->rowb,
                         (size_t)c * (size_t)n->rowb, NULL));
    }
    if (T) {
      SL_CHECK(sl_memcpy(h->dev, n->hids, ids, T * K * 4, NULL));
      SL_CHECK(sl_memcpy(h->dev, n->hw, w, T * K * 4, NULL));
    }
    SL_CHECK(sl_device_sync(h->dev));
    ids = n->hids;
    w = n->hw;
    eo = n->hexp_out;
    out = n->hout;
  }
  SL_CHECK(net_combine_host(h, ids, w, eo, out));
  if (is_cuda(h) && n->T) {
    SL_CHECK(sl_memcpy(h->dev, a->out, n->hout, (size_t)n->T * (size_t)n->rowb, stream));
    SL_CHECK(sl_stream_sync(h->dev, stream));
  }
  return SL_OK;
}
