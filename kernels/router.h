/* MoE router: softmax top-k (Qwen3-MoE) and sigmoid + correction bias + group-limited top-k
 * with routed scaling (DeepSeek-V3). Ties are broken by the lower expert id, identically on
 * the CPU and the GPU. */
#ifndef SL_ROUTER_H
#define SL_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/sl_dtype.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_ROUTER_SOFTMAX_TOPK = 0, SL_ROUTER_SIGMOID_GROUPED = 1 } sl_router_kind_t;

/* SOFTMAX_TOPK: p = softmax(logits) over E experts; the experts of the k largest logits
 *   (softmax is monotone; ties: lower id) in descending order; weights p, divided by their
 *   sum when renormalize.
 * SIGMOID_GROUPED: s = sigmoid(logits), b = s + correction_bias (0 when NULL); experts in
 *   num_groups contiguous groups, group score = sum of the top-2 b in the group; keep the
 *   topk_groups best groups (ties: lower group id); the k largest b among their experts
 *   (ties: lower id); weights are the unbiased s, divided by their sum when renormalize,
 *   times routed_scaling.
 * routed_scaling multiplies the weights of both kinds; 0 means 1 (so a zero-initialised
 * struct needs no value).
 * Order ("largest"): fp32 order with -0 == +0 and ties to the lower id; a NaN score ranks
 * below -inf (kernels/router_order.h), so the ids are always K distinct valid experts and
 * identical on both backends. NaN logits are not rejected: softmax weights then come out NaN
 * (the denominator sums every expert); grouped weights are NaN only where a NaN expert had to
 * be chosen. */
typedef struct {
  sl_router_kind_t kind;
  int num_tokens, num_experts, top_k;
  bool renormalize;
  int num_groups, topk_groups;
  float routed_scaling;
  sl_dtype_t logits_dtype;
  const void *logits;           /* [T, E] */
  const float *correction_bias; /* [E] or NULL */
  int32_t *topk_ids;            /* [T, K] */
  float *topk_weights;          /* [T, K] */
  bool pdl;                     /* as sl_act_args_t's (kernels/act.h) */
} sl_router_args_t;

sl_status_t sl_router(sl_device_t *dev, const sl_router_args_t *a, sl_stream_t *stream);

/* The CPU reference (also the CPU backend); pointers are host memory. */
sl_status_t sl_router_ref(const sl_router_args_t *a);

/* Checks the arguments as sl_router does on the GPU (SL_ERR_INVALID, or SL_ERR_UNSUPPORTED for
 * a grouping the kernel's lane layout can't hold). */
sl_status_t sl_router_check_gpu(const sl_router_args_t *a);
/* The factor the weights are multiplied by (routed_scaling, 0 meaning 1). */
float sl_router_scaling(const sl_router_args_t *a);
/* The router's JIT constants (KIND, NUM_EXPERTS, TOPK, NUM_GROUPS, TOPK_GROUPS, DTYPE) added
 * to `spec`: for kernels that run the router's warp routine (kernels/router_topk.cuh). */
sl_status_t sl_router_define_constants(const sl_router_args_t *a, sl_jit_spec_t *spec);

/* The JIT spec `sl_router` uses for these arguments on sm_<arch> with `sm_count` SMs. */
sl_status_t sl_router_spec(const sl_router_args_t *a, int arch, int sm_count, sl_jit_spec_t *spec);

/* Every configuration point, for `sluice jit warm` and the jit tests. */
sl_status_t sl_router_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
