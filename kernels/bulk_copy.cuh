// Hopper bulk-copy engine and shared-memory mbarrier wrappers (sm_90+), shared by the kernels
// that stage global memory into shared memory with cp.async.bulk: the FFN's bulk variant
// (kernels/moe_ffn_gemv.cu), the one-kernel decode layer (kernels/moe_layer_decode.cu) and the staged
// dispatch copy (kernels/moe_dispatch.cu, which also stores shared memory to global by bulk groups).
// Addresses are 32-bit shared-window addresses (sl_bulk_smem_addr).
#ifndef SL_BULK_COPY_CUH
#define SL_BULK_COPY_CUH

__device__ __forceinline__ unsigned sl_bulk_smem_addr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void sl_bulk_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (the bulk copies' complete_tx).
__device__ __forceinline__ void sl_bulk_mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void sl_bulk_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void sl_bulk_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Whether the phase of `parity` of `bar` has completed (one try; the hardware may suspend the
// thread briefly inside it).
__device__ __forceinline__ bool sl_bulk_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done)
               : "r"(bar), "r"(parity)
               : "memory");
  return done != 0;
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared, counted on `bar`.
// A CTA's own shared::cta address is a valid shared::cluster one.
__device__ __forceinline__ void sl_bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Shared -> global: `bytes` (a multiple of 16, both addresses 16-byte aligned) from this CTA's shared
// memory, in this thread's current bulk group (the staged dispatch copy, kernels/moe_dispatch.cu).
__device__ __forceinline__ void sl_bulk_store(void *dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
// Closes this thread's current bulk group (an empty one too).
__device__ __forceinline__ void sl_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// The bulk groups this thread committed, all but the newest one, have read their shared memory.
__device__ __forceinline__ void sl_bulk_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
// Every bulk group this thread committed has completed (before its shared memory goes away).
__device__ __forceinline__ void sl_bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's shared-memory writes before bulk copies that read them (async proxy).
__device__ __forceinline__ void sl_bulk_fence_smem_writes() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

#endif
