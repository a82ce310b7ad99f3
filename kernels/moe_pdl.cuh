// Programmatic dependent launch (PDL, sm_90+) for the MoE kernels: the split dispatch (route ->
// copy), the FFN's streaming kernels (gate_up -> down) and the small-T layer's non-FFN edges
// (kernels/moe_layer.c, fuse_small: router logits -> route+dispatch, FFN down -> combine).
// griddepcontrol.wait blocks until the grids this one depends on have completed and their
// memory is visible; every thread that reads the predecessor's output executes it first.
// Before it a kernel may read only data complete when its predecessor started (inputs of
// the layer, constants, outputs of kernels the predecessor itself waited for), through L2
// (__ldcg) where an earlier call may have left the same addresses in L1. Without a PDL
// launch the instruction is a no-op (the stream already serialises).
#ifndef SL_MOE_PDL_CUH
#define SL_MOE_PDL_CUH

__device__ __forceinline__ void sl_moe_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the dependent grid launch now (its blocks start, then wait in sl_moe_pdl_wait for this
// grid to complete); without it the dependent launches when this grid's last block exits.
__device__ __forceinline__ void sl_moe_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The library's small kernels (RMSNorm, QK-norm, activations, quantizers, dequantizers, embedding, router) take the
// JIT constant PDL (0 when absent): 1 = launched as a programmatic dependent (their `pdl` argument, sm_90+). Their
// entry then lets the next dependent launch at once and waits for the predecessor grid before the kernel's first
// memory access, so its launch and block start overlap the predecessor's tail (session 33: the combine stage's graph
// node 2.00 -> 1.57 us) while every read and write still follows the predecessor's completion. A dependent's
// waiting blocks hold SM slots only after every block of this grid has started (the trigger counts once all have
// executed it), so no block of this grid waits for them.
#ifndef PDL
#define PDL 0
#endif
__device__ __forceinline__ void sl_pdl_entry() {
  if (PDL) {
    sl_moe_pdl_trigger();
    sl_moe_pdl_wait();
  }
}

#endif
