/* MoE combine: out[t] = sum_k w[t,k] * expert_out[slot[t,k]] (+ residual[t]), accumulated in
 * fp32 in k order (fmaf), rounded once to bf16. Pairs with slot -1 contribute nothing. */
#ifndef SL_MOE_COMBINE_H
#define SL_MOE_COMBINE_H

#include <stdint.h>

#include "kernels/moe_layout.h"
#include "kernels/sl_dtype.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int num_tokens;             /* T >= 0 */
  int hidden;                 /* H, a multiple of 8 */
  int top_k;                  /* K in [1, 32] */
  const void *expert_out;     /* bf16 rows addressed by slots (the expert-major buffer) */
  const int32_t *slots;       /* [T, K] from dispatch */
  const float *topk_weights;  /* [T, K] */
  const void *residual;       /* [T, H] bf16, added after the sum; NULL for none */
  void *out;                  /* [T, H] bf16; may alias residual */
  int force_unroll;           /* 0: the host's choice; 1 or 2: that kernel (benchmark comparison) */
  /* GPU, sm_90+: launch as a programmatic dependent of the previous kernel (kernels/moe_pdl.cuh).
   * The kernel loads its first slots and weights before griddepcontrol.wait, so those (and
   * the residual) must be complete when the previous kernel starts: in the MoE layer they come
   * from dispatch, which the FFN kernels wait for before they let combine launch. Same results. */
  bool pdl;
} sl_moe_combine_args_t;

sl_status_t sl_moe_combine(sl_device_t *dev, const sl_moe_combine_args_t *a, sl_stream_t *stream);
/* The CPU reference (also the CPU backend); host pointers. */
sl_status_t sl_moe_combine_ref(const sl_moe_combine_args_t *a);

sl_status_t sl_moe_combine_spec(int hidden, int top_k, int num_tokens, int sm_count, sl_jit_spec_t *spec,
                                int *unroll);
sl_status_t sl_moe_combine_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user),
                                      void *user);

#ifdef __cplusplus
}
#endif
#endif
