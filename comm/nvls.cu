// NVLS all-reduce (NVLink SHARP multicast: multimem.ld_reduce / multimem.st). UNTESTED ON
// HARDWARE: compiled by NVRTC in CI only; selectable only with SL_NVLS=1 (default 0), which
// must never be set on the shared H200 machines (DESIGN.md, NVLS policy).
// Same flags and epochs as the two-shot kernel (comm/allreduce_layout.h); the reduction of
// chunk R is done by the switch, so its order is the switch's, not the fixed rank order.
#include "comm/allreduce_proto.cuh"

#if VEC_BYTES != 16
#error "the NVLS kernel moves 16-byte vectors: AR_VEC must make 16 bytes"
#endif

// Sum the 16 bytes at `mc` over every GPU bound to the multicast object (fp32 accumulation).
__device__ __forceinline__ uint4 mm_ld_reduce(const char *mc) {
  uint4 v;
#if AR_DTYPE == 0
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
#elif AR_DTYPE == 1
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
#else
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.f16x2 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
#endif
  return v;
}
// Store 16 bytes to the same address on every GPU bound to the multicast object.
__device__ __forceinline__ void mm_st(char *mc, uint4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mc), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
// Multicast and unicast addresses alias the same memory: order accesses through the two.
__device__ __forceinline__ void fence_alias() {
  asm volatile("fence.proxy.alias;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(AR_THREADS) sl_nvls_allreduce(sl_ar_args_t a) {
  __shared__ ar_block_t s;
  if (!ar_begin(a, s)) return;
  const unsigned long long off = (s.epoch & 1ull) * sl_ar_region_bytes(a.max_bytes);
  char *uc = a.uc + off, *mc = a.mc + off;
  unsigned long long cb, ce, b, e;
  // Stage: block b copies sub-range b of every chunk into this GPU's copy.
  for (int c = 0; c < a.nranks; c++) {
    sl_ar_part(a.count, AR_VEC, a.nranks, c, &cb, &ce);
    sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
    copy_range(uc, (const char *)a.in, cb + b, cb + e);
  }
  fence_alias();
  if (!ar_exchange(a, s, 0)) return;
  // Chunk `rank`: reduce through the switch, broadcast the sum into every GPU's copy.
  sl_ar_part(a.count, AR_VEC, a.nranks, a.rank, &cb, &ce);
  sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
  for (unsigned long long i = cb + b + threadIdx.x * (unsigned long long)AR_VEC; i < cb + e; i += AR_THREADS * AR_VEC)
    mm_st(mc + i * ES, mm_ld_reduce(mc + i * ES));
  fence_alias();
  if (!ar_exchange(a, s, 1)) return;
  fence_alias();
  for (int c = 0; c < a.nranks; c++) {
    sl_ar_part(a.count, AR_VEC, a.nranks, c, &cb, &ce);
    sl_ar_part(ce - cb, AR_VEC, gridDim.x, blockIdx.x, &b, &e);
    copy_range((char *)a.out, uc, cb + b, cb + e);
  }
  ar_end(a, s);
}
