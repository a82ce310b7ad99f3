// Probe (not part of the build): how much of a mid-size streaming kernel's time is its tail, and
// whether a resident grid whose warps take equal contiguous shares of the work ends sooner than the
// full grid (one task per warp, many short-lived blocks) or a grid-stride resident grid. Streams
// shaped like the kernels still below 92 % of copy at T=8192 h=2048: read 16 B / write 8 B per lane
// per chunk (the FP8 quantizer, 2 : 1), read 4 B / write 16 B (the FP4 dequantizer, 1 : 4), and a
// copy. Timed as the period of a CUDA graph of 20 launches on rotated buffers (probe_util.cuh),
// against cudaMemcpyAsync of the same bytes and of 512 MB (the ceiling the bench divides by).
// Part 1 (session 16 call 1): equal contiguous shares are slower than both other grids at every size;
// part 2 (call 2): an L2 prefetch of the warp's task does not help, 8 items in flight per warp helps
// the dequantizer's shape; part 3 (call 3, runs now): that shape with scale bytes, a shared table and
// its fill. `tail_bw deq` runs part 3's "u4s4 sc tb" alone (for ncu, call 5).
// nvcc -O3 -arch=sm_90 -I. bench/probes/tail_bw.cu -o tail_bw
#include "probe_util.cuh"

enum { FULL = 0, STRIDE = 1, BAL = 2, BALTASK = 3 };
static const char *pol_name[] = {"full", "stride", "bal", "baltask"};

// One chunk = 32 lanes x RB bytes read, 32 x WB bytes written. Tasks are SEG chunks; the loop walks
// U chunks at a time with every load of a step in flight before its stores.
template <int RB, int WB, int U>
__device__ __forceinline__ void chunks(const char *__restrict__ in, char *__restrict__ out, size_t c0, size_t c1,
                                       int lane) {
  static_assert(RB == 4 || RB == 16, "read 4 or 16 bytes");
  for (size_t c = c0; c < c1; c += U) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      v[u] = make_int4(0, 0, 0, 0);
      if (c + u < c1) {
        const char *p = in + (c + u) * 32 * RB + lane * RB;
        if constexpr (RB == 16) v[u] = __ldcs(reinterpret_cast<const int4 *>(p));
        else v[u].x = __ldcs(reinterpret_cast<const int *>(p));
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (c + u >= c1) break;
      char *q = out + (c + u) * 32 * WB;
#pragma unroll
      for (int w = 0; w < WB / 16; w++) // WB >= 16: 16-byte stores, a warp's 512 B contiguous each
        __stcs(reinterpret_cast<int4 *>(q + w * 512 + lane * 16), make_int4(v[u].x + w, v[u].y, v[u].z, v[u].w));
      if constexpr (WB == 8) __stcs(reinterpret_cast<int2 *>(q + lane * 8), make_int2(v[u].x ^ v[u].z, v[u].y ^ v[u].w));
    }
  }
}

// PF: lane 0 asks L2 for the warp's whole task (cp.async.bulk.prefetch.L2: one instruction, no
// registers) before the task's first loads, so its later steps' loads find their lines in L2.
template <int RB, int WB, int U, int SEG, int PF = 0>
__global__ void __launch_bounds__(256) stream(const char *__restrict__ in, char *__restrict__ out, size_t nchunks,
                                              int pol) {
  extern __shared__ int occupancy_limiter[]; // dynamic shared memory only limits blocks per SM
  const int lane = threadIdx.x & 31;
  const size_t warp = (size_t)blockIdx.x * 8 + threadIdx.x / 32, nw = (size_t)gridDim.x * 8;
  const size_t tasks = (nchunks + SEG - 1) / SEG;
  if (pol == FULL || pol == STRIDE) {
    for (size_t t = warp; t < tasks; t += nw) {
      if (PF && lane == 0) {
        const size_t c1 = min(nchunks, (t + 1) * SEG);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(in + t * SEG * 32 * RB),
                     "r"((unsigned)((c1 - t * SEG) * 32 * RB)) : "memory");
      }
      chunks<RB, WB, U>(in, out, t * SEG, min(nchunks, (t + 1) * SEG), lane);
    }
  } else if (pol == BAL) { // an equal contiguous share of chunks per warp
    chunks<RB, WB, U>(in, out, warp * nchunks / nw, (warp + 1) * nchunks / nw, lane);
  } else { // an equal contiguous share of tasks per warp
    const size_t t0 = warp * tasks / nw, t1 = (warp + 1) * tasks / nw;
    for (size_t t = t0; t < t1; t++) chunks<RB, WB, U>(in, out, t * SEG, min(nchunks, (t + 1) * SEG), lane);
  }
  if (nchunks == 0) occupancy_limiter[0] = 0;
}


// The FP4 dequantizer's shape in more detail (part 3): per chunk a lane reads 4 code bytes and
// (SC) one scale byte from a second array (two lanes per byte, as NVFP4's 16-element blocks), (TB)
// looks its 16 output bytes up in a 256-entry shared table of 16-byte entries indexed by that byte
// (filled at block start from cheap integer work, then a block barrier: the real kernel's
// fill_deq_table is ~40 instructions per entry), and stores them plainly (CS 0) or evict-first.
template <int U, int SEG, int SC, int TB, int CS, int FILLW>
__global__ void __launch_bounds__(256) deq_like(const char *__restrict__ codes, const unsigned char *__restrict__ sc,
                                                char *__restrict__ out, size_t nchunks) {
  __shared__ uint4 tab[TB ? 256 : 1];
  const int lane = threadIdx.x & 31;
  if (TB) {
    unsigned x = threadIdx.x * 2654435761u;
#pragma unroll 1
    for (int i = 0; i < FILLW; i++) x = x * 1664525u + 1013904223u; // a dependent chain: the fill's latency
    tab[threadIdx.x & 255] = make_uint4(x, x ^ 1u, x ^ 2u, x ^ 3u);
    __syncthreads();
  }
  const size_t warp = (size_t)blockIdx.x * 8 + threadIdx.x / 32, nw = (size_t)gridDim.x * 8;
  const size_t tasks = (nchunks + SEG - 1) / SEG;
  for (size_t t = warp; t < tasks; t += nw) {
    const size_t c1 = min(nchunks, (t + 1) * SEG);
    for (size_t c = t * SEG; c < c1; c += U) {
      unsigned w[U], s[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        w[u] = 0, s[u] = 0;
        if (c + u < c1) {
          w[u] = __ldg(reinterpret_cast<const unsigned *>(codes + (c + u) * 128 + lane * 4));
          if (SC) s[u] = __ldg(sc + (c + u) * 16 + lane / 2);
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (c + u >= c1) break;
        uint4 e = TB ? tab[(s[u] ^ w[u]) & 255] : make_uint4(w[u], s[u], w[u] >> 8, w[u] >> 16);
        e.x ^= w[u], e.y += w[u], e.z ^= w[u] >> 4, e.w += w[u] >> 12;
        uint4 *q = reinterpret_cast<uint4 *>(out + (c + u) * 512 + lane * 16);
        if (CS) __stcs(reinterpret_cast<int4 *>(q), *reinterpret_cast<int4 *>(&e));
        else *q = e;
      }
    }
  }
}

template <int U, int SEG, int SC, int TB, int CS, int FILLW = 8>
void run_deq(cudaStream_t st, const char *name, size_t code_bytes, char *src, char *dst, size_t slot, double ceil_gbs,
             int sms) {
  const int R = 20;
  const size_t nchunks = code_bytes / 128, moved = code_bytes + (SC ? nchunks * 16 : 0) + nchunks * 512;
  auto k = deq_like<U, SEG, SC, TB, CS, FILLW>;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, 0));
  const size_t tasks = (nchunks + SEG - 1) / SEG;
  const unsigned full = (unsigned)((tasks + 7) / 8), res = (unsigned)(per_sm * sms);
  double us[2];
  for (int g = 0; g < 2; g++)
    us[g] = graph_us(st, R, 6, 1, [&](int r) {
      k<<<g ? res : full, 256, 0, st>>>(src + r * slot, (const unsigned char *)(src + r * slot + (slot / 2)),
                                        dst + r * slot, nchunks);
    });
  printf("%-14s %6.1f MB  full/%d %.2f us %.1f%%  stride %.2f us %.1f%%\n", name, moved / 1e6, per_sm, us[0],
         100.0 * moved / (us[0] * 1e3) / ceil_gbs, us[1], 100.0 * moved / (us[1] * 1e3) / ceil_gbs);
}

template <int RB, int WB, int U, int SEG, int PF = 0>
void run_case(cudaStream_t st, const char *name, size_t read_bytes, char *src, char *dst, size_t slot, double ceil_gbs,
              int sms) {
  const int R = 20;
  const size_t nchunks = read_bytes / (32 * RB), wbytes = nchunks * 32 * WB, moved = read_bytes + wbytes;
  auto k = stream<RB, WB, U, SEG, PF>;
  const double mc = graph_us(st, R, 6, 1, [&](int r) {
    CK(cudaMemcpyAsync(dst + r * slot, src + r * slot, moved / 2, cudaMemcpyDeviceToDevice, st));
  });
  printf("%-10s %7.1f MB  memcpy-same-bytes %7.2f us %5.1f%%", name, moved / 1e6, mc, 100.0 * moved / (mc * 1e3) / ceil_gbs);
  for (int bps : {6, 8}) {
    const int smem = bps == 8 ? 0 : (227 * 1024) / bps - 1024;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, smem));
    for (int pol = FULL; pol <= STRIDE; pol++) { // part 1 also ran BAL and BALTASK
      const size_t tasks = (nchunks + SEG - 1) / SEG;
      const unsigned blocks = pol == FULL ? (unsigned)((tasks + 7) / 8) : (unsigned)(per_sm * sms);
      const double us = graph_us(st, R, 6, 1, [&](int r) {
        k<<<blocks, 256, smem, st>>>(src + r * slot, dst + r * slot, nchunks, pol);
      });
      printf("  %s/%d %.2f us %.1f%%", pol_name[pol], per_sm, us, 100.0 * moved / (us * 1e3) / ceil_gbs);
    }
  }
  printf("\n");
}

int main(int argc, char **argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (argc > 1) { // `tail_bw deq`: part 3's "u4s4 sc tb" at 8 MB of codes, 8 plain launches (for ncu)
    const size_t cb = (size_t)8 << 20, nchunks = cb / 128;
    char *src, *dst;
    CK(cudaMalloc(&src, cb * 2));
    CK(cudaMalloc(&dst, nchunks * 512));
    CK(cudaMemset(src, 1, cb * 2));
    for (int i = 0; i < 8; i++)
      deq_like<4, 4, 1, 1, 0, 8><<<(unsigned)((nchunks / 4 + 7) / 8), 256>>>(src, (const unsigned char *)(src + cb), dst,
                                                                           nchunks);
    CK(cudaDeviceSynchronize());
    printf("deq done\n");
    return 0;
  }
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const size_t slot = (size_t)128 << 20, big = (size_t)512 << 20;
  char *src, *dst;
  CK(cudaMalloc(&src, slot * 20 + big));
  CK(cudaMalloc(&dst, slot * 20 + big));
  CK(cudaMemset(src, 1, slot * 20 + big));
  // the ceiling: cudaMemcpyAsync of 512 MB (read + write bytes per second), as the bench's copy row
  const double bus = graph_us(st, 4, 6, 1, [&](int r) {
    CK(cudaMemcpyAsync(dst + (r & 1) * (big / 2), src + (r & 1) * (big / 2), big / 2, cudaMemcpyDeviceToDevice, st));
  });
  const double ceil_gbs = big / (bus * 1e3);
  printf("ceiling: memcpy 512 MB moved %.1f GB/s; %% below = of that, by graph period\n", ceil_gbs);
  // part 3: the FP4 dequantizer's shape, T=8192 h=2048 (8 MB of codes) and T=32768 (32 MB)
  for (int rep = 0; rep < 2; rep++) {
    for (size_t mb : {8, 32}) {
      const size_t cb = mb << 20;
      printf("-- codes %zu MB (memcpy of the same bytes: see part 2's dq4 rows)\n", mb);
      run_deq<4, 4, 0, 0, 1>(st, "u4s4 cs", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<4, 4, 0, 0, 0>(st, "u4s4 st", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<4, 4, 1, 0, 0>(st, "u4s4 sc", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<4, 4, 1, 1, 0>(st, "u4s4 sc tb", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<4, 4, 1, 1, 0, 64>(st, "u4s4 sc tb64", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<4, 4, 1, 1, 1>(st, "u4s4 sc tb cs", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<8, 8, 1, 1, 0>(st, "u8s8 sc tb", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<8, 8, 1, 1, 1>(st, "u8s8 sc tb cs", cb, src, dst, slot, ceil_gbs, sms);
      run_deq<2, 4, 1, 1, 0>(st, "u2s4 sc tb", cb, src, dst, slot, ceil_gbs, sms);
    }
  }
  // part 2 (call 2): the full / stride grids only, items in flight (U), task length (SEG), the L2 prefetch
  for (int rep = 0; rep < 0; rep++) {
    run_case<16, 8, 2, 4>(st, "q8 u2s4", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 8, 2, 4, 1>(st, "q8 u2s4pf", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 8, 4, 4>(st, "q8 u4s4", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 8, 2, 8, 1>(st, "q8 u2s8pf", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 8, 4, 8>(st, "q8 u4s8", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 8, 8, 8>(st, "q8 u8s8", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<4, 16, 4, 4>(st, "dq4 u4s4", (size_t)8 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<4, 16, 4, 4, 1>(st, "dq4 u4s4pf", (size_t)8 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<4, 16, 8, 8>(st, "dq4 u8s8", (size_t)8 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<4, 16, 4, 16, 1>(st, "dq4 u4s16pf", (size_t)8 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 16, 2, 4, 1>(st, "cp48 pf", (size_t)24 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 16, 4, 4>(st, "cp48 u4", (size_t)24 << 20, src, dst, slot, ceil_gbs, sms);
  }
  for (size_t mb : {8, 32}) // the memcpy of part 3's bytes
    run_case<4, 16, 8, 8>(st, "dq4 u8s8", mb << 20, src, dst, slot, ceil_gbs, sms);
  for (int rep = 0; rep < 0; rep++) { // part 1 (session 16 call 1): equal contiguous shares were slower
    run_case<16, 8, 2, 4>(st, "q8 h2048", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);   // FP8 quant T=8192
    run_case<16, 8, 2, 4>(st, "q8 h4096", (size_t)64 << 20, src, dst, slot, ceil_gbs, sms);   // FP8 quant T=8192 h=4096
    run_case<16, 8, 2, 1>(st, "q8 seg1", (size_t)32 << 20, src, dst, slot, ceil_gbs, sms);    // finer tasks
    run_case<4, 16, 4, 4>(st, "dq4 h2048", (size_t)8 << 20, src, dst, slot, ceil_gbs, sms);   // FP4 dequant T=8192
    run_case<4, 16, 4, 4>(st, "dq4 h4096", (size_t)16 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 16, 2, 4>(st, "cp 48MB", (size_t)24 << 20, src, dst, slot, ceil_gbs, sms);
    run_case<16, 16, 2, 4>(st, "cp 96MB", (size_t)48 << 20, src, dst, slot, ceil_gbs, sms);
  }
  printf("probe done\n");
  return 0;
}
