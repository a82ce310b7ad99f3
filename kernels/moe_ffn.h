/* MoE expert FFN over the expert-major buffers: y_e = down_e(silu(gate_e x) * up_e x) for
 * every local expert e, on the rows its count says are real. GPU: two weight-streaming
 * tensor-core kernels for few rows per expert (decode), cuBLAS GEMMs otherwise (bf16 in,
 * fp32 accumulate, bf16 out); OpenBLAS on the CPU backend. Intermediates are rounded to
 * bf16 on both (gate_up output, activation output), as the GPU GEMMs store them. */
#ifndef SL_MOE_FFN_H
#define SL_MOE_FFN_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/grid_barrier.h" /* sl_dev_error_t */
#include "kernels/moe_ffn_gemv.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Above this many rows per expert the padded GEMMs stop being free (they become compute
 * bound, ~200 rows on H200 at bf16), so the layer switches to exact rows (host count read). */
#define SL_MOE_FFN_PADDED_MAX_ROWS 64

typedef struct {
  int num_local_experts;       /* E_local */
  int capacity;                /* rows per expert in x and y */
  int hidden, inter;           /* H, I (I a multiple of 8) */
  int num_tokens, top_k;       /* T, K of the call: at most min(E_local, T*K) experts are non-empty */
  const void *x;               /* [E_local, capacity, H] bf16 (dispatch output) */
  const int32_t *expert_counts;/* [E_local] (device) */
  const void *w_gate_up;       /* [E_local, 2I, H] bf16: gate rows then up rows */
  const void *w_down;          /* [E_local, H, I] bf16 */
  void *y;                     /* [E_local, capacity, H] bf16; rows >= count are unspecified */
  void *workspace;             /* sl_moe_ffn_workspace_bytes */
  size_t workspace_bytes;
  /* GPU: false = padded mode, no host synchronisation (graph capturable): one batched GEMM
   * over min(E_local, T*K) experts, each on all `capacity` rows, its pointers written on the
   * device from the counts (empty experts' slots re-read a non-empty expert's weights, from
   * L2, into unused rows). true = exact mode: the stream is synchronised to read the counts,
   * then grouped GEMMs touch only the non-empty experts and only their real rows. */
  bool exact_rows;
  /* Padded mode only: 0 = automatic (the weight-streaming kernels while min(capacity, T)
   * <= SL_MOE_FFN_GEMV_MAX_ROWS or T*K <= SL_MOE_FFN_GEMV_MAX_ROWS x E_local, else the
   * batched GEMMs); 1 = always the streaming kernels (exact for any row count); -1 = always
   * the batched GEMMs (tests, benchmarks). Streaming needs x, the weights and the workspace
   * 16-byte aligned (automatic: else the batched GEMMs; forced: SL_ERR_INVALID). */
  int small_rows;
  /* Which streaming kernels (when they run): SL_MOE_FFN_GEMV_AUTO (0: sl_moe_ffn_gemv_variant),
   * SL_MOE_FFN_GEMV_WIDE, SL_MOE_FFN_GEMV_SPLIT or SL_MOE_FFN_GEMV_BULK (forced; all exact
   * for any row count; bulk needs sm_90+: SL_ERR_UNSUPPORTED below). Benchmarks compare
   * them; kernels/moe_ffn_gemv.h. */
  int gemv_variant;
  /* Optional device error record (zeroed by the caller; first writer wins), where the bulk
   * variant records a timed-out pipeline wait (SL_DEV_ERR_PIPE_TIMEOUT; read it with
   * sl_dev_error_status). NULL: such a kernel traps instead (the next synchronisation
   * reports a CUDA launch failure). The layer passes its dispatch workspace's record, so
   * sl_moe_layer_check reports it. */
  sl_dev_error_t *error;
} sl_moe_ffn_args_t;

size_t sl_moe_ffn_workspace_bytes(int num_local_experts, int capacity, int max_tokens, int top_k, int hidden,
                                  int inter);

sl_status_t sl_moe_ffn(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream);
/* CPU reference (OpenBLAS); host pointers. */
sl_status_t sl_moe_ffn_ref(const sl_moe_ffn_args_t *a);

/* Router logits [T, E] fp32 = x [T, H] bf16 . w_router [E, H]^T bf16, fp32 accumulation
 * (GPU: the GEMV kernel for T <= SL_MOE_FFN_GEMV_MAX_ROWS, else cuBLAS; CPU: OpenBLAS). */
sl_status_t sl_moe_gate_logits(sl_device_t *dev, int num_tokens, int num_experts, int hidden, const void *x,
                               const void *w_router, float *logits, sl_stream_t *stream);

sl_status_t sl_moe_ffn_plan_spec(int num_local_experts, sl_jit_spec_t *spec);
/* The streaming kernels: which = 0 gate_up + SiLU-and-mul, 1 down, 2 router logits (used
 * by sl_moe_gate_logits for T <= SL_MOE_FFN_GEMV_MAX_ROWS on the GPU). */
sl_status_t sl_moe_ffn_gemv_spec(int which, sl_jit_spec_t *spec); /* the wide variant */
/* Benchmark sweep only (not thread-safe; set between launches): the streaming kernels' L2
 * prefetch distance in chunks, 0..16 (0: none); -1 restores SL_MOE_FFN_GEMV_PF. */
void sl_moe_ffn_set_pf_override(int chunks);
/* Any variant of the FFN kernels (which 0, 1; SL_MOE_FFN_GEMV_WIDE, _SPLIT or _BULK); which
 * = 2 (router logits) has one variant. */
sl_status_t sl_moe_ffn_gemv_variant_spec(int which, int variant, sl_jit_spec_t *spec);
/* The variant ffn_gemv launches for these arguments (reads capacity, num_tokens, top_k,
 * gemv_variant): SL_MOE_FFN_GEMV_WIDE, _SPLIT or _BULK (the launcher takes wide instead of
 * an automatic bulk choice below sm_90). */
int sl_moe_ffn_gemv_variant(const sl_moe_ffn_args_t *a);
/* Whether padded mode on the GPU takes the weight-streaming kernels for these arguments
 * (reads num_local_experts, capacity, num_tokens, top_k, exact_rows, small_rows). */
bool sl_moe_ffn_uses_gemv(const sl_moe_ffn_args_t *a);
sl_status_t sl_moe_ffn_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
