// GPU self-test of kernels/quant_dev.cuh's reciprocals against the CUDA library's, at every fp32 s of biased
// exponents [E_LO, E_HI] (every mantissa): rd 0 sl_kq_rcp_rn against __frcp_rn, rd 1 sl_kq_rcp_rd against __frcp_rd;
// tests/gpu/test_quant.c (test_rcp_rn, test_rcp_rd). Counts the differing bit patterns in *mismatches and keeps the
// smallest differing s's bits in *first (0xffffffff: none).
#include "kernels/quant_dev.cuh"

extern "C" __global__ void sl_rcp_selftest(unsigned e_lo, unsigned e_hi, int rd, unsigned *mismatches,
                                           unsigned *first) {
  const unsigned long long n = (unsigned long long)(e_hi - e_lo + 1) << 23;
  unsigned bad = 0, low = 0xffffffffu;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned bits = (unsigned)(((unsigned long long)e_lo << 23) + i);
    const float s = __uint_as_float(bits);
    const float got = rd ? sl_kq_rcp_rd(s) : sl_kq_rcp_rn(s), want = rd ? __frcp_rd(s) : __frcp_rn(s);
    if (__float_as_uint(got) != __float_as_uint(want)) {
      bad++;
      low = min(low, bits);
    }
  }
  if (bad) {
    atomicAdd(mismatches, bad);
    atomicMin(first, low);
  }
}
