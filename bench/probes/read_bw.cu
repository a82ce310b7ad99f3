// Probe (not part of the build): device time of a pure read stream and of a copy of N MB,
// in one kernel, timed by events around a CUDA graph of 20 launches (each on a different
// buffer, so L2 does not serve them) -- the fixed cost ("intercept") of streaming kernels
// and the read-only ceiling next to the copy one. nvcc -O3 -arch=sm_90 read_bw.cu -o read_bw
#include "probe_util.cuh"

int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int R = 20;
  size_t mbs[] = {4, 12, 25, 50, 75, 150, 300, 600, 1200};
  int *sink; CK(cudaMalloc(&sink, 4));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  printf("%8s %6s %10s %10s %10s %10s\n", "MB", "blocks", "read_us", "read_GB/s", "copy_us", "copy_GB/s");
  for (size_t mb : mbs) {
    size_t bytes = mb << 20, n = bytes / 16;
    size_t total = bytes * R;
    char *buf, *dst; CK(cudaMalloc(&buf, total)); CK(cudaMalloc(&dst, total));
    CK(cudaMemset(buf, 1, total));
    for (int bpsm = 2; bpsm <= 8; bpsm *= 2) {
      int blocks = sms * bpsm;
      const double rus = graph_us(st, R, 6, 1, [&](int r) {
        rd<<<blocks, 256, 0, st>>>((const int4 *)(buf + (size_t)r * bytes), n, sink);
      });
      const double cus = graph_us(st, R, 6, 1, [&](int r) {
        cp<<<blocks, 256, 0, st>>>((const int4 *)(buf + (size_t)r * bytes), (int4 *)(dst + (size_t)r * bytes), n / 2);
      });
      printf("%8zu %6d %10.2f %10.1f %10.2f %10.1f\n", mb, blocks, rus, bytes / (rus * 1e3), cus, bytes / (cus * 1e3));
    }
    CK(cudaFree(buf)); CK(cudaFree(dst));
  }
  return 0;
}
