/* MoE dispatch/combine across the ranks of a node: the handle, the path choice, the CUDA
 * launches and the CPU backend (same layout and protocol over POSIX shm + C11 atomics).
 *
 * Configuration choice:
 *  - decode (one warp per token fits in the SM budget at 4 warps per block): one cooperative
 *    launch per phase. Few tokens: spreading them one warp each over many SMs keeps every
 *    copy in flight at once, and the grid barrier costs ~1 us against ~4.5 us per extra
 *    launch (DESIGN.md measurements).
 *  - prefill: the phases as separate launches of 8-warp blocks, capped by the SM budget
 *    (the comm kernels leave the rest of the GPU to overlapping compute).
 *  The budget caps every grid; the cooperative grid is further capped by co-residency. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_comm_impl.h"
#include "comm/moe_internode.h"
#include "runtime/sl_config.h"
#include "runtime/sl_log.h"

const char *sl_moe_comm_path_name(sl_moe_comm_path_t p) {
  switch (p) {
  case SL_MOE_COMM_PATH_AUTO: return "auto";
  case SL_MOE_COMM_PATH_DECODE: return "decode";
  case SL_MOE_COMM_PATH_PREFILL: return "prefill";
  case SL_MOE_COMM_PATH_CPU: return "cpu";
  }
  return "?";
}

const char *sl_moe_transport_name(sl_moe_transport_t t) {
  switch (t) {
  case SL_MOE_TRANSPORT_SELF: return "self";
  case SL_MOE_TRANSPORT_NVLINK: return "nvlink";
  case SL_MOE_TRANSPORT_SHM: return "shm";
  case SL_MOE_TRANSPORT_PROXY: return "proxy";
  }
  return "?";
}

const sl_moe_comm_experts_t *sl_moe_comm_experts(const sl_moe_comm_t *h) {
  return &h->experts;
}
const sl_moe_ep_layout_t *sl_moe_comm_layout(const sl_moe_comm_t *h) {
  return &h->l;
}
int sl_moe_comm_rank(const sl_moe_comm_t *h) {
  return h->l.rank;
}
int sl_moe_comm_size(const sl_moe_comm_t *h) {
  return h->l.nranks;
}
sl_moe_transport_t sl_moe_comm_transport(const sl_moe_comm_t *h, int peer) {
  if (h->net) return sl_moe_net_transport(h->net, peer);
  return peer >= 0 && peer < h->l.nranks ? h->transport[peer] : SL_MOE_TRANSPORT_SELF;
}

static const char *payload_name(int payload) {
  static const char *names[] = {"bf16", "fp8", "mxfp8", "nvfp4"};
  return payload >= 0 && payload < SL_MOE_EP_NUM_PAYLOADS ? names[payload] : "?";
}

/* ---- create / destroy ------------------------------------------------------------------ */

sl_status_t sl_moe_comm_create(sl_device_t *dev, MPI_Comm comm, const sl_moe_comm_config_t *cfg, sl_moe_comm_t **out) {
  *out = NULL;
  int rank = 0, size = 1;
  SL_CHECK(sl_mpi_status(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  SL_CHECK(sl_mpi_status(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
  sl_moe_ep_layout_t l;
  int bad = sl_moe_ep_layout_init(&l, size, rank, cfg->deploy == SL_MOE_DEPLOY_TP, cfg->num_experts, cfg->top_k,
                                  cfg->hidden, cfg->payload, cfg->max_tokens, cfg->expert_capacity);
  switch (bad) {
  case 0: break;
  case -1:
    return SL_ERR(SL_ERR_INVALID,
                  "moe comm: %d ranks in the group; 1..%d ranks of one node are supported "
                  "(build one group per node: pass the node communicator)",
                  size, SL_MOE_EP_MAX_RANKS);
  case -2:
    return SL_ERR(SL_ERR_INVALID, "moe comm: %d experts do not divide over %d ranks (or more than %d per rank)",
                  cfg->num_experts, size, SL_MOE_EP_MAX_LOCAL_EXPERTS);
  case -3:
    return SL_ERR(SL_ERR_INVALID, "moe comm: top_k %d must be in [1, min(%d, experts %d)]", cfg->top_k,
                  SL_MOE_EP_MAX_TOPK, cfg->num_experts);
  case -4: return SL_ERR(SL_ERR_INVALID, "moe comm: hidden %d must be a positive multiple of 128", cfg->hidden);
  case -5: return SL_ERR(SL_ERR_INVALID, "moe comm: unknown payload %d", cfg->payload);
  default:
    return SL_ERR(SL_ERR_INVALID, "moe comm: max_tokens %d must be >= 1 (and ranks x tokens x top_k < 2^31)",
                  cfg->max_tokens);
  }
  sl_moe_comm_t *h = calloc(1, sizeof *h);
  if (!h) return SL_ERR(SL_ERR_NOMEM, "moe comm handle");
  h->dev = dev;
  h->backend = sl_device_backend(dev);
  h->cfg = *cfg;
  h->l = l;
  h->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : sl_config()->timeout_ms;
  h->sm_count = sl_device_info(dev)->sm_count > 0 ? sl_device_info(dev)->sm_count : 1;
  h->sm_budget = cfg->sm_budget > 0 && cfg->sm_budget < h->sm_count ? cfg->sm_budget : h->sm_count;
  float gs = cfg->nvfp4_global_scale > 0 ? cfg->nvfp4_global_scale : 1.0f;
  sl_status_t s = SL_OK;
  SL_CHECK_GOTO(sl_symm_create(dev, comm, (size_t)l.symm_bytes, "moe", &h->symm), s, fail);
  for (int r = 0; r < size; r++) {
    h->peer[r] = sl_symm_peer(h->symm, r);
    h->transport[r] = r == rank                       ? SL_MOE_TRANSPORT_SELF
                      : h->backend == SL_BACKEND_CUDA ? SL_MOE_TRANSPORT_NVLINK
                                                      : SL_MOE_TRANSPORT_SHM;
  }
  size_t rows = (size_t)l.experts_per_rank * (size_t)l.capacity;
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)l.ws_bytes, (void **)&h->ws), s, fail);
  SL_CHECK_GOTO(sl_memset(dev, h->ws, 0, (size_t)l.ws_bytes, NULL), s, fail);
  sl_moe_comm_experts_t *x = &h->experts;
  x->num_local_experts = l.experts_per_rank;
  x->expert_begin = rank * l.experts_per_rank;
  x->capacity = l.capacity;
  x->payload = l.payload;
  x->row_bytes = l.codes_bytes;
  x->scale_row_bytes = l.scales_bytes;
  x->global_scale = gs;
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * (size_t)l.codes_bytes, &x->expert_x), s, fail);
  if (l.scales_bytes) SL_CHECK_GOTO(sl_device_malloc(dev, rows * (size_t)l.scales_bytes, &x->expert_scales), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)l.experts_per_rank * 4, (void **)&x->expert_counts), s, fail);
  SL_CHECK_GOTO(sl_memset(dev, x->expert_counts, 0, (size_t)l.experts_per_rank * 4, NULL), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * 4, (void **)&x->expert_weights), s, fail);
  SL_CHECK_GOTO(
      sl_host_alloc_mapped(dev, sizeof(sl_flag_timeout_t), (void **)&h->timeout_host, (void **)&h->timeout_dev), s,
      fail);
  memset(h->timeout_host, 0, sizeof(sl_flag_timeout_t));
  SL_CHECK_GOTO(sl_device_sync(dev), s, fail);
  if (rank == 0)
    SL_LOG_INFO("moe comm: %s over %d ranks, %d experts (%d per rank), top-%d, hidden %d, payload %s, "
                "max %d tokens per rank, capacity %d rows per expert, symmetric %.1f MiB, SM budget %d",
                l.tp ? "TP" : "EP", size, l.num_experts, l.experts_per_rank, l.top_k, l.hidden, payload_name(l.payload),
                l.max_tokens, l.capacity, (double)l.symm_bytes / 1048576.0, h->sm_budget);
  *out = h;
  return SL_OK;
fail:
  sl_moe_comm_destroy(h);
  return s;
}

sl_status_t sl_moe_comm_create_world(sl_device_t *dev, const sl_boot_t *boot, const sl_moe_comm_config_t *cfg,
                                     sl_moe_comm_t **out) {
  *out = NULL;
  if (boot->num_nodes <= 1) return sl_moe_comm_create(dev, boot->node_comm, cfg, out);
  int n = boot->size;
  if (cfg->deploy != SL_MOE_DEPLOY_EP)
    return SL_ERR(SL_ERR_UNSUPPORTED, "moe comm: TP across nodes is not supported: run TP inside a node "
                                      "(sl_moe_comm_create with the node communicator)");
  if (n > SL_MOE_NET_MAX_RANKS)
    return SL_ERR(SL_ERR_INVALID, "moe comm: %d ranks; the inter-node path supports at most %d", n,
                  SL_MOE_NET_MAX_RANKS);
  if (cfg->num_experts < n || cfg->num_experts % n || cfg->num_experts > 65535 ||
      cfg->num_experts / n > SL_MOE_EP_MAX_LOCAL_EXPERTS)
    return SL_ERR(SL_ERR_INVALID,
                  "moe comm: %d experts do not divide over %d ranks (or more than %d per rank, or "
                  "more than 65535)",
                  cfg->num_experts, n, SL_MOE_EP_MAX_LOCAL_EXPERTS);
  if (cfg->top_k < 1 || cfg->top_k > SL_MOE_EP_MAX_TOPK || cfg->top_k > cfg->num_experts)
    return SL_ERR(SL_ERR_INVALID, "moe comm: top_k %d must be in [1, min(%d, experts %d)]", cfg->top_k,
                  SL_MOE_EP_MAX_TOPK, cfg->num_experts);
  if (cfg->hidden < 128 || cfg->hidden % 128)
    return SL_ERR(SL_ERR_INVALID, "moe comm: hidden %d must be a positive multiple of 128", cfg->hidden);
  if (cfg->payload < 0 || cfg->payload >= SL_MOE_EP_NUM_PAYLOADS)
    return SL_ERR(SL_ERR_INVALID, "moe comm: unknown payload %d", cfg->payload);
  if (cfg->max_tokens < 1 || (long long)n * cfg->max_tokens * cfg->top_k >= (1LL << 31))
    return SL_ERR(SL_ERR_INVALID, "moe comm: max_tokens %d must be >= 1 (and ranks x tokens x top_k < 2^31)",
                  cfg->max_tokens);
  sl_moe_comm_t *h = calloc(1, sizeof *h);
  if (!h) return SL_ERR(SL_ERR_NOMEM, "moe comm handle");
  h->dev = dev;
  h->backend = sl_device_backend(dev);
  h->cfg = *cfg;
  h->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : sl_config()->timeout_ms;
  h->sm_count = h->sm_budget = 1;
  sl_moe_ep_layout_t *l = &h->l;
  l->nranks = n;
  l->rank = boot->rank;
  l->num_experts = cfg->num_experts;
  l->experts_per_rank = cfg->num_experts / n;
  l->top_k = cfg->top_k;
  l->hidden = cfg->hidden;
  l->payload = cfg->payload;
  l->max_tokens = cfg->max_tokens;
  l->nsenders = n;
  l->capacity = cfg->expert_capacity > 0 ? cfg->expert_capacity : n * cfg->max_tokens;
  l->codes_bytes = sl_moe_ep_codes_bytes(cfg->payload, cfg->hidden);
  l->scales_bytes = sl_moe_ep_scales_bytes(cfg->payload, cfg->hidden);
  l->token_bytes = sl_moe_ep_align(l->codes_bytes, 16) + sl_moe_ep_align(l->scales_bytes, 16);
  l->meta_bytes = sl_moe_ep_align((long long)sizeof(sl_moe_ep_meta_t), 16);
  l->entry_bytes = l->token_bytes + l->meta_bytes;
  sl_status_t s = SL_OK;
  size_t rows = (size_t)l->experts_per_rank * (size_t)l->capacity;
  sl_moe_comm_experts_t *x = &h->experts;
  x->num_local_experts = l->experts_per_rank;
  x->expert_begin = l->rank * l->experts_per_rank;
  x->capacity = l->capacity;
  x->payload = l->payload;
  x->row_bytes = l->codes_bytes;
  x->scale_row_bytes = l->scales_bytes;
  x->global_scale = cfg->nvfp4_global_scale > 0 ? cfg->nvfp4_global_scale : 1.0f;
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * (size_t)l->codes_bytes, &x->expert_x), s, fail);
  if (l->scales_bytes) SL_CHECK_GOTO(sl_device_malloc(dev, rows * (size_t)l->scales_bytes, &x->expert_scales), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)l->experts_per_rank * 4, (void **)&x->expert_counts), s, fail);
  SL_CHECK_GOTO(sl_memset(dev, x->expert_counts, 0, (size_t)l->experts_per_rank * 4, NULL), s, fail);
  SL_CHECK_GOTO(sl_device_malloc(dev, rows * 4, (void **)&x->expert_weights), s, fail);
  SL_CHECK_GOTO(sl_device_sync(dev), s, fail);
  SL_CHECK_GOTO(sl_moe_net_create(h, boot), s, fail);
  *out = h;
  return SL_OK;
fail:
  sl_moe_comm_destroy(h);
  return s;
}

void sl_moe_comm_net_stats(const sl_moe_comm_t *h, sl_moe_net_stats_t *out) {
  if (h->net)
    sl_moe_net_stats(h->net, out);
  else
    memset(out, 0, sizeof *out);
}

void sl_moe_comm_destroy(sl_moe_comm_t *h) {
  if (!h) return;
  sl_moe_comm_experts_t *x = &h->experts;
  sl_moe_net_destroy(h->net);
  if (h->backend == SL_BACKEND_CUDA && !h->failed) sl_device_sync(h->dev);
  sl_device_free(h->dev, x->expert_x);
  sl_device_free(h->dev, x->expert_scales);
  sl_device_free(h->dev, x->expert_counts);
  sl_device_free(h->dev, x->expert_weights);
  sl_device_free(h->dev, h->ws);
  sl_device_free(h->dev, h->tp_partial);
  if (h->timeout_host) sl_host_free_mapped(h->dev, h->timeout_host);
  sl_symm_destroy(h->symm);
  free(h);
}

/* ---- shared helpers ---------------------------------------------------------------------- */

void sl_moe_comm_params(const sl_moe_comm_t *h, sl_moe_ep_params_t *p) {
  memset(p, 0, sizeof *p);
  p->l = h->l;
  for (int r = 0; r < h->l.nranks; r++)
    p->peer[r] = h->peer[r];
  p->ws = h->ws;
  p->expert_x = h->experts.expert_x;
  p->expert_scales = h->experts.expert_scales;
  p->expert_counts = h->experts.expert_counts;
  p->expert_weights = h->experts.expert_weights;
  p->global_scale = h->experts.global_scale;
  p->epoch = h->epoch;
  p->timeout_ns = (unsigned long long)h->timeout_ms * 1000000ull;
  p->timeout_rec = h->backend == SL_BACKEND_CUDA ? h->timeout_dev : h->timeout_host;
}

/* What a flag index in a timeout record means (see the waits in moe_ep.cu / moe_tp.cu). */
static void describe_flag(const sl_moe_comm_t *h, uint32_t idx, char *buf, size_t len) {
  if (idx >= 0x80000000u)
    snprintf(buf, len, "TP all-reduce partial of token %u", idx - 0x80000000u);
  else if (idx >= 0x40000000u)
    snprintf(buf, len, "combine row of token %u, k %u", (idx - 0x40000000u) / (unsigned)h->l.top_k,
             (idx - 0x40000000u) % (unsigned)h->l.top_k);
  else if (idx >= 0x20000u)
    snprintf(buf, len, "dispatch token count");
  else if (idx >= 0x10000u)
    snprintf(buf, len, "dispatch credit (ack of the previous call)");
  else
    snprintf(buf, len, "dispatched token in slot %u", idx);
}

static sl_status_t timeout_error(sl_moe_comm_t *h, int peer, const char *what, unsigned long long expected,
                                 unsigned long long observed, double waited_ms) {
  h->failed = SL_ERR_TIMEOUT;
  return SL_ERR(SL_ERR_TIMEOUT,
                "moe comm: rank %d waited %.0f ms (SL_TIMEOUT_MS=%ld) for rank %d: %s of call %llu never came "
                "(flag holds %llu). Rank %d stalled, died, or skipped a dispatch/combine (every rank of the "
                "group must call both, in the same order); this handle is unusable now",
                h->l.rank, waited_ms, h->timeout_ms, peer, what, expected, observed, peer);
}

sl_status_t sl_moe_comm_cpu_wait(sl_moe_comm_t *h, const unsigned char *base, long long off, unsigned long long epoch,
                                 int peer, const char *what, long index) {
  unsigned long long seen = 0, waited = 0;
  if (sl_flag_wait_eq((const sl_flag_t *)(base + off), epoch, h->timeout_ms, &seen, &waited)) return SL_OK;
  char w[96];
  if (index >= 0)
    snprintf(w, sizeof w, "%s %ld", what, index);
  else
    snprintf(w, sizeof w, "%s", what);
  return timeout_error(h, peer, w, epoch, seen, (double)waited / 1e6);
}

int sl_moe_comm_grid(const sl_moe_comm_t *h, long long items, int threads) {
  long long warps = threads / 32, g = (items + warps - 1) / warps;
  if (g < 1) g = 1;
  return (int)(g < h->sm_budget ? g : h->sm_budget);
}

sl_status_t sl_moe_comm_launch(sl_moe_comm_t *h, const char *source, const char *entry, int threads, int grid,
                               bool cooperative, const sl_moe_ep_params_t *p, sl_stream_t *stream) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, source, entry);
  /* the TP kernels move bf16 only: one point for every payload */
  SL_CHECK(sl_jit_spec_define(&spec, "SL_EP_PAYLOAD", "%d", strstr(source, "moe_tp") ? 0 : h->l.payload));
  SL_CHECK(sl_jit_spec_define(&spec, "SL_EP_THREADS", "%d", threads));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(h->dev, &spec, &k));
  sl_launch_t l = {
      .grid = {(unsigned)grid}, .block = {(unsigned)threads}, .stream = stream, .cooperative = cooperative};
  sl_moe_ep_params_t copy = *p;
  void *args[] = {&copy};
  return sl_kernel_launch(k, &l, args);
}

sl_moe_comm_path_t sl_moe_comm_choose_path(const sl_moe_comm_t *h, int num_tokens) {
  if (h->backend != SL_BACKEND_CUDA) return SL_MOE_COMM_PATH_CPU;
  int decode_blocks = (num_tokens + SL_MOE_COMM_DECODE_THREADS / 32 - 1) / (SL_MOE_COMM_DECODE_THREADS / 32);
  return decode_blocks <= h->sm_budget ? SL_MOE_COMM_PATH_DECODE : SL_MOE_COMM_PATH_PREFILL;
}

static sl_moe_comm_path_t pick_path(const sl_moe_comm_t *h, int num_tokens, sl_moe_comm_path_t force) {
  if (h->backend != SL_BACKEND_CUDA) return SL_MOE_COMM_PATH_CPU;
  if (force == SL_MOE_COMM_PATH_DECODE || force == SL_MOE_COMM_PATH_PREFILL) return force;
  return sl_moe_comm_choose_path(h, num_tokens);
}

static sl_status_t check_call(const sl_moe_comm_t *h, int num_tokens, const void *tok_ptr, const char *what) {
  if (h->failed)
    return SL_ERR(SL_ERR_PEER, "moe %s: this handle failed earlier (%s); destroy it and create a new one", what,
                  sl_status_str(h->failed));
  if (num_tokens < 0 || num_tokens > h->l.max_tokens)
    return SL_ERR(SL_ERR_CAPACITY,
                  "moe %s: %d tokens on rank %d, the handle was created for at most %d "
                  "(max_tokens)",
                  what, num_tokens, h->l.rank, h->l.max_tokens);
  if (((uintptr_t)tok_ptr & 15u) != 0)
    return SL_ERR(SL_ERR_INVALID, "moe %s: token rows must be 16-byte aligned", what);
  return SL_OK;
}

/* ---- CPU backend: the phases of moe_ep_layout.h in order ----------------------------------- */

static sl_status_t cpu_dispatch(sl_moe_comm_t *h, const sl_moe_ep_params_t *p) {
  const sl_moe_ep_layout_t *l = &h->l;
  unsigned char *own = h->peer[l->rank], *ws = h->ws;
  unsigned long long epoch = p->epoch;
  int si_self = sl_moe_ep_sender_index(l, l->rank);
  sl_status_t err = SL_OK;
  /* reset + credits */
  for (int d = 0; d < SL_MOE_EP_MAX_RANKS; d++)
    *(int *)(ws + sl_moe_ep_send_counter(l, epoch + 1, d)) = 0;
  memset(p->expert_counts, 0, (size_t)l->experts_per_rank * 4);
  for (int d = 0; d < l->nranks; d++) {
    if (l->tp && d != l->rank) continue;
    SL_CHECK(sl_moe_comm_cpu_wait(h, own, sl_moe_ep_ack(l, d), epoch - 1, d,
                                  "dispatch credit (ack of the previous "
                                  "call)",
                                  -1));
  }
  /* route */
  for (int t = 0; t < p->num_tokens; t++) {
    unsigned char *stg = ws + sl_moe_ep_staging(l, t);
    const unsigned short *row = p->x + (long long)t * l->hidden;
    if (l->payload == SL_MOE_EP_PAYLOAD_BF16) {
      memcpy(stg, row, (size_t)l->codes_bytes);
    } else {
      int nb = l->hidden / sl_moe_ep_block_elems(l->payload);
      for (int b = 0; b < nb; b++)
        sl_moe_ep_quant_token_block(l, row, b, p->global_scale, stg);
    }
    const int *ids = p->topk_ids + (long long)t * l->top_k;
    for (int d = 0; d < l->nranks; d++) {
      int any = 0;
      for (int k = 0; k < l->top_k; k++)
        any |= sl_moe_ep_goes_to(l, ids[k], d);
      int *counter = (int *)(ws + sl_moe_ep_send_counter(l, epoch, d));
      *(int *)(ws + sl_moe_ep_send_slot(l, t, d)) = any ? (*counter)++ : -1;
    }
    for (int k = 0; k < l->top_k; k++) {
      if (!sl_moe_ep_valid_expert(l, ids[k]) && err == SL_OK)
        err = SL_ERR(SL_ERR_RANGE,
                     "moe dispatch: rank %d token %d k %d has expert id %d outside [0, %d); the "
                     "pair is skipped",
                     l->rank, t, k, ids[k], l->num_experts);
      if (l->tp) *(int *)(ws + sl_moe_ep_pair_row(l, t, k)) = -1;
    }
  }
  /* publish counts */
  for (int d = 0; d < l->nranks; d++) {
    if (l->tp && d != l->rank) continue;
    *(volatile uint64_t *)(h->peer[d] + sl_moe_ep_recv_count(l, si_self)) =
        (uint64_t) * (int *)(ws + sl_moe_ep_send_counter(l, epoch, d));
    sl_flag_store_release((sl_flag_t *)(h->peer[d] + sl_moe_ep_count_flag(l, si_self)), epoch);
  }
  /* send */
  for (int t = 0; t < p->num_tokens; t++) {
    for (int d = 0; d < l->nranks; d++) {
      int slot = *(int *)(ws + sl_moe_ep_send_slot(l, t, d));
      if (slot < 0) continue;
      unsigned char *entry = h->peer[d] + sl_moe_ep_entry(l, si_self, slot);
      memcpy(entry, ws + sl_moe_ep_staging(l, t), (size_t)l->token_bytes);
      sl_moe_ep_meta_t m;
      memset(&m, 0, sizeof m);
      const int *ids = p->topk_ids + (long long)t * l->top_k;
      for (int k = 0; k < l->top_k; k++) {
        if (!sl_moe_ep_goes_to(l, ids[k], d)) continue;
        m.entry[m.nexp] = (k << 16) | sl_moe_ep_local_expert(l, ids[k]);
        m.weight[m.nexp] = p->topk_weights[(long long)t * l->top_k + k];
        m.nexp++;
      }
      m.token = t;
      memcpy(entry + l->token_bytes, &m, sizeof m);
      sl_flag_store_release((sl_flag_t *)(h->peer[d] + sl_moe_ep_tok_flag(l, si_self, slot)), epoch);
    }
  }
  /* gather */
  for (int si = 0; si < l->nsenders; si++) {
    int s = l->tp ? l->rank : si;
    SL_CHECK(sl_moe_comm_cpu_wait(h, own, sl_moe_ep_count_flag(l, si), epoch, s, "dispatch token count", -1));
    int n = (int)*(volatile uint64_t *)(own + sl_moe_ep_recv_count(l, si));
    for (int slot = 0; slot < n; slot++) {
      SL_CHECK(
          sl_moe_comm_cpu_wait(h, own, sl_moe_ep_tok_flag(l, si, slot), epoch, s, "dispatched token in slot", slot));
      const unsigned char *entry = own + sl_moe_ep_entry(l, si, slot);
      sl_moe_ep_meta_t m;
      memcpy(&m, entry + l->token_bytes, sizeof m);
      for (int j = 0; j < m.nexp; j++) {
        int le = m.entry[j] & 0xffff, k = m.entry[j] >> 16;
        int row = p->expert_counts[le]++;
        if (row >= l->capacity) {
          if (err == SL_OK)
            err = SL_ERR(SL_ERR_CAPACITY,
                         "moe dispatch: local expert %d of rank %d got more than its capacity of "
                         "%d rows (from rank %d); the excess contributes zero. Create the handle with a larger "
                         "expert_capacity (0 = dropless)",
                         le, l->rank, l->capacity, s);
          if (l->tp) {
            *(int *)(ws + sl_moe_ep_pair_row(l, m.token, k)) = -1;
          } else {
            memset(h->peer[s] + sl_moe_ep_comb_row(l, m.token, k), 0, 2 * (size_t)l->hidden);
            sl_flag_store_release((sl_flag_t *)(h->peer[s] + sl_moe_ep_comb_flag(l, m.token, k)), epoch);
          }
          continue;
        }
        long long r = sl_moe_ep_expert_row(l, le, row);
        memcpy(p->expert_x + r * l->codes_bytes, entry, (size_t)l->codes_bytes);
        if (l->scales_bytes)
          memcpy(p->expert_scales + r * l->scales_bytes, entry + sl_moe_ep_align(l->codes_bytes, 16),
                 (size_t)l->scales_bytes);
        *(int *)(ws + sl_moe_ep_row_src(l, r)) = sl_moe_ep_pack_src(l, s, m.token, k);
        p->expert_weights[r] = m.weight[j];
        if (l->tp) *(int *)(ws + sl_moe_ep_pair_row(l, m.token, k)) = (int)r;
      }
    }
  }
  /* ack */
  for (int s = 0; s < l->nranks; s++) {
    if (l->tp && s != l->rank) continue;
    sl_flag_store_release((sl_flag_t *)(h->peer[s] + sl_moe_ep_ack(l, l->rank)), epoch);
  }
  return err;
}

static sl_status_t cpu_combine_ep(sl_moe_comm_t *h, const sl_moe_ep_params_t *p) {
  const sl_moe_ep_layout_t *l = &h->l;
  unsigned char *own = h->peer[l->rank];
  for (int le = 0; le < l->experts_per_rank; le++) {
    int cnt = p->expert_counts[le] < l->capacity ? p->expert_counts[le] : l->capacity;
    for (int row = 0; row < cnt; row++) {
      long long r = sl_moe_ep_expert_row(l, le, row);
      int s, t, k;
      sl_moe_ep_unpack_src(l, *(int *)(h->ws + sl_moe_ep_row_src(l, r)), &s, &t, &k);
      memcpy(h->peer[s] + sl_moe_ep_comb_row(l, t, k), p->expert_out + r * l->hidden, 2 * (size_t)l->hidden);
      sl_flag_store_release((sl_flag_t *)(h->peer[s] + sl_moe_ep_comb_flag(l, t, k)), p->epoch);
    }
  }
  float *acc = malloc((size_t)l->hidden * sizeof(float));
  if (!acc) return SL_ERR(SL_ERR_NOMEM, "moe combine accumulator");
  sl_status_t s = SL_OK;
  for (int t = 0; t < p->num_tokens && s == SL_OK; t++) {
    const int *ids = p->topk_ids + (long long)t * l->top_k;
    const float *w = p->topk_weights + (long long)t * l->top_k;
    for (int i = 0; i < l->hidden; i++)
      acc[i] = 0.0f;
    for (int k = 0; k < l->top_k && s == SL_OK; k++) {
      if (!sl_moe_ep_valid_expert(l, ids[k])) continue;
      s = sl_moe_comm_cpu_wait(h, own, sl_moe_ep_comb_flag(l, t, k), p->epoch, sl_moe_ep_expert_rank(l, ids[k]),
                               "combine row of (token, k) pair", (long)t * l->top_k + k);
      const uint16_t *row = (const uint16_t *)(own + sl_moe_ep_comb_row(l, t, k));
      for (int i = 0; i < l->hidden && s == SL_OK; i++)
        acc[i] = fmaf(w[k], sl_bf16_to_f32(row[i]), acc[i]);
    }
    for (int i = 0; i < l->hidden; i++)
      p->out[(long long)t * l->hidden + i] = sl_f32_to_bf16(acc[i]);
  }
  free(acc);
  return s;
}

/* ---- the API ----------------------------------------------------------------------------- */

sl_status_t sl_moe_comm_dispatch(sl_moe_comm_t *h, const sl_moe_comm_dispatch_args_t *a, sl_stream_t *stream) {
  SL_CHECK(check_call(h, a->num_tokens, a->x, "dispatch"));
  h->epoch++;
  if (h->net) {
    if (a->path_taken) *a->path_taken = SL_MOE_COMM_PATH_CPU;
    return sl_moe_net_dispatch(h, a, stream);
  }
  sl_moe_ep_params_t p;
  sl_moe_comm_params(h, &p);
  p.x = a->x;
  p.topk_ids = a->topk_ids;
  p.topk_weights = a->topk_weights;
  p.num_tokens = a->num_tokens;
  sl_moe_comm_path_t path = pick_path(h, a->num_tokens, a->force_path);
  if (a->path_taken) *a->path_taken = path;
  if (a->net_taken) *a->net_taken = SL_MOE_NET_DIRECT;
  if (path == SL_MOE_COMM_PATH_CPU) return cpu_dispatch(h, &p);
  const char *src = "comm/moe_ep.cu";
  const sl_moe_ep_layout_t *l = &h->l;
  if (path == SL_MOE_COMM_PATH_DECODE) {
    int th = SL_MOE_COMM_DECODE_THREADS;
    long long work = (long long)l->nsenders * l->max_tokens;
    if ((long long)a->num_tokens * l->nranks > work) work = (long long)a->num_tokens * l->nranks;
    return sl_moe_comm_launch(h, src, "sl_moe_ep_dispatch_fused", th, sl_moe_comm_grid(h, work, th), true, &p, stream);
  }
  int th = SL_MOE_COMM_PREFILL_THREADS;
  SL_CHECK(
      sl_moe_comm_launch(h, src, "sl_moe_ep_route", th, sl_moe_comm_grid(h, a->num_tokens, th), false, &p, stream));
  SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_ep_publish", 32, 1, false, &p, stream));
  SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_ep_send", th,
                              sl_moe_comm_grid(h, (long long)a->num_tokens * l->nranks, th), false, &p, stream));
  SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_ep_gather", th,
                              sl_moe_comm_grid(h, (long long)l->nsenders * l->max_tokens, th), false, &p, stream));
  return sl_moe_comm_launch(h, src, "sl_moe_ep_ack", 32, 1, false, &p, stream);
}

sl_status_t sl_moe_comm_combine(sl_moe_comm_t *h, const sl_moe_comm_combine_args_t *a, sl_stream_t *stream) {
  SL_CHECK(check_call(h, a->num_tokens, a->out, "combine"));
  if (h->epoch == 0) return SL_ERR(SL_ERR_INVALID, "moe combine before any dispatch on this handle");
  if (h->net) {
    if (a->path_taken) *a->path_taken = SL_MOE_COMM_PATH_CPU;
    return sl_moe_net_combine(h, a, stream);
  }

  sl_moe_ep_params_t p;
  sl_moe_comm_params(h, &p);
  p.topk_ids = a->topk_ids;
  p.topk_weights = a->topk_weights;
  p.num_tokens = a->num_tokens;
  p.expert_out = a->expert_out;
  p.out = a->out;
  sl_moe_comm_path_t path = pick_path(h, a->num_tokens, a->force_path);
  if (a->path_taken) *a->path_taken = path;
  if (path == SL_MOE_COMM_PATH_CPU) return h->l.tp ? sl_moe_tp_combine_cpu(h, &p) : cpu_combine_ep(h, &p);
  if (h->l.tp) return sl_moe_tp_combine_gpu(h, &p, path, stream);
  const char *src = "comm/moe_ep.cu";
  const sl_moe_ep_layout_t *l = &h->l;
  /* expert rows to send back: at most K per received token, at most capacity per expert */
  long long rows = (long long)l->nsenders * l->max_tokens * l->top_k;
  if (rows > (long long)l->experts_per_rank * l->capacity) rows = (long long)l->experts_per_rank * l->capacity;
  if (path == SL_MOE_COMM_PATH_DECODE) {
    int th = SL_MOE_COMM_DECODE_THREADS;
    long long work = rows > a->num_tokens ? rows : a->num_tokens;
    return sl_moe_comm_launch(h, src, "sl_moe_ep_combine_fused", th, sl_moe_comm_grid(h, work, th), true, &p, stream);
  }
  int th = SL_MOE_COMM_PREFILL_THREADS;
  SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_ep_combine_send", th, sl_moe_comm_grid(h, rows, th), false, &p, stream));
  return sl_moe_comm_launch(h, src, "sl_moe_ep_combine_reduce", th, sl_moe_comm_grid(h, a->num_tokens, th), false, &p,
                            stream);
}

sl_status_t sl_moe_comm_check(sl_moe_comm_t *h, sl_stream_t *stream) {
  if (h->net) { /* host-driven: errors were returned by dispatch/combine */
    if (h->failed) return SL_ERR(SL_ERR_PEER, "moe comm: handle failed earlier");
    return h->backend == SL_BACKEND_CUDA ? sl_stream_sync(h->dev, stream) : SL_OK;
  }
  if (h->backend != SL_BACKEND_CUDA) return h->failed ? SL_ERR(SL_ERR_PEER, "moe comm: handle failed earlier") : SL_OK;
  SL_CHECK(sl_stream_sync(h->dev, stream));
  SL_CHECK(sl_device_check(h->dev, "moe dispatch/combine kernels"));
  volatile sl_flag_timeout_t *rec = h->timeout_host;
  if (rec->timed_out) {
    char what[96];
    describe_flag(h, rec->flag_index, what, sizeof what);
    return timeout_error(h, rec->peer, what, rec->expected, rec->observed, (double)rec->waited_ns / 1e6);
  }
  int err[4];
  SL_CHECK(sl_memcpy(h->dev, err, h->ws + h->l.ws_err, sizeof err, stream));
  SL_CHECK(sl_stream_sync(h->dev, stream));
  if (err[0] == 0) return SL_OK;
  int zero[4] = {0, 0, 0, 0};
  SL_CHECK(sl_memcpy(h->dev, h->ws + h->l.ws_err, zero, sizeof zero, stream));
  SL_CHECK(sl_stream_sync(h->dev, stream));
  if (err[0] == SL_MOE_EP_ERR_BARRIER) {
    h->failed = SL_ERR_TIMEOUT;
    return SL_ERR(SL_ERR_TIMEOUT,
                  "moe comm: rank %d: a grid barrier of block %d of %d timed out inside the "
                  "cooperative kernel (a block stayed behind, most likely waiting on a peer); handle unusable",
                  h->l.rank, err[1], err[2]);
  }
  if (err[0] == SL_MOE_EP_ERR_RANGE)
    return SL_ERR(SL_ERR_RANGE,
                  "moe dispatch: rank %d token %d k %d has expert id %d outside [0, %d); the pair "
                  "was skipped",
                  h->l.rank, err[1], err[2], err[3], h->l.num_experts);
  return SL_ERR(SL_ERR_CAPACITY,
                "moe dispatch: local expert %d of rank %d got more than its capacity of %d rows "
                "(first excess from rank %d); the excess contributes zero. Create the handle with a larger "
                "expert_capacity (0 = dropless)",
                err[1], h->l.rank, err[2], err[3]);
}

/* ---- JIT points -------------------------------------------------------------------------- */

sl_status_t sl_moe_comm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  (void)arch;
  static const char *ep_decode[] = {"sl_moe_ep_dispatch_fused", "sl_moe_ep_combine_fused"};
  static const char *ep_prefill[] = {"sl_moe_ep_route", "sl_moe_ep_send", "sl_moe_ep_gather", "sl_moe_ep_combine_send",
                                     "sl_moe_ep_combine_reduce"};
  static const char *ep_one[] = {"sl_moe_ep_publish", "sl_moe_ep_ack"};
  static const char *tp_decode[] = {"sl_moe_tp_combine_fused"};
  static const char *tp_prefill[] = {"sl_moe_tp_partial", "sl_moe_tp_allreduce", "sl_moe_tp_to_bf16"};
  struct {
    const char *src;
    const char **entries;
    int n, threads;
  } groups[] = {
      {"comm/moe_ep.cu", ep_decode, 2, SL_MOE_COMM_DECODE_THREADS},
      {"comm/moe_ep.cu", ep_prefill, 5, SL_MOE_COMM_PREFILL_THREADS},
      {"comm/moe_ep.cu", ep_one, 2, 32},
      {"comm/moe_tp.cu", tp_decode, 1, SL_MOE_COMM_DECODE_THREADS},
      {"comm/moe_tp.cu", tp_prefill, 3, SL_MOE_COMM_PREFILL_THREADS},
  };
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
      if (strstr(groups[g].src, "moe_tp") && payload != 0) continue;
      for (int i = 0; i < groups[g].n; i++) {
        sl_jit_spec_t spec;
        sl_jit_spec_init(&spec, groups[g].src, groups[g].entries[i]);
        SL_CHECK(sl_jit_spec_define(&spec, "SL_EP_PAYLOAD", "%d", payload));
        SL_CHECK(sl_jit_spec_define(&spec, "SL_EP_THREADS", "%d", groups[g].threads));
        SL_CHECK(fn(&spec, user));
      }
    }
  }
  return SL_OK;
}
