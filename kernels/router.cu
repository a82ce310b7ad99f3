// MoE router kernel: one warp per token; softmax top-k or sigmoid + bias + group-limited
// top-k (the warp routine and why it is shaped so: kernels/router_topk.cuh). Host side and the CPU reference (same order of scores, same fp32 operations) in
// kernels/router.c; the score order (uint32 keys) in kernels/router_order.h; the reproducible
// expf / sigmoid in kernels/quant_formats.h.

#ifndef KIND
#error "KIND (0 = softmax top-k, 1 = sigmoid grouped) must be defined by the JIT"
#endif
#ifndef NUM_EXPERTS
#error "NUM_EXPERTS must be defined by the JIT"
#endif
#ifndef TOPK
#error "TOPK must be defined by the JIT"
#endif
#ifndef NUM_GROUPS
#error "NUM_GROUPS (1 for softmax) must be defined by the JIT"
#endif
#ifndef TOPK_GROUPS
#error "TOPK_GROUPS must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (SL_DTYPE_* of the logits) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block; one token per warp) must be defined by the JIT"
#endif

#define SL_ROUTER_LOAD_NC 1 // the logits and bias are complete when the kernel starts
#include "kernels/moe_pdl.cuh"
#include "kernels/router_topk.cuh"

extern "C" __global__ void __launch_bounds__(WARPS * 32)
    sl_router_kernel(const void *__restrict__ logits, const float *__restrict__ bias, int *__restrict__ topk_ids,
                     float *__restrict__ topk_weights, int num_tokens, int renormalize, float scaling) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & 31;
  sl_router_lane_t s;
  sl_router_lane_init(logits, bias, lane, s);
  for (long t = (long)blockIdx.x * WARPS + threadIdx.x / 32; t < num_tokens; t += (long)gridDim.x * WARPS) {
    int my_id;
    float wt;
    sl_router_token(logits, t, lane, s, renormalize, scaling, my_id, wt);
    if (lane < TOPK) {
      topk_ids[t * TOPK + lane] = my_id;
      topk_weights[t * TOPK + lane] = wt;
    }
  }
}
