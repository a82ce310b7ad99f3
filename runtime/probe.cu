// Probe kernel: y = scale * x + shift over bf16 x, fp32 y. Proves the JIT path end to end
// (embedded source, -D constants, cuda_bf16.h from the toolkit, cache, driver launch).
#include <cuda_bf16.h>

#ifndef PROBE_SHIFT
#error "PROBE_SHIFT (a float constant) must be defined by the JIT"
#endif
#ifndef PROBE_THREADS
#error "PROBE_THREADS (threads per block) must be defined by the JIT"
#endif

extern "C" __global__ void __launch_bounds__(PROBE_THREADS)
    sl_probe_axpb(const __nv_bfloat16 *__restrict__ x, float *__restrict__ y, float scale, int n) {
  for (int i = blockIdx.x * PROBE_THREADS + threadIdx.x; i < n; i += gridDim.x * PROBE_THREADS)
    y[i] = scale * __bfloat162float(x[i]) + PROBE_SHIFT;
}

// Empty kernel: the launch-latency ceiling that benchmarks report against.
extern "C" __global__ void sl_probe_empty(int unused) {}
