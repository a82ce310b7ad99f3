/* MoE dispatch and combine across the ranks of a node, one API for the deployments of
 * DESIGN.md: TP (input replicated; each rank runs its expert range, then an all-reduce)
 * and EP/DP (each rank routes its own tokens to the ranks hosting their experts over NVLink
 * peer stores or shared memory, with per-token release flags). Protocol and layout:
 * comm/moe_ep_layout.h. Same protocol on the CPU backend (POSIX shm + C11 atomics).
 *
 * Use, per MoE layer call (collective: every rank of the group, same order):
 *   sl_moe_comm_dispatch(h, &d, stream);      tokens land in the expert-major buffers
 *   ... expert FFN reads sl_moe_comm_experts(h)->expert_x/scales/counts, writes expert_out ...
 *   sl_moe_comm_combine(h, &c, stream);       out[t] = sum_k w[t,k] * expert_out(t,k)
 *   sl_moe_comm_check(h, stream);             when the caller can afford a sync: device errors
 * Nothing synchronises with the host; counts stay on the device; capturable in a CUDA graph. */
#ifndef SL_COMM_MOE_EP_H
#define SL_COMM_MOE_EP_H

#include <mpi.h>
#include <stdint.h>

#include "comm/moe_ep_layout.h"
#include "runtime/sl_boot.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_MOE_DEPLOY_EP = 0, SL_MOE_DEPLOY_TP = 1 } sl_moe_deploy_t;

typedef enum {
  SL_MOE_COMM_PATH_AUTO = 0,    /* the host rule: decode when one warp per token fits the budget */
  SL_MOE_COMM_PATH_DECODE = 1,  /* one cooperative launch per phase (grid barrier inside) */
  SL_MOE_COMM_PATH_PREFILL = 2, /* split launches over more blocks */
  SL_MOE_COMM_PATH_CPU = 3,     /* the CPU backend ran it */
} sl_moe_comm_path_t;
const char *sl_moe_comm_path_name(sl_moe_comm_path_t p);

/* How a peer is reached: peer stores inside a node, the UCX proxy (comm/proxy.h) for peers
 * on other nodes (handles made by sl_moe_comm_create_world over several nodes). */
typedef enum {
  SL_MOE_TRANSPORT_SELF = 0,
  SL_MOE_TRANSPORT_NVLINK = 1, /* CUDA IPC peer pointers */
  SL_MOE_TRANSPORT_SHM = 2,    /* POSIX shared memory (CPU backend) */
  SL_MOE_TRANSPORT_PROXY = 3,  /* UCX proxy across nodes (comm/proxy.h; sl_moe_comm_create_world) */
} sl_moe_transport_t;
const char *sl_moe_transport_name(sl_moe_transport_t t);

typedef struct {
  sl_moe_deploy_t deploy;
  int num_experts;          /* E, divisible by the ranks; rank r hosts [r*E/n, (r+1)*E/n) */
  int top_k;                /* K <= 16 */
  int hidden;               /* H, a multiple of 128; tokens are bf16 */
  int payload;              /* SL_MOE_EP_PAYLOAD_*: what dispatch moves and the experts read */
  float nvfp4_global_scale; /* NVFP4 encode scale (448*6 / absmax of the activations); 0 -> 1 */
  int max_tokens;           /* per rank per call */
  int expert_capacity;      /* rows per local expert; 0 = dropless (senders x max_tokens) */
  int sm_budget;            /* most blocks a comm kernel may use; 0 = every SM */
  long timeout_ms;          /* bound of every wait; 0 = SL_TIMEOUT_MS */
} sl_moe_comm_config_t;

typedef struct sl_moe_comm sl_moe_comm_t;

/* Inter-node dispatch mode (handles of sl_moe_comm_create_world spanning several nodes).
 * DIRECT: one message per destination rank over the network (decode).
 * NODE_AGG: one message per destination node to a forwarder rank there, which copies each
 *   token to the ranks of its node that need it (a token wanted by several ranks of one
 *   node crosses the network once; prefill). AUTO: the rule of comm/moe_internode.c. */
typedef enum { SL_MOE_NET_AUTO = 0, SL_MOE_NET_DIRECT = 1, SL_MOE_NET_NODE_AGG = 2 } sl_moe_net_mode_t;
const char *sl_moe_net_mode_name(sl_moe_net_mode_t m);

/* Collective over `comm` (the ranks of one node; at most 8): allocate the symmetric buffers,
 * map the peers, allocate the expert-major buffers. */
sl_status_t sl_moe_comm_create(sl_device_t *dev, MPI_Comm comm, const sl_moe_comm_config_t *cfg, sl_moe_comm_t **out);
/* Collective over boot->world: the EP group is every rank of the job, nodes as the boot
 * sees them (real or SL_RANKS_PER_NODE-simulated). With one node this is
 * sl_moe_comm_create(dev, boot->node_comm, ...). With several: peers of this node through
 * shared memory, peers on other nodes through the UCX proxy (comm/moe_internode.h; EP only,
 * at most SL_MOE_NET_MAX_RANKS ranks, equal ranks per node). On a GPU that path is
 * host-driven (the host syncs the stream and moves the rows): see comm/moe_internode.h. */
sl_status_t sl_moe_comm_create_world(sl_device_t *dev, const sl_boot_t *boot, const sl_moe_comm_config_t *cfg,
                                     sl_moe_comm_t **out);
/* Collective when every rank is alive; after a peer failure it still frees its own side. */
void sl_moe_comm_destroy(sl_moe_comm_t *h);

/* The expert-major buffers dispatch fills (device memory on CUDA). Row `slot` of local
 * expert e is e * capacity + slot; rows >= expert_counts[e] are stale. */
typedef struct {
  int num_local_experts, expert_begin, capacity;
  int payload;
  void *expert_x;         /* [E_local * capacity, row_bytes]: bf16 row or quantized codes */
  void *expert_scales;    /* [E_local * capacity, scale_row_bytes] (linear); NULL for bf16 */
  int32_t *expert_counts; /* [E_local] rows dispatched this call (may exceed capacity:
                             the excess was dropped and reported) */
  float *expert_weights;  /* [E_local * capacity] the router weight of each row */
  long long row_bytes, scale_row_bytes;
  float global_scale; /* NVFP4 */
} sl_moe_comm_experts_t;
const sl_moe_comm_experts_t *sl_moe_comm_experts(const sl_moe_comm_t *h);
/* The layout (for inter-node handles only the configuration and per-token byte fields are
 * meaningful: nranks is the world size, the offsets are the node protocol's and unused). */
const sl_moe_ep_layout_t *sl_moe_comm_layout(const sl_moe_comm_t *h);
sl_moe_transport_t sl_moe_comm_transport(const sl_moe_comm_t *h, int peer);
int sl_moe_comm_rank(const sl_moe_comm_t *h);
int sl_moe_comm_size(const sl_moe_comm_t *h);

typedef struct {
  int num_tokens;            /* this rank's T <= max_tokens (TP: the same T on every rank) */
  const void *x;             /* [T, H] bf16 */
  const int32_t *topk_ids;   /* [T, K]; ids outside [0, E) are skipped and reported */
  const float *topk_weights; /* [T, K] */
  sl_moe_comm_path_t force_path;
  sl_moe_comm_path_t *path_taken; /* optional out */
  sl_moe_net_mode_t net_mode;     /* inter-node handles: this sender's mode (0 = AUTO) */
  sl_moe_net_mode_t *net_taken;   /* optional out: the mode this rank sent with */
} sl_moe_comm_dispatch_args_t;

typedef struct {
  int num_tokens;            /* the same T as the matching dispatch */
  const int32_t *topk_ids;   /* the same ids */
  const float *topk_weights; /* the same weights */
  const void *expert_out;    /* [E_local * capacity, H] bf16, rows as in expert_x */
  void *out;                 /* [T, H] bf16 */
  sl_moe_comm_path_t force_path;
  sl_moe_comm_path_t *path_taken;
} sl_moe_comm_combine_args_t;

sl_status_t sl_moe_comm_dispatch(sl_moe_comm_t *h, const sl_moe_comm_dispatch_args_t *a, sl_stream_t *stream);
sl_status_t sl_moe_comm_combine(sl_moe_comm_t *h, const sl_moe_comm_combine_args_t *a, sl_stream_t *stream);

/* Wait for `stream` and turn what the kernels recorded into a status: SL_ERR_TIMEOUT naming
 * the peer that did not signal, SL_ERR_RANGE (an expert id out of range), SL_ERR_CAPACITY
 * (rows dropped). The CPU backend reports these from dispatch/combine directly. After a
 * timeout the handle is unusable (peers disagree on the epoch): destroy it. */
sl_status_t sl_moe_comm_check(sl_moe_comm_t *h, sl_stream_t *stream);

/* Inter-node traffic of this rank since the handle was made (zero for node handles):
 * payload bytes it put over the network in dispatch / combine, messages, and the calls
 * that went DIRECT / NODE_AGG. */
typedef struct {
  unsigned long long dispatch_net_bytes, combine_net_bytes, forward_bytes, net_msgs;
  unsigned long long calls_direct, calls_node_agg;
} sl_moe_net_stats_t;
void sl_moe_comm_net_stats(const sl_moe_comm_t *h, sl_moe_net_stats_t *out);

/* The path the host rule picks for T tokens (decode: one warp per token fits the budget). */
sl_moe_comm_path_t sl_moe_comm_choose_path(const sl_moe_comm_t *h, int num_tokens);

/* JIT: every kernel point (payloads x decode/prefill), for `sluice jit warm`. */
sl_status_t sl_moe_comm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
