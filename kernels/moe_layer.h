/* The local MoE layer (one GPU, or one rank's expert range): router GEMM -> router (top-k)
 * -> dispatch -> expert FFN -> combine (+ residual), on either backend. */
#ifndef SL_MOE_LAYER_H
#define SL_MOE_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/moe_dispatch.h"
#include "kernels/moe_ffn_gemv.h" /* SL_MOE_FFN_GEMV_* (ffn_gemv_variant) */
#include "kernels/router.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int num_experts, top_k, hidden, inter;   /* E, K, H, moe_intermediate I */
  int expert_begin, expert_end;            /* local experts; [0, E) for TP=1 */
  sl_router_kind_t router_kind;
  bool renormalize;
  int num_groups, topk_groups;             /* SIGMOID_GROUPED only */
  float routed_scaling;                    /* SIGMOID_GROUPED only */
  const void *w_router;                    /* [E, H] bf16 */
  const float *correction_bias;            /* [E] or NULL */
  const void *w_gate_up;                   /* [E_local, 2I, H] bf16 */
  const void *w_down;                      /* [E_local, H, I] bf16 */
} sl_moe_layer_config_t;

typedef struct sl_moe_layer sl_moe_layer_t;

/* Small-T fusion of the layer's non-FFN launches (sl_moe_layer_args_t.fuse_small). */
typedef enum { SL_MOE_FUSE_AUTO = 0, SL_MOE_FUSE_OFF = 1, SL_MOE_FUSE_ON = 2 } sl_moe_fuse_t;
/* What AUTO means: 1 = on (at T <= 16, where it applies). Measured on the H200 (2026-11-29
 * session 3, bench/results/2026-11-29-s3-h200-merged/, `sluice bench moe-local --tokens
 * 1,8,32,128`): layer graph time T=1 35.73 -> 35.06 us, T=8 150.94 -> 150.29 us; the prefix
 * (logits + top-k + dispatch) 7.04 -> 6.28 us at T=1. The bench prints the unfused chain
 * next to it (rows `.../unfused`). */
#define SL_MOE_LAYER_FUSE_SMALL_AUTO 1

/* One-kernel decode layer (sl_moe_layer_args_t.decode_kernel; kernels/moe_layer_decode.cu):
 * the whole layer for ONE token in one cooperative launch -- router logits (published as
 * tagged words), top-k in every block, gate_up + SiLU (the activations published as tagged
 * words too; the _BAR shapes use a grid barrier instead), down and combine -- with
 * each block's share of the down weights brought into shared memory by the copy engine (in the
 * default shape once the block's gate_up is done, so the activations' exchange runs while the
 * down rows stream). It applies (AUTO or ON) on a GPU of sm_90+, at T = 1 with the layer's own
 * router, all stages, H <= 2048, and when K x ceil(H / SMs) x I x 2 bytes of down rows (+ a
 * few KB) fit a block's shared memory (Qwen3-30B-A3B: 205 KB on 132 SMs); elsewhere the usual
 * launches run. AUTO means on: H200, Qwen3-30B-A3B T=1, 23.00-23.28 us in a graph (with decode_pdl;
 * session 20) vs ~35 us for the launches (kernels/NOTES.md "One-kernel decode layer"). */
#define SL_MOE_LAYER_DECODE_KERNEL_AUTO 1
/* The decode kernel as a programmatic dependent launch (sl_moe_layer_args_t.decode_pdl): it may
 * start while the kernel before it still runs, loads its router rows (constants), then waits for
 * that kernel (griddepcontrol.wait) before touching anything else; it lets the next kernel
 * launch once all its blocks have passed a grid-wide barrier. AUTO means on (measured in
 * bench/results/2026-11-29-s5-h200-*; kernels/NOTES.md "One-kernel decode layer"). */
#define SL_MOE_LAYER_DECODE_PDL_AUTO 1
/* Shapes of the decode kernel (sl_moe_layer_args_t.decode_variant; benchmarks): compute warps
 * per block x (gate, up) row pairs each warp loads before using them (+ one copy-issuing warp);
 * _XS: x read from shared memory instead of registers (room for more warps); _TAG: activations
 * as tagged words (no second grid barrier); _PR: the gate_up pairs past the compute warps' last
 * full round go to the copy warp; _IF: the top-k's ids before the stream, its weights later on
 * the copy warp; _DL: the down rows asked for once the block's gate_up is done (by the last compute
 * warp to finish), one mbarrier per rank, at most 6 of a block's 8 copies in flight -- the
 * activations' exchange runs while the down rows stream. Default: the first (fastest on the H200,
 * kernels/NOTES.md "One-kernel decode layer" and "Session 20"). */
enum {
  SL_MOE_DECODE_15X1_XS_TAG_PR_IF_DL = 0, /* the default (session 20) */
  SL_MOE_DECODE_12X1 = 1,              /* x in registers, grid barrier */
  SL_MOE_DECODE_7X2 = 2,               /* x in registers, grid barrier */
  SL_MOE_DECODE_15X1_XS_BAR = 3,       /* the grid barrier before the down phase (session 4's default) */
  SL_MOE_DECODE_15X1_XS_TAG_MMA = 4,   /* tagged, and the down phase on the tensor cores */
  SL_MOE_DECODE_15X1_XS_TAG = 5,       /* tagged (session 5's default) */
  SL_MOE_DECODE_15X1_XS_TAG_PR = 6,
  SL_MOE_DECODE_15X1_XS_TAG_IF = 7,
  SL_MOE_DECODE_15X1_XS_TAG_PR_IF = 8,     /* sessions 6-19's default: the down rows asked for after the top-k */
  SL_MOE_DECODE_15X1_XS_TAG_PR_IF_DL_ALL = 9, /* _DL with all 8 copies at once */
  SL_MOE_DECODE_VARIANTS = 10
};

/* decode_profile[block * 16 + i]: 0 start, 1 the block's router logits published, 2 top-k done (block
 * barrier), 3 the block's gate_up done, 4 after the grid barrier, 5 down rows in shared
 * memory, 6 end, 7 the down copies issued, 8 the SM id (not a time), 9 thread 0's down items
 * done, 10 thread 0's combine done, 11 warp 0's top-k done, 12 past the PDL wait (= the
 * predecessor's end when launched as a programmatic dependent). In the _DL shapes 5 is the block's
 * last rank's down rows seen and 9 its last down item done (every item's warp, not thread 0's). */
enum { SL_MOE_DECODE_PROF_STAMPS = 13 };

/* The layer's stages (sl_moe_layer_args_t.stages). With fuse_small the top-k runs inside
 * the dispatch stage (SL_MOE_STAGE_TOPK then launches nothing). */
enum {
  SL_MOE_STAGE_LOGITS = 1,   /* router logits GEMM/GEMV */
  SL_MOE_STAGE_TOPK = 2,     /* router top-k */
  SL_MOE_STAGE_DISPATCH = 4,
  SL_MOE_STAGE_FFN = 8,
  SL_MOE_STAGE_COMBINE = 16,
  SL_MOE_STAGE_ALL = 31,
};

/* Allocate the layer's buffers for calls of up to max_tokens tokens (weights are borrowed,
 * not copied). The dispatch capacity is dropless (max_tokens rows per local expert). */
sl_status_t sl_moe_layer_create(sl_device_t *dev, const sl_moe_layer_config_t *cfg, int max_tokens,
                                sl_moe_layer_t **out);
void sl_moe_layer_destroy(sl_moe_layer_t *layer);

typedef struct {
  int num_tokens;              /* T <= max_tokens */
  const void *x;               /* [T, H] bf16 */
  const void *residual;        /* [T, H] bf16 or NULL */
  void *out;                   /* [T, H] bf16 */
  int capacity;                /* 0: dropless for this call (T rows per expert) */
  /* Routing given by the caller instead of router GEMM + router (device pointers [T, K]). */
  const int32_t *topk_ids;
  const float *topk_weights;
  /* The expert FFN may synchronise the stream once to size its GEMMs exactly when the
   * capacity exceeds SL_MOE_FFN_PADDED_MAX_ROWS (prefill). false: never synchronise
   * (padded GEMMs; CUDA-graph capturable). */
  bool allow_host_sync;
  int force_path;              /* dispatch path (sl_moe_dispatch_args_t.force_path) */
  int ffn_small_rows;          /* expert FFN in padded mode: sl_moe_ffn_args_t.small_rows (0 automatic) */
  int ffn_gemv_variant;        /* streaming kernels' variant: sl_moe_ffn_args_t.gemv_variant (0 automatic;
                                * SL_MOE_FFN_GEMV_WIDE, _SPLIT, _BULK forced) */
  sl_moe_path_t *path_taken;   /* optional out */
  /* sl_moe_fuse_t. ON (GPU, the layer's own router, 1 <= T <= SL_MOE_TOPK_FUSED_MAX_TOKENS,
   * replicated dispatch): the router top-k runs inside the dispatch kernel (one launch fewer,
   * sl_moe_dispatch_args_t.route), which is launched as a programmatic dependent of the router
   * logits kernel, and combine as a programmatic dependent of the FFN (sm_90+). The FFN is
   * unchanged. Results are bit-identical to OFF. AUTO: SL_MOE_LAYER_FUSE_SMALL_AUTO. */
  int fuse_small;
  bool *fused_taken;           /* optional out: whether the fused chain ran */
  /* sl_moe_fuse_t: the one-kernel decode layer (above). ON where it does not apply runs the
   * usual launches (decode_taken says which ran). AUTO: SL_MOE_LAYER_DECODE_KERNEL_AUTO. */
  int decode_kernel;
  int decode_variant;          /* SL_MOE_DECODE_* (0: the default shape) */
  int decode_pdl;              /* sl_moe_fuse_t: launch it as a programmatic dependent (above) */
  bool *decode_taken;          /* optional out */
  /* Benchmarks only: a device buffer of SMs x 16 u64 for the decode kernel's phase timestamps
   * (%globaltimer ns; SL_MOE_DECODE_PROF_*), NULL normally (a separate build when set). */
  unsigned long long *decode_profile;
  /* Tests only: block (decode_absent_block - 1) of the decode kernel returns at once, so the
   * others' bounded waits must give up (0: none). */
  int decode_absent_block;
  /* Benchmarks only: run just these stages (SL_MOE_STAGE_* bits; 0 = all) on the layer's
   * buffers as the previous call left them (per-stage timing in a graph). */
  unsigned stages;
} sl_moe_layer_args_t;

/* Asynchronous on CUDA. Data errors (bad ids, capacity) are reported by sl_moe_layer_check
 * on the GPU; the CPU backend reports them here. */
sl_status_t sl_moe_layer_forward(sl_moe_layer_t *layer, const sl_moe_layer_args_t *a, sl_stream_t *stream);
sl_status_t sl_moe_layer_check(sl_moe_layer_t *layer, sl_stream_t *stream);

/* The routing of the last call: device pointers [T, K] (the layer's own buffers, or the
 * caller's when it passed them). */
void sl_moe_layer_last_routing(const sl_moe_layer_t *layer, const int32_t **topk_ids, const float **topk_weights);
/* Tokens per local expert of the last call (device pointer, [E_local]). */
const int32_t *sl_moe_layer_expert_counts(const sl_moe_layer_t *layer);

/* Every decode-kernel configuration the layer uses (Qwen3-30B-A3B, every variant), for
 * `sluice jit warm` and the CI compile test; sm_90+ only. */
sl_status_t sl_moe_layer_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);
/* The decode kernel's spec for a layer configuration and variant. */
sl_status_t sl_moe_layer_decode_spec(const sl_moe_layer_config_t *cfg, int variant, sl_jit_spec_t *spec);
/* Benchmarks only (not thread-safe; set between launches; WRONG RESULTS while set): the decode
 * kernel's CUT mask (kernels/moe_layer_decode.cu: 1 no activation wait, 2 no down dot products,
 * 4 no logit poll / top-k, 8 no router logits, only with 4), to time what each phase costs.
 * Returns false for a mask outside those rules; 0 restores the real kernel. */
bool sl_moe_layer_set_decode_cut(int mask);

#ifdef __cplusplus
}
#endif
#endif
