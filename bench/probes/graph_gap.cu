// Probe (not part of the build): what makes a small kernel's CUDA-graph node slower for the rest of a process
// (session 32 calls 3-5: the bench's T=1 graph rows read +0.2 us once the FP8-out SiLU's prefill-shaped rows have
// run, with the same kernel time). A tiny kernel shaped like the T=1 activation (16 one-warp blocks, 16 bytes read
// and written per lane, inputs rotated over 16 buffers) is timed as a graph of 20 launches (probe_util.cuh) before
// and after kernels that change per-context state: one with a large dynamic shared-memory carveout, one with a
// local-memory (stack) frame at full occupancy, one that calls a non-inlined function; and after raising the
// stack-size limit from the host.
// `graph_gap CUBIN TOKENS BLOCKS THREADS` instead loads one of our JIT cubins (sl_act_kernel, e.g. written by the JIT
// cache) and launches it between the two timings, with a [TOKENS, 2 x 2048] bf16 input, [TOKENS, 2048] output and
// its scales (session 32 call 9); `... VICTIM_CUBIN VTOKENS VBLOCKS VTHREADS` times that second sl_act_kernel's
// graph (inputs rotated over 8 sets) instead of the tiny kernel's (call 10).
// Why none of this reproduced it (session 33, bench/probes/graph_trigger.c): the cause is 8 kernel-class operations on
// a stream other than the timed kernel's -- the bench rows' memset fills on the legacy stream -- and every launch here
// runs on the timed graph's own stream.
// nvcc -O3 -arch=sm_90 -I bench/probes bench/probes/graph_gap.cu -o graph_gap -lcuda
#include <cuda.h>

#include <functional>

#include "probe_util.cuh"

__global__ void tiny(const int4 *__restrict__ in, int4 *__restrict__ out) {
  const int i = blockIdx.x * 32 + threadIdx.x;
  int4 v = in[i];
  v.x += 1;
  out[i] = v;
}

// Large dynamic shared memory: the SM's carveout goes to shared.
__global__ void big_smem(int *sink, int n) {
  extern __shared__ int s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i;
  __syncthreads();
  if (s[(threadIdx.x * 7) % n] == -1) *sink = 1;
}

// A per-thread array indexed at run time: a local-memory frame, launched at full occupancy.
__global__ void big_stack(int *sink, int k) {
  volatile int a[256];
  for (int i = 0; i < 256; i++) a[i] = i * k;
  if (a[(threadIdx.x * k) & 255] == -1) *sink = 1;
}

__device__ __noinline__ float slow(float x, float y) { return __fdiv_rn(x, y) + sqrtf(x); }
// A call to a non-inlined function (the ABI's stack frame), as the quantizers' slow paths.
__global__ void calls(float *p, float d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i] = slow(p[i], d);
}

int main(int argc, char **argv) {
  const int sets = 16, n = 16 * 32;
  int4 *in, *out;
  CK(cudaMalloc(&in, sets * n * sizeof(int4)));
  CK(cudaMalloc(&out, sets * n * sizeof(int4)));
  CK(cudaMemset(in, 1, sets * n * sizeof(int4)));
  int *sink;
  float *fp;
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&fp, 132 * 2048 * sizeof(float)));
  CK(cudaMemset(fp, 0, 132 * 2048 * sizeof(float)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::function<void(const char *)> measure = [&](const char *when) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      const double us = graph_us(st, 20, 20, 3, [&](int i) {
        tiny<<<16, 32, 0, st>>>(in + (i % sets) * n, out + (i % sets) * n);
      });
      best = us < best ? us : best;
    }
    size_t stack = 0;
    CK(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
    printf("%-44s tiny graph node %.3f us (stack limit %zu B)\n", when, best, stack);
  };
  measure("fresh");
  measure("fresh, again");
  CUfunction victim = nullptr;
  int vt = 0, vblocks = 0, vthreads = 0;
  void *vx = nullptr, *vy = nullptr;
  if (argc == 9) { // the timed graph: 20 launches of this sl_act_kernel (bf16 out), inputs rotated over 8 sets
    CUmodule vm;
    if (cuModuleLoad(&vm, argv[5]) != CUDA_SUCCESS || cuModuleGetFunction(&victim, vm, "sl_act_kernel") != CUDA_SUCCESS) {
      printf("cannot load sl_act_kernel from %s\n", argv[5]);
      return 1;
    }
    vt = atoi(argv[6]), vblocks = atoi(argv[7]), vthreads = atoi(argv[8]);
    CK(cudaMalloc(&vx, (size_t)8 * vt * 4096 * 2));
    CK(cudaMalloc(&vy, (size_t)8 * vt * 2048 * 2));
    CK(cudaMemset(vx, 0x3c, (size_t)8 * vt * 4096 * 2));
    auto measure_victim = [&](const char *when) {
      double best = 1e30;
      for (int r = 0; r < 5; r++) {
        const double us = graph_us(st, 20, 20, 3, [&](int i) {
          const void *in = (char *)vx + (size_t)(i % 8) * vt * 4096 * 2;
          void *out = (char *)vy + (size_t)(i % 8) * vt * 2048 * 2, *sc = nullptr;
          long is = 4096, os = 2048;
          void *a[] = {&in, &is, &out, &os, &sc, &vt};
          if (cuLaunchKernel(victim, vblocks, 1, 1, vthreads, 1, 1, 0, st, a, NULL) != CUDA_SUCCESS) exit(1);
        });
        best = us < best ? us : best;
      }
      printf("%-44s victim graph node %.3f us\n", when, best);
    };
    measure_victim("victim fresh");
    measure_victim("victim fresh, again");
    measure = measure_victim;
  }
  if (argc == 5 || argc == 9) { // one JIT cubin of sl_act_kernel, launched 50 times between the timings
    CUmodule mod;
    CUfunction fn;
    if (cuModuleLoad(&mod, argv[1]) != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, "sl_act_kernel") != CUDA_SUCCESS) {
      printf("cannot load sl_act_kernel from %s\n", argv[1]);
      return 1;
    }
    int t = atoi(argv[2]), blocks = atoi(argv[3]), threads = atoi(argv[4]);
    long is = 4096, os = 2048;
    void *x, *y;
    float *sc;
    CK(cudaMalloc(&x, (size_t)t * is * 2));
    CK(cudaMalloc(&y, (size_t)t * os * 2));
    CK(cudaMalloc(&sc, (size_t)t * 16 * 4));
    CK(cudaMemset(x, 0x3c, (size_t)t * is * 2));
    void *args[] = {&x, &is, &y, &os, &sc, &t};
    for (int r = 0; r < 50; r++)
      if (cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, st, args, NULL) != CUDA_SUCCESS) {
        printf("launch failed\n");
        return 1;
      }
    CK(cudaStreamSynchronize(st));
    char what[96];
    snprintf(what, sizeof what, "after %s x50", argv[1]);
    measure(what);
    measure("again");
    return 0;
  }
  const int smem = 200 * 1024;
  CK(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  big_smem<<<132, 1024, smem, st>>>(sink, smem / 4);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(st));
  measure("after a 200 KB shared-memory kernel");
  calls<<<132 * 16, 128, 0, st>>>(fp, 3.0f);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(st));
  measure("after a kernel with a non-inlined call");
  big_stack<<<132 * 8, 256, 0, st>>>(sink, 3);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(st));
  measure("after a 1 KB local-memory frame kernel");
  CK(cudaDeviceSetLimit(cudaLimitStackSize, 8192));
  measure("after cudaLimitStackSize = 8 KB");
  return 0;
}
