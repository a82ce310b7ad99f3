/* MoE EP dispatch/combine across nodes: internal to comm/moe_ep.c and comm/moe_internode.c
 * (the public API is comm/moe_ep.h: sl_moe_comm_create_world, the same dispatch/combine).
 *
 * Transports per peer: same node -> shared memory (comm/symm.h, peer stores + release
 * flags); other node -> the UCX proxy (comm/proxy.h: put, then the flag, never before its
 * data). Every message is one contiguous block: a header, then entries (token payload +
 * meta), written into a per-sender region of the receiver, then one flag = epoch.
 *
 * Memory of rank r (world of n ranks, L ranks per node, max M tokens, K = top_k):
 *   proxy window:  wrecv[s]  (n x MSG)  dispatch messages of remote senders s
 *                  wcomb     (M*K rows) combine rows from remote responders
 *                  wsend[d]  (n x MSG)  staging of r's outgoing dispatch messages
 *                  wcsend    (n*M*Kr rows) staging of r's outgoing combine rows
 *   proxy flags:   disp[s] = s, comb[q] = n + q
 *   node shm:      sdisp_flag[s], scomb_flag[q] (n each), srecv[s] (n x MSG: messages of
 *                  same-node senders, and forwarded messages of remote senders), scomb
 *                  (M*K rows from same-node responders, self included)
 *   MSG = header (count, mode, base[n]) + M entries; Kr = min(K, experts per rank).
 *   Sizes grow with n x M (no chunking yet: comm/NOTES.md "Memory").
 *
 * Dispatch (every rank, epoch e):
 *   1. route: pairs per destination rank; for destination q the source's combine rows of q
 *      start at base_q (prefix of the pair counts of ranks < q): header base[q].
 *   2. send: same node -> entries straight into srecv[r] of q + release sdisp_flag[r];
 *      remote, DIRECT -> one message per rank into its wrecv[r] (proxy put + flag disp[r]);
 *      remote, NODE_AGG -> one message per remote node, entries with the pairs of the
 *      whole node, to the forwarder f = node's first rank + (r's local rank) into wrecv[r].
 *   3. forward: for each remote sender s that r forwards for: wait disp[s]; if the message
 *      is NODE_AGG, copy each entry to every rank q of this node holding one of its pairs
 *      (pairs filtered for q) into srecv[s] of q, header base[q], release sdisp_flag[s].
 *   4. gather: for every sender s (rank order): same node -> wait sdisp_flag[s]; remote ->
 *      wait until sdisp_flag[s] (forwarded) or disp[s] with a DIRECT header; entries in
 *      token order; pair j of sender s goes to expert-major row (atomic-free: one thread).
 *  Combine: responder q sends to EVERY source s (empty too) the rows of s's pairs in the
 *   order they arrived, at s's base_q: same node -> into scomb of s + scomb_flag[q];
 *   remote -> put into wcomb of s + flag comb[q]. The source waits every q's flag, then
 *   sums w[t,k] * row in k order in fp32 (fmaf), rounding once: the single-rank bits.
 *  Flow control, with no extra acks: every rank sends a combine message to every rank,
 *   after its gather. So rank s starts dispatch e+1 only after every rank finished reading
 *   s's (and forwarded) dispatch-e data, and a responder writes s's combine rows of e+1
 *   only after s sent dispatch e+1, i.e. after s read combine e. Staging areas are reused
 *   under the same argument (a put's source is read before its flag lands).
 *  Every wait is bounded (SL_TIMEOUT_MS): SL_ERR_TIMEOUT names the rank, node and host.
 *
 * GPU: HOST-DRIVEN mode. dispatch/combine synchronise the stream, copy the inputs to
 * pinned host memory, run the protocol above from the host (the proxy window is pinned
 * host memory: staged mode), and copy the expert-major rows / outputs to the device.
 * Correct first; the device-initiated version (kernels packing into the mapped window and
 * posting with comm/ring.cuh) is the next step. */
#ifndef SL_MOE_INTERNODE_H
#define SL_MOE_INTERNODE_H
#ifndef __CUDACC_RTC__

#include "comm/moe_ep.h"
#include "comm/proxy.h"
#include "comm/symm.h"

#define SL_MOE_NET_MAX_RANKS 64

/* AUTO mode rule (per sender, per call): NODE_AGG when the remote entries it would send
 * per rank exceed those per node by at least 1/4 and it has at least this many tokens;
 * DIRECT otherwise (the forward hop costs one more copy and one more flag wait, which
 * only pays when it removes network bytes). See `sluice bench moe --nodes-sim`. */
#define SL_MOE_NET_AGG_MIN_TOKENS 64

typedef struct sl_moe_net sl_moe_net_t;

sl_status_t sl_moe_net_create(sl_moe_comm_t *h, const sl_boot_t *boot);
void sl_moe_net_destroy(sl_moe_net_t *n);
sl_status_t sl_moe_net_dispatch(sl_moe_comm_t *h, const sl_moe_comm_dispatch_args_t *a, sl_stream_t *stream);
sl_status_t sl_moe_net_combine(sl_moe_comm_t *h, const sl_moe_comm_combine_args_t *a, sl_stream_t *stream);
sl_moe_transport_t sl_moe_net_transport(const sl_moe_net_t *n, int peer);
void sl_moe_net_stats(const sl_moe_net_t *n, sl_moe_net_stats_t *out);
/* the proxy (benchmarks print its counters) */
sl_proxy_t *sl_moe_net_proxy(const sl_moe_net_t *n);

#endif
#endif
