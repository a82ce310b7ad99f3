// Shared by the probes in this folder (not part of the build): the error check, the
// streaming kernels, and the graph timing every probe uses.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// Read n 16-byte vectors (4 in flight per thread, evict-first), grid-stride.
__global__ void rd(const int4 *__restrict__ p, size_t n, int *sink) {
  int4 acc = {0, 0, 0, 0};
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc.x ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc.x ^= __ldcs(p + i).x;
  if (acc.x == 0x7f123456) *sink = acc.x;
}
// Copy n 16-byte vectors (2 in flight per thread), grid-stride.
__global__ void cp(const int4 *__restrict__ p, int4 *__restrict__ q, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + stride < n; i += 2 * stride) {
    int4 a = __ldcs(p + i), b = __ldcs(p + i + stride);
    __stcs(q + i, a); __stcs(q + i + stride, b);
  }
  for (; i < n; i += stride) q[i] = p[i];
}

// Capture launch(0) .. launch(launches - 1) on st as one CUDA graph, replay it `replays`
// times (the first `skip` are warm-up) and return the best replay's time per launch, in us.
template <typename F>
double graph_us(cudaStream_t st, int launches, int replays, int skip, F launch) {
  static cudaEvent_t e0, e1;
  if (!e0) {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int r = 0; r < launches; r++) launch(r);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  float best = 1e30f;
  for (int rep = 0; rep < replays; rep++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaStreamSynchronize(st));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= skip && ms < best) best = ms;
  }
  CK(cudaGetLastError());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return best * 1e3 / launches;
}
