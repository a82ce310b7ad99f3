/* MoE dispatch, one GPU (TP=1) or one rank's expert range: copy every token into the
 * expert-major buffers [E_local, capacity, H] of the experts it is routed to, count tokens
 * per expert, and record the slot (buffer row) of every (token, k) for combine. Everything
 * stays on the device (no host synchronisation; CUDA-graph capturable). */
#ifndef SL_MOE_DISPATCH_H
#define SL_MOE_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/moe_layout.h"
#include "kernels/quant_formats.h" /* SL_QRULE_* */
#include "kernels/sl_dtype.h"
#include "kernels/router.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SL_MOE_PATH_NONE = 0,  /* nothing ran (T = 0) or the CPU backend */
  SL_MOE_PATH_FUSED = 1, /* decode: one cooperative launch, route + grid barrier + copy */
  SL_MOE_PATH_SPLIT = 2, /* prefill: a routing launch, then a copy launch */
  SL_MOE_PATH_CPU = 3,
  SL_MOE_PATH_REPLICATED = 4, /* decode, T*K <= SL_MOE_REPL_MAX_PAIRS: one plain launch, every
                               * block ranks all pairs in shared memory, no grid barrier */
} sl_moe_path_t;
const char *sl_moe_path_name(sl_moe_path_t p);

/* Payload of the expert buffers: a bf16 copy of x, or x quantized once per token inside
 * the copy (formats and rules of kernels/quant.h, bit-identical to sl_quant_ref of the
 * token's row), with the scales laid out per expert like the rows:
 *   codes  [E_local, capacity, H] bytes (FP8) or [E_local, capacity, H/2] (FP4, element 2i
 *          in the low nibble), in expert_x;
 *   scales [E_local, capacity, H/block] in expert_scales: fp32 for FP8_GROUP (block 128),
 *          one byte per block for MXFP8/MXFP4 (E8M0, block 32) and NVFP4 (E4M3, block 16).
 * A block holding NaN/Inf gets the format's NaN scale and codes, and the dispatch reports
 * SL_ERR_NUMERIC (token, block) through the error record. */
typedef enum {
  SL_MOE_PAYLOAD_BF16 = 0,
  SL_MOE_PAYLOAD_FP8_GROUP = 1, /* quant_rule IEEE (absmax/448) or CEIL (UE8M0) */
  SL_MOE_PAYLOAD_MXFP8 = 2,     /* quant_rule CEIL ("RCEIL") or FLOOR (OCP) */
  SL_MOE_PAYLOAD_MXFP4 = 3,     /* quant_rule CEIL or FLOOR */
  SL_MOE_PAYLOAD_NVFP4 = 4,     /* global_scale: the fp32 encode scale, 448*6 / tensor absmax */
} sl_moe_payload_t;
const char *sl_moe_payload_name(sl_moe_payload_t p);
/* Bytes of one expert-buffer row of `hidden` elements, and scales per row (0 for bf16). */
size_t sl_moe_payload_row_bytes(sl_moe_payload_t p, int hidden);
int sl_moe_payload_scales_per_row(sl_moe_payload_t p, int hidden);
size_t sl_moe_payload_scale_bytes(sl_moe_payload_t p); /* bytes of one scale */

typedef struct {
  int num_tokens;               /* T >= 0; T <= the workspace's max_tokens */
  int hidden;                   /* H, a multiple of 8 */
  int top_k;                    /* K in [1, 32] */
  int num_experts;              /* E: ids must be in [0, E), else SL_ERR_RANGE */
  int expert_begin, expert_end; /* this rank's experts; others are skipped (slot -1) */
  int capacity;                 /* rows per local expert (sl_moe_dropless_capacity) */
  sl_moe_payload_t payload;
  int quant_rule;               /* SL_QRULE_* of kernels/quant_formats.h (ignored for bf16, NVFP4) */
  float global_scale;           /* NVFP4 only */
  const void *x;                /* [T, H] bf16 */
  const int32_t *topk_ids;      /* [T, K] */
  void *expert_x;               /* [E_local, capacity, row bytes]; padding rows untouched */
  void *expert_scales;          /* quantized payloads: [E_local, capacity, H/block] */
  int32_t *expert_counts;       /* [E_local] tokens dispatched to each (<= capacity) */
  int32_t *slots;               /* [T, K] row in expert_x, or -1 */
  void *workspace;              /* sl_moe_dispatch_workspace_bytes, zeroed once */
  size_t workspace_bytes;
  int force_path;               /* 0: DESIGN.md rule; SL_MOE_PATH_FUSED/SPLIT/REPLICATED: that path */
  sl_moe_path_t *path_taken;    /* optional out: which path ran */
  int force_span;               /* 0: host choice; > 0: chunks per warp item of the split path's copy
                                 * (benchmark comparison; the result is the same) */
  int force_route_rounds;       /* 0: host choice (sl_moe_route_rounds: fewest rounds with routing
                                 * blocks <= SMs, and the scan in one batch for a resident copy); 1, 2, 4
                                 * or 8: pairs per thread of the split path's routing kernel
                                 * (comparison; the result is the same) */
  int split_no_pdl;             /* 1: launch the split path's copy without programmatic dependent
                                 * launch (comparison; the result is the same) */
  int force_repl_rank;          /* 0: default (SL_MOE_REPL_RANK_HIST); SL_MOE_REPL_RANK_*: the replicated
                                 * path's ranking (comparison; the result is the same) */
  int force_repl_balance;       /* 0: off (default); SL_MOE_REPL_BAL_*: the replicated path runs the balanced
                                 * kernel, a grid of blocks-per-SM x SMs blocks with equal contiguous item
                                 * ranges (comparison; the result is the same). Applies when the replicated
                                 * path runs (chosen or forced), ignored on the others; histogram ranking
                                 * only (force_repl_rank 0 or HIST, else SL_ERR_INVALID); every payload; a
                                 * route is then run by sl_router first (not fused). */
  int force_repl_warps;         /* 0: host choice (sl_moe_repl_warps); 1..32: warps per block of the replicated
                                 * kernel, plain or computing the top-k (comparison; the result is the same);
                                 * the scan ranking (SL_MOE_REPL_RANK_SCAN) runs at 8 only */
  int force_copy;               /* 0: host choice (sl_moe_split_copy); SL_MOE_COPY_REGS / _STAGED / _DIRECT: that
                                 * copy kernel for the split path's quantized payloads (comparison; the result is
                                 * the same). STAGED where sl_moe_staged_applies holds, DIRECT where
                                 * sl_moe_direct_applies holds, else SL_ERR_INVALID */
  int force_staged_seg;         /* 0: host choice; else columns per staged item (a multiple of 512 dividing H) */
  int force_staged_stages;      /* 0: host choice; else x segments in flight per warp of the staged copy, 2..4 */
  int staged_scale_bulk;        /* 0: the staged copy stores the scales by 16-byte stores from the lanes (default);
                                 * 1: by one bulk copy per row, as the codes (comparison; the result is the same) */
  /* Optional (NULL: none): the top-k router to run first, on route->logits, writing
   * route->topk_ids / topk_weights; topk_ids above must be route->topk_ids, and T, K and E
   * must agree. On the GPU, when sl_moe_dispatch_route_fusable holds, the replicated kernel
   * computes the top-k itself (kernels/router_topk.cuh: the router kernel's warp routine, so
   * the same ids and weights bit for bit) -- one launch instead of two; otherwise sl_router
   * runs first. route_pdl (sm_90+, fused only): the kernel is launched as a programmatic
   * dependent of the previous kernel in the stream, which must be the one writing the logits
   * (it waits with griddepcontrol.wait before reading them; x, and everything it writes, must
   * not depend on that kernel). route_fused (optional out): whether the fused kernel ran. */
  const sl_router_args_t *route;
  bool route_pdl;
  bool *route_fused;
} sl_moe_dispatch_args_t;

/* The split path's copy kernel for quantized payloads: one warp per (token, 512-column chunk) through
 * registers (the previous default, and the one for bf16); the staged copy: items of `seg` columns whose
 * x segments the bulk-copy engine brings into shared memory `stages` ahead, quantized there and stored to
 * the K rows -- codes by bulk copies, scales by the lanes' 16-byte stores (kernels/moe_dispatch.cu,
 * MOE_KERNEL 4); the direct copy: a resident grid of warps walking items of SL_MOE_DIRECT_SEG columns, two
 * items' x in flight in registers, quantized into a per-warp row buffer and stored by 16-byte stores
 * (MOE_KERNEL 5). */
enum { SL_MOE_COPY_REGS = 1, SL_MOE_COPY_STAGED = 2, SL_MOE_COPY_DIRECT = 3 };
/* Whether the direct copy can run these arguments: a quantized payload, H a multiple of SL_MOE_DIRECT_SEG
 * (1024), x, expert_x and expert_scales 16-byte aligned, no force_span. */
bool sl_moe_direct_applies(const sl_moe_dispatch_args_t *a);
/* The copy kernel (SL_MOE_COPY_*) the split path runs for these arguments on a GPU of `arch` with `num_sms` SMs:
 * force_copy if set; else DIRECT where it applies and there are at least SL_MOE_DIRECT_MIN_ITEMS items per 32
 * warps per SM (a long steady stream: DeepSeek-V3 at T=16384, every quantized payload); else STAGED where it
 * applies; else REGS (always REGS for bf16). */
#define SL_MOE_DIRECT_MIN_ITEMS 16
int sl_moe_split_copy(const sl_moe_dispatch_args_t *a, int arch, int num_sms);
/* The split path's routing rounds (pairs per thread of its 512-thread blocks; force_route_rounds = 0) for `pairs`
 * = T x K on `num_sms` SMs with `num_local_experts`: the fewest of 1, 2, 4, 8 with routing blocks <= SMs and, when
 * the copy runs on a resident grid (`resident_copy`: the staged and direct copies), up to 4 rounds, blocks x
 * E_local <= 512 x 32 (the last block's scan in one batch of loads): T=16384, K=8 on 132 SMs -> Qwen3 (E=128) 2,
 * DeepSeek-V3 (E=256) 4 with a resident copy, 2 without. */
int sl_moe_route_rounds(long pairs, int num_sms, int num_local_experts, bool resident_copy);
bool sl_moe_staged_applies(const sl_moe_dispatch_args_t *a, int arch, int *seg, int *stages, size_t *smem_bytes);

/* Ranking of the replicated (decode) path: a shared histogram of the pairs below the block's
 * own (default), or the scan of all staged ids per needed pair (the previous kernel). */
enum { SL_MOE_REPL_RANK_HIST = 1, SL_MOE_REPL_RANK_SCAN = 2 };
/* Warps per block of the replicated kernel, OR'ed into its spec variant (and route spec's
 * repl_rank) with the ranking: SL_MOE_REPL_RANK_* | SL_MOE_REPL_WARPS(n), n in 1..32; n = 0 (or
 * no SL_MOE_REPL_WARPS) takes sl_moe_repl_warps(hidden). */
#define SL_MOE_REPL_WARPS(n) ((n) << 4)
/* The host's warps per block for the replicated kernel: the largest of 8, 7, 6, 5, 4 that
 * divides the row's 256-column chunks (each block then copies chunks of ONE token, so its
 * window -- the pairs it ranks after the histogram of the earlier ones -- is one token's K
 * pairs: DeepSeek-V3's 28 chunks take 7 warps, 512 blocks at T=128, instead of 8 warps whose
 * blocks straddle two tokens), else 8. */
int sl_moe_repl_warps(int hidden);

/* Balanced replicated kernel (force_repl_balance): threads per block x blocks per SM. */
enum {
  SL_MOE_REPL_BAL_256X2 = 1,
  SL_MOE_REPL_BAL_256X3 = 2,
  SL_MOE_REPL_BAL_512X1 = 3,
  SL_MOE_REPL_BAL_512X2 = 4,
  SL_MOE_REPL_BAL_LAST = SL_MOE_REPL_BAL_512X2
};
/* Threads per block and blocks per SM of a balance choice; false if it is not one. */
bool sl_moe_repl_bal_shape(int balance, int *threads, int *blocks_per_sm);
const char *sl_moe_repl_bal_name(int balance); /* "bal 2x256", ... */
/* JIT spec of the balanced replicated kernel (histogram ranking) for a balance choice. */
sl_status_t sl_moe_dispatch_bal_spec(int hidden, int top_k, int num_local, sl_moe_payload_t payload, int quant_rule,
                                     int balance, sl_jit_spec_t *spec);

/* Workspace bytes for calls of up to `max_tokens` tokens. A workspace holds the grid
 * barrier word and the error record: one workspace per stream (two dispatches in flight
 * on one workspace would share the barrier). */
size_t sl_moe_dispatch_workspace_bytes(int max_tokens, int top_k, int num_local_experts);
/* Zero the workspace (once after allocation, and after a reported timeout). */
sl_status_t sl_moe_dispatch_workspace_init(sl_device_t *dev, void *workspace, size_t bytes, sl_stream_t *stream);

/* Dispatch (asynchronous on CUDA). Data errors found by the kernels (invalid ids,
 * capacity overflow, barrier timeout) are written to the workspace's error record and
 * reported by sl_moe_dispatch_check; invalid arguments are reported here. */
sl_status_t sl_moe_dispatch(sl_device_t *dev, const sl_moe_dispatch_args_t *a, sl_stream_t *stream);

/* Wait for `stream`, read the workspace's error record and turn it into SL_ERR_RANGE
 * (token, id), SL_ERR_CAPACITY (expert, count, capacity), SL_ERR_NUMERIC (token, block) or
 * SL_ERR_TIMEOUT; clears it. */
sl_status_t sl_moe_dispatch_check(sl_device_t *dev, void *workspace, sl_stream_t *stream);

/* The path the host rule picks for these arguments on a device with `num_sms` SMs. */
sl_moe_path_t sl_moe_dispatch_choose_path(const sl_moe_dispatch_args_t *a, int num_sms);

/* The CPU reference (also the CPU backend); host pointers. Errors go to the workspace's
 * record exactly as on the GPU (lowest offending pair / expert first). */
sl_status_t sl_moe_dispatch_ref(const sl_moe_dispatch_args_t *a);

/* Whether the GPU dispatch computes the top-k inside the replicated kernel for these arguments
 * (route set, bf16 payload, 1 <= T <= SL_MOE_TOPK_FUSED_MAX_TOKENS, the replicated path chosen
 * or forced); the router's own argument checks run at the launch. */
bool sl_moe_dispatch_route_fusable(const sl_moe_dispatch_args_t *a, int num_sms);
/* JIT spec of the replicated kernel computing the top-k itself (route: the router's arguments;
 * repl_rank: the ranking as sl_moe_dispatch_args_t.force_repl_rank, 0 default, with
 * SL_MOE_REPL_WARPS(n) OR'ed in for n warps per block). */
sl_status_t sl_moe_dispatch_route_spec(int hidden, int top_k, int num_local, int repl_rank,
                                       const sl_router_args_t *route, sl_jit_spec_t *spec);

/* OR'ed into the staged copy's spec variant: the scales by bulk copies (sl_moe_dispatch_args_t.staged_scale_bulk). */
#define SL_MOE_STAGED_SCALE_BULK (1 << 20)
/* JIT spec of kernel `which` (0 fused, 1 route, 2 copy, 3 replicated, 4 staged copy, 5 direct copy) for these
 * dimensions and payload, default variant. */
sl_status_t sl_moe_dispatch_spec(int hidden, int top_k, int num_local, sl_moe_payload_t payload, int quant_rule,
                                 int which, sl_jit_spec_t *spec);
/* The same with a variant: for the routing kernel (1) its rounds (1, 2, 4, 8), for the
 * replicated kernel (3) an SL_MOE_REPL_RANK_* (0 = default) | SL_MOE_REPL_WARPS(n) (0 = the
 * host's choice), for the staged copy (4, quantized payloads) seg + stages (0: the host's
 * default shape), | SL_MOE_STAGED_SCALE_BULK for its scales by bulk copies; 0 = default; ignored by the
 * others. */
sl_status_t sl_moe_dispatch_spec_variant(int hidden, int top_k, int num_local, sl_moe_payload_t payload,
                                         int quant_rule, int which, int variant, sl_jit_spec_t *spec);
/* Every configuration point (Qwen3-30B-A3B and DeepSeek-V3 shapes, TP 1/2/4/8 ranges). */
sl_status_t sl_moe_dispatch_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user),
                                       void *user);

#ifdef __cplusplus
}
#endif
#endif
