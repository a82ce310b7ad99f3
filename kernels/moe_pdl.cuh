// Programmatic dependent launch (PDL, sm_90+) for the kernels of the MoE layer chain
// (router logits -> top-k -> dispatch -> gate_up -> down -> combine; kernels/moe_layer.c).
//
// The protocol every kernel of the chain follows (why each part is needed):
//  - sl_pdl_wait() (griddepcontrol.wait) before the first read of anything a kernel earlier in
//    the stream writes, and before the first global write (the previous call's kernels may
//    still read our outputs: write-after-read), executed by EVERY thread that reaches the end
//    of the kernel, so "this grid completed" implies "its predecessor completed", and by
//    induction every earlier kernel of the stream (a grid without the wait would give its
//    successor no ordering guarantee).
//  - sl_pdl_trigger() (griddepcontrol.launch_dependents) right after the wait: the next kernel
//    may then launch, ramp up and run its own pre-wait part (reading only constant data:
//    weights, or outputs of kernels at least two back, which are complete once we passed our
//    wait) while we run. Triggering before our own wait would let the successor's pre-wait
//    part overlap our predecessor, which no kernel here needs.
// Without a PDL launch both instructions are no-ops (the stream already serialises), so the
// kernels stay usable by callers that launch them plainly (comm/moe_ep*, tests).
#ifndef SL_MOE_PDL_CUH
#define SL_MOE_PDL_CUH

__device__ __forceinline__ void sl_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void sl_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif
