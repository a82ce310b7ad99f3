// Probe (not part of the build): how fast HBM moves a stream whose writes outnumber its reads, as
// the FP4 dequantizers' (8 code bytes read, 32 output bytes written per lane) and the FP8 one's
// (1 : 2), against a copy (1 : 1) and a write-only stream, all counting every byte read and written,
// timed by events around a CUDA graph of 20 launches on rotated buffers (probe_util.cuh).
// nvcc -O3 -arch=sm_90 mix_bw.cu -o mix_bw
#include "probe_util.cuh"

// Read R x 8 bytes, write R x 8 x W bytes per item (W = 1, 2, 4), grid-stride, 2 items in flight.
template <int W>
__global__ void mix(const uint2 *__restrict__ in, uint2 *__restrict__ out, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += 2 * stride) {
    uint2 a = __ldcs(in + i), b = i + stride < n ? __ldcs(in + i + stride) : a;
#pragma unroll
    for (int w = 0; w < W; w++) {
      uint2 x = {a.x + w, a.y}, y = {b.x + w, b.y};
      out[(i / 32) * 32 * W + w * 32 + (i % 32)] = x; // a warp writes W x 256 contiguous bytes
      if (i + stride < n) out[((i + stride) / 32) * 32 * W + w * 32 + ((i + stride) % 32)] = y;
    }
  }
}
// Write n 16-byte vectors, grid-stride.
__global__ void wr(int4 *__restrict__ q, size_t n, int v) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += stride) q[i] = make_int4(v, v, v, (int)i);
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int R = 20, blocks = sms * 8;
  size_t mbs[] = {48, 172, 688};
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  printf("%6s %9s %9s %9s %9s %9s %9s   (GB/s, every byte read or written)\n", "MB", "copy", "r1:w2", "r1:w4",
         "write", "memset", "w4/copy");
  for (size_t mb : mbs) {
    size_t bytes = mb << 20;
    char *src, *dst;
    CK(cudaMalloc(&src, bytes * R));
    CK(cudaMalloc(&dst, bytes * R));
    CK(cudaMemset(src, 1, bytes * R));
    auto at = [&](char *p, int r) { return p + (size_t)r * bytes; };
    const double cus = graph_us(st, R, 6, 1, [&](int r) {
      cp<<<blocks, 256, 0, st>>>((const int4 *)at(src, r), (int4 *)at(dst, r), bytes / 2 / 16);
    });
    // r1:wW moves bytes in total: n reads of 8 B and n*W writes of 8 B -> n = bytes / (8 (1 + W))
    const size_t n2 = bytes / (8 * 3), n4 = bytes / (8 * 5);
    const double m2 = graph_us(st, R, 6, 1, [&](int r) {
      mix<2><<<blocks, 256, 0, st>>>((const uint2 *)at(src, r), (uint2 *)at(dst, r), n2 / 32 * 32);
    });
    const double m4 = graph_us(st, R, 6, 1, [&](int r) {
      mix<4><<<blocks, 256, 0, st>>>((const uint2 *)at(src, r), (uint2 *)at(dst, r), n4 / 32 * 32);
    });
    const double wus = graph_us(st, R, 6, 1, [&](int r) { wr<<<blocks, 256, 0, st>>>((int4 *)at(dst, r), bytes / 16, r); });
    const double mus = graph_us(st, R, 6, 1, [&](int r) { CK(cudaMemsetAsync(at(dst, r), r, bytes, st)); });
    const double cg = bytes / (cus * 1e3), g2 = (double)(n2 / 32 * 32) * 24 / (m2 * 1e3),
                 g4 = (double)(n4 / 32 * 32) * 40 / (m4 * 1e3);
    printf("%6zu %9.1f %9.1f %9.1f %9.1f %9.1f %9.3f\n", mb, cg, g2, g4, bytes / (wus * 1e3), bytes / (mus * 1e3),
           g4 / cg);
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  printf("probe done\n");
  return 0;
}
