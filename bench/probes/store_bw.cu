// Probe (not part of the build): the floor of a decode dispatch's copy at DeepSeek-V3 T=128
// (H=7168 bf16, K=8, E=256, 1024 rows of 14336 B scattered over a dropless [256, 128, H]
// buffer, 14.7 MB written, 1.8 MB read) when the destination rows are already known -- i.e.
// the dispatch kernel without ids, ranking or barriers. Timed per launch in a CUDA graph of 20
// launches (best of 6 replays), like `sluice bench moe-local`'s graph_us. Rows:
//   scatter   one warp per (token, 256 columns): load 16 B/lane, store it to the K rows
//             (the replicated dispatch's copy loop; 448 blocks x 256 threads at DSv3 T=128);
//             variants: no loads, __stcs stores, contiguous rows, 224 x 512 and 896 x 128
//             blocks, and "+ rank chain" (4 id loads per thread, a shared histogram by
//             atomics, two block barriers before the stores: the ranking's shape)
//   bulk      one block per (token, 1/SPLIT row): the chunk loaded into shared memory, then K
//             cp.async.bulk stores (the TMA engine issues the stores, not the warps)
//   memset    cudaMemsetAsync of the same byte count, contiguous
// `same` writes the same rows each launch (as the bench does: L2 may keep them); `rot` moves
// the experts each launch (rows L2 has not seen). Arguments FILE[:N]: a JIT cache file of
// sl_moe_dispatch_replicated (bf16, E_local = 256, H = 7168; 176-byte header) launched on the
// same routing and buffers with N extra blocks. Then write-only / read-only / copy streams of
// 64 MB - 1 GB (each launch on its own buffer). Results: bench/results/2026-11-29-s7-h200-probes/.
// nvcc -O3 -arch=sm_90 store_bw.cu -o store_bw -lcuda
#include <cstring>
#include <vector>
#include <cuda.h>
#include <cuda_bf16.h>

#include "probe_util.cuh"

enum { T = 128, K = 8, E = 256, H = 7168, CHUNK = 256, CHUNKS = H / CHUNK, R = 20 };

// mode: 0 plain stores, 1 no loads, 2 __stcs stores, 3 contiguous rows (t*K+k), 4 plus the
// replicated kernel's ranking chain (4 id loads per thread, a shared histogram, 2 barriers)
__global__ void scatter(const uint4 *__restrict__ x, uint4 *__restrict__ out, const int *__restrict__ rows,
                        const int *__restrict__ ids, int shift, int mode) {
  __shared__ int hist[E];
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  int t = warp / CHUNKS, c = warp % CHUNKS;
  size_t col = (size_t)c * (CHUNK / 8) + lane; /* uint4 index within the row */
  bool live = warp < T * CHUNKS;
  uint4 v = mode != 1 && live ? x[(size_t)t * (H / 8) + col] : make_uint4(t, c, lane, 1);
  int r = lane < K && live ? rows[t * K + lane] : 0;
  if (mode == 4) {
    int idv[4];
    for (int i = 0; i < 4; i++) idv[i] = ids[i * 256 + (threadIdx.x & 255)];
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
    __syncthreads();
    for (int i = 0; i < 4; i++) atomicAdd(&hist[idv[i] & (E - 1)], 1);
    __syncthreads();
    r += hist[r & (E - 1)] & 0x40000000; /* depends on the histogram; adds 0 */
  }
  if (!live) return;
#pragma unroll
  for (int k = 0; k < K; k++) {
    int row = __shfl_sync(0xffffffffu, r, k);
    row = mode == 3 ? t * K + k : (row + shift * T) % (E * T);
    if (mode == 2) __stcs(&out[(size_t)row * (H / 8) + col], v);
    else out[(size_t)row * (H / 8) + col] = v;
  }
}

template <int SPLIT>
__global__ void bulk(const uint4 *__restrict__ x, char *__restrict__ out, const int *__restrict__ rows, int shift) {
  extern __shared__ __align__(128) uint4 sm[];
  const int part = H / SPLIT; /* elements */
  int t = blockIdx.x / SPLIT, p = blockIdx.x % SPLIT;
  const uint4 *src = x + (size_t)t * (H / 8) + (size_t)p * (part / 8);
  for (int i = threadIdx.x; i < part / 8; i += blockDim.x) sm[i] = src[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x < K) {
    int row = (rows[t * K + threadIdx.x] + shift * T) % (E * T);
    char *dst = out + ((size_t)row * H + (size_t)p * part) * 2;
    unsigned s = (unsigned)__cvta_generic_to_shared(sm);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(s), "r"(part * 2)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}

// Streams of N MB (grid-stride, 16 B per thread per access, 4 in flight): write-only, read-only
// and copy, each launch on its own buffer (so L2 does not serve them) -- the write ceiling of a
// write-heavy kernel (dequantization writes 2 B per element and reads 0.56-1.03) next to the
// read+write copy the kernel benchmarks use as their ceiling.
__global__ void wr(int4 *__restrict__ q, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  int4 v = make_int4((int)i, 1, 2, 3);
  for (; i + 3 * stride < n; i += 4 * stride) {
    __stcs(q + i, v); __stcs(q + i + stride, v); __stcs(q + i + 2 * stride, v); __stcs(q + i + 3 * stride, v);
  }
  for (; i < n; i += stride) q[i] = v;
}
static void streams(int sms, cudaStream_t st) {
  const int RS = 10;
  size_t mbs[] = {64, 256, 1024};
  printf("\nstreams (graph of %d launches, best of 6; GB/s = bytes moved (read + written) / time)\n", RS);
  printf("%8s %10s %10s %10s %10s %10s %10s %10s\n", "MB", "write_us", "write_GB/s", "read_us", "read_GB/s",
         "copy_us", "copy_GB/s", "memset_GB/s");
  int *sink;
  CK(cudaMalloc(&sink, 4));
  for (size_t mb : mbs) {
    size_t bytes = mb << 20, n = bytes / 16;
    char *a, *b;
    CK(cudaMalloc(&a, bytes * RS));
    CK(cudaMalloc(&b, bytes * RS));
    CK(cudaMemset(a, 1, bytes * RS));
    double us[4];
    for (int kind = 0; kind < 4; kind++)
      us[kind] = graph_us(st, RS, 6, 1, [&](int r) {
        char *pa = a + (size_t)r * bytes, *pb = b + (size_t)r * bytes;
        if (kind == 0) wr<<<sms * 4, 256, 0, st>>>((int4 *)pb, n);
        else if (kind == 1) rd<<<sms * 4, 256, 0, st>>>((const int4 *)pa, n, sink);
        else if (kind == 2) cp<<<sms * 4, 256, 0, st>>>((const int4 *)pa, (int4 *)pb, n);
        else CK(cudaMemsetAsync(pb, 0, bytes, st));
      });
    printf("%8zu %10.2f %10.1f %10.2f %10.1f %10.2f %10.1f %10.1f\n", mb, us[0], bytes / (us[0] * 1e3), us[1],
           bytes / (us[1] * 1e3), us[2], 2.0 * bytes / (us[2] * 1e3), bytes / (us[3] * 1e3));
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
}

int main(int argc, char **argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t out_bytes = (size_t)E * T * H * 2, x_bytes = (size_t)T * H * 2;
  char *out, *x;
  int *rows;
  CK(cudaMalloc(&out, out_bytes));
  CK(cudaMalloc(&x, x_bytes));
  CK(cudaMemset(x, 1, x_bytes));
  CK(cudaMemset(out, 0, out_bytes));
  /* random routing: K distinct experts per token, slots compact per expert */
  std::vector<int> h(T * K), cnt(E, 0);
  srand(1234);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e, dup;
      do {
        e = rand() % E;
        dup = 0;
        for (int j = 0; j < k; j++) dup |= h[t * K + j] / T == e;
      } while (dup);
      h[t * K + k] = e * T + cnt[e]++;
    }
  CK(cudaMalloc(&rows, T * K * sizeof(int)));
  CK(cudaMemcpy(rows, h.data(), T * K * sizeof(int), cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cudaFuncSetAttribute(bulk<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, H * 2));
  double wbytes = (double)T * K * H * 2, rbytes = (double)x_bytes;
  printf("dispatch-store probe: T=%d K=%d H=%d, %.1f MB written, %.1f MB read, %d SMs\n", T, K, H, wbytes / 1e6,
         rbytes / 1e6, sms);
  printf("%-22s %6s %9s %12s\n", "kernel", "rot", "us", "write GB/s");
  const char *names[] = {"scatter 448x256", "storeonly 448x256", "scatter 224x512", "bulk split1 128x32",
                         "bulk split2 256x32", "bulk split4 512x32", "memset (contig)", "scatter stcs",
                         "scatter contig rows", "scatter + rank chain", "scatter 896x128"};
  std::vector<int> hid(T * K);
  for (int i = 0; i < T * K; i++) hid[i] = h[i] / T;
  int *ids;
  CK(cudaMalloc(&ids, T * K * sizeof(int)));
  CK(cudaMemcpy(ids, hid.data(), T * K * sizeof(int), cudaMemcpyHostToDevice));
  for (int kind = 0; kind < 11; kind++)
    for (int rot = 0; rot < 2; rot++) {
      const double us = graph_us(st, R, 8, 2, [&](int r) {
        int shift = rot ? r * 13 : 0;
        switch (kind) {
        case 0: scatter<<<T * CHUNKS / 8, 256, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 0); break;
        case 1: scatter<<<T * CHUNKS / 8, 256, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 1); break;
        case 2: scatter<<<T * CHUNKS / 16, 512, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 0); break;
        case 7: scatter<<<T * CHUNKS / 8, 256, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 2); break;
        case 8: scatter<<<T * CHUNKS / 8, 256, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 3); break;
        case 9: scatter<<<T * CHUNKS / 8, 256, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 4); break;
        case 10: scatter<<<T * CHUNKS / 4, 128, 0, st>>>((const uint4 *)x, (uint4 *)out, rows, ids, shift, 0); break;
        case 3: bulk<1><<<T, 32, H * 2, st>>>((const uint4 *)x, out, rows, shift); break;
        case 4: bulk<2><<<T * 2, 32, H, st>>>((const uint4 *)x, out, rows, shift); break;
        case 5: bulk<4><<<T * 4, 32, H / 2, st>>>((const uint4 *)x, out, rows, shift); break;
        case 6: CK(cudaMemsetAsync(out + (rot ? (size_t)r * 16 << 20 : 0), 0, (size_t)wbytes, st)); break;
        }
      });
      printf("%-22s %6s %9.2f %12.1f\n", names[kind], rot ? "rot" : "same", us, wbytes / (us * 1e3));
    }
  /* The real replicated dispatch kernel (each argument: a JIT cache file of it, DSv3 bf16 E_local=256),
   * same routing and buffers as the rows above. */
  for (int ai = 1; ai < argc; ai++) {
    /* FILE[:N]: N extra blocks after the copy grid (the kernel's extra totals block) */
    char *colon = strchr(argv[ai], ':');
    int extra_blocks = colon ? atoi(colon + 1) : 0;
    if (colon) *colon = 0;
    FILE *f = fopen(argv[ai], "rb");
    if (!f) { printf("no %s\n", argv[ai]); return 1; }
    std::vector<char> bin(64 << 20);
    size_t nb = fread(bin.data(), 1, bin.size(), f);
    fclose(f);
    CUmodule mod;
    CUfunction fn;
    if (cuModuleLoadData(&mod, bin.data() + 176) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn, mod, "sl_moe_dispatch_replicated") != CUDA_SUCCESS) {
      printf("cannot load %s (%zu bytes)\n", argv[ai], nb);
      return 1;
    }
    int *counts, *slots;
    void *state;
    CK(cudaMalloc(&counts, E * 4));
    CK(cudaMalloc(&slots, T * K * 4));
    CK(cudaMalloc(&state, 4096));
    CK(cudaMemset(state, 0, 4096));
    int nt = T, ne = E, eb = 0, ee = E, cap = T;
    void *scales = nullptr;
    float gs = 1.0f;
    for (int rep2 = 0; rep2 < 2; rep2++) { /* twice: the spread between replays */
      void *args[] = {&x, &ids, &nt, &ne, &eb, &ee, &cap, &out, &scales, &gs, &counts, &slots, &state};
      const double us = graph_us(st, R, 8, 2, [&](int) {
        if (cuLaunchKernel(fn, T * CHUNKS / 8 + extra_blocks, 1, 1, 256, 1, 1, 0, st, args, nullptr) != CUDA_SUCCESS) {
          printf("launch failed\n");
          exit(1);
        }
      });
      const char *base = strrchr(argv[ai], '/');
      printf("%-22s %6s %9.2f %12.1f\n", base ? base + 1 : argv[ai], "same", us, wbytes / (us * 1e3));
    }
    int hs[8];
    CK(cudaMemcpy(hs, state, sizeof hs, cudaMemcpyDeviceToHost));
    printf("real kernel: device error code %d (0: none)\n", hs[4]);
  }
  streams(sms, st);
  return 0;
}
