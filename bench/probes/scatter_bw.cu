// Probe (not part of the build): the floor of a prefill dispatch's copy at Qwen3-30B-A3B T=16384 (H=2048, K=8,
// E=128) when the destination rows are given and nothing is quantized -- how fast HBM takes the K scattered rows
// of each token's payload at each payload's row size: FP4 (1024 code bytes + 64 or 128 scale bytes per row), FP8
// (2048 + 64) and bf16 (4096, no scales). One warp per (token, 1024 columns): 4 x 16 bytes of x per lane
// (coalesced, 2 items in flight), folded into the payload's code bytes and stored to the K rows of
// [E, capacity, row] (1-4 coalesced 16-byte stores per lane per row); the scales, where the payload has them, into
// [E, capacity, H/block] by 16-byte pieces from the first lanes (as the staged copy stores them). Rows:
// destinations as the bench's (uniform top-8, slots in token order per expert, dropless capacity T), the same with
// a compact capacity (the largest count), contiguous destinations (row t*K+k: no scatter), the scales left out,
// streaming (__stcs) stores, fewer blocks per SM (8 by default), and "quantized" rows (qscatter: the real encoder
// of kernels/quant_dev.cuh on random bf16). DeepSeek-V3 (E=256, H=7168) at a compact capacity. Timed per launch in
// a graph of 8 (probe_util.cuh); x rotates over 4 buffers (L2 never serves it), the outputs are the same each
// launch (as the bench's). %ceiling: against the faster of a copy kernel and cudaMemcpyAsync of 256 MB -> 256 MB;
// %cp@sz: a cudaMemcpyAsync of the same bytes. Results: bench/results/2026-12-01-s23-h200-call{3,4,6}/ (calls 1-2 had overlapping rows).
// Session 24: DeepSeek-V3 quantized rows at the dispatch's dropless capacity too (15 GB of FP4 rows), and
// `scatter_bw [MODEL [ROW]]` runs the rows whose model / row names contain those strings (for ncu).
// Session 25: quantized rows with an expert's slots in groups of tokens taken in a random order (the unordered
// copies' order; bench/results/2026-12-01-s25-h200-call3: 1-2.5 % slower than token order).
// nvcc -O3 -arch=sm_90 -I../.. scatter_bw.cu -o scatter_bw
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <cuda_bf16.h>

#include "kernels/quant_dev.cuh"
#include "kernels/quant_formats.h"
#include "probe_util.cuh"

enum { T = 16384, K = 8, ITEM = 1024, NX = 4 };

// Items its[0] and its[1] (one token's 1024 columns each): lane vector j * 32 + lane of x, and lane k < K's row.
__device__ __forceinline__ void load_two(const uint4 *__restrict__ x, const int *__restrict__ rows, int H,
                                         const int (&its)[2], uint4 (&v)[2][4], int (&r)[2]) {
  const int NC = H / ITEM, lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < 2; u++) {
    const int t = its[u] / NC, c = its[u] % NC;
    const bool live = its[u] < T * NC;
    const uint4 *src = x + (size_t)t * (H / 8) + c * (ITEM / 8) + lane;
#pragma unroll
    for (int j = 0; j < 4; j++)
      v[u][j] = live ? __ldcs(src + 32 * j) : make_uint4(0, 0, 0, 0);
    r[u] = live && lane < K ? rows[t * K + lane] : 0;
  }
}

// CB: 16-byte code pieces per lane per row (1 FP4, 2 FP8, 4 bf16); SP: 16-byte scale pieces per row per item (0-4).
template <int CB, int SP, bool STCS>
__global__ void __launch_bounds__(256) scatter(const uint4 *__restrict__ x, uint4 *__restrict__ codes,
                                               uint4 *__restrict__ scales, const int *__restrict__ rows, int H) {
  const int NC = H / ITEM, lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
  const size_t row_q = (size_t)H * CB / 32; // 16-byte pieces of one code row (H * CB / 2 bytes)
  const size_t srow_q = (size_t)NC * SP;    // 16-byte pieces of one scale row
  constexpr int SPD = SP > 0 ? SP : 1;
  for (int it = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); it < T * NC; it += 2 * nw) {
    int its[2] = {it, it + nw};
    uint4 v[2][4];
    int r[2];
    load_two(x, rows, H, its, v, r);
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (its[u] >= T * NC) break;
      const int c = its[u] % NC;
      uint4 o[4];
#pragma unroll
      for (int j = 0; j < CB; j++)
        o[j] = v[u][j];
#pragma unroll
      for (int j = CB; j < 4; j++) {
        o[j % CB].x ^= v[u][j].x;
        o[j % CB].y ^= v[u][j].y;
        o[j % CB].z ^= v[u][j].z;
        o[j % CB].w ^= v[u][j].w;
      }
#pragma unroll
      for (int k = 0; k < K; k++) {
        const int row = __shfl_sync(0xffffffffu, r[u], k);
        uint4 *d = codes + (size_t)row * row_q + (size_t)c * (ITEM * CB / 32) + lane;
#pragma unroll
        for (int j = 0; j < CB; j++) {
          if (STCS)
            __stcs(d + 32 * j, o[j]);
          else
            d[32 * j] = o[j];
        }
      }
      if (SP > 0) {
        const int row = __shfl_sync(0xffffffffu, r[u], (lane / SPD) & 31);
        if (lane >= K * SP) continue;
        uint4 *d = scales + (size_t)row * srow_q + (size_t)c * SP + lane % SPD;
        if (STCS)
          __stcs(d, o[0]);
        else
          *d = o[0];
      }
    }
  }
}

// The same walk with the real quantization (kernels/quant_dev.cuh, as the dispatch's quantize_vec): lane vector n =
// j * 32 + lane of the item (coalesced loads), its block's absmax over QLANES lanes, the fast encoder; codes and
// scales into the warp's shared buffer laid out as the destination row, then 16-byte stores from it to the K rows
// (codes: 1 or 2 per lane per row) and the scales' pieces from the first lanes. 2 items' loads in flight.
template <int FMT, int RULE>
__global__ void __launch_bounds__(256)
    qscatter(const uint4 *__restrict__ x, uint4 *__restrict__ codes, uint4 *__restrict__ scales,
             const int *__restrict__ rows, int H, float gs) {
  constexpr bool FP4 = FMT == SL_QFMT_MXFP4 || FMT == SL_QFMT_NVFP4;
  constexpr int QB = FMT == SL_QFMT_FP8_GROUP ? 128 : FMT == SL_QFMT_NVFP4 ? 16 : 32, QLANES = QB / 8;
  constexpr int SBYTES = FMT == SL_QFMT_FP8_GROUP ? 4 : 1;
  constexpr int CODES = FP4 ? ITEM / 2 : ITEM, SCALES = ITEM / QB * SBYTES, CB = CODES / 512, SP = SCALES / 16;
  __shared__ __align__(16) unsigned char buf[8][CODES + SCALES];
  const int NC = H / ITEM, lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = gridDim.x * (blockDim.x >> 5);
  unsigned char *b = buf[w];
  const size_t row_q = (size_t)NC * CODES / 16, srow_q = (size_t)NC * SP;
  for (int it = blockIdx.x * (blockDim.x >> 5) + w; it < T * NC; it += 2 * nw) {
    int its[2] = {it, it + nw};
    uint4 v[2][4];
    int r[2];
    load_two(x, rows, H, its, v, r);
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (its[u] >= T * NC) break;
      const int c = its[u] % NC;
      __syncwarp();
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int n = j * 32 + lane;
        float f[8], absmax, s32;
        int bad;
        unsigned char s8;
        sl_kq_unpack<SL_DTYPE_BF16>(v[u][j], f);
        sl_kq_block_absmax16<SL_DTYPE_BF16, QLANES>(v[u][j], absmax, bad);
        const unsigned long long q =
            sl_kq_quantize_fast<FMT, RULE, 8, SL_DTYPE_BF16, true>(f, absmax, bad, gs, s32, s8, v[u][j]);
        if (FP4)
          reinterpret_cast<unsigned *>(b)[n] = (unsigned)q;
        else
          reinterpret_cast<uint2 *>(b)[n] = make_uint2((unsigned)q, (unsigned)(q >> 32));
        if (lane % QLANES == 0) {
          if (FMT == SL_QFMT_FP8_GROUP)
            reinterpret_cast<float *>(b + CODES)[n * 8 / QB] = s32;
          else
            b[CODES + n * 8 / QB] = s8;
        }
      }
      __syncwarp();
      uint4 o[CB];
#pragma unroll
      for (int j = 0; j < CB; j++)
        o[j] = reinterpret_cast<const uint4 *>(b)[j * 32 + lane];
#pragma unroll
      for (int k = 0; k < K; k++) {
        const int row = __shfl_sync(0xffffffffu, r[u], k);
        uint4 *d = codes + (size_t)row * row_q + (size_t)c * (CODES / 16) + lane;
#pragma unroll
        for (int j = 0; j < CB; j++)
          d[32 * j] = o[j];
      }
      const int row = __shfl_sync(0xffffffffu, r[u], (lane / SP) & 31);
      if (lane < K * SP)
        scales[(size_t)row * srow_q + (size_t)c * SP + lane % SP] =
            reinterpret_cast<const uint4 *>(b + CODES)[lane % SP];
    }
  }
}

// Finite bf16 of magnitudes 2^-7 .. 2^8 with random signs (a hash of the index).
__global__ void fill_bf16(unsigned short *p, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = (unsigned short)(0x3c00u + (h & 0x7ffu) + ((h >> 16) & 1u) * 0x8000u);
  }
}

struct Routing {
  std::vector<int> rows; // (t, k) -> e * cap + slot
  int cap;
};

// group > 0: each expert's slots follow groups of `group` consecutive tokens taken in a random order (per expert),
// token order within a group -- the unordered copy's slots (session 25); group 1: every expert's slots shuffled.
static Routing route(int E, bool compact, bool contiguous, int group = 0) {
  std::mt19937 g(1234);
  std::vector<int> ids(T * K), cnt(E, 0), slot(T * K);
  for (int t = 0; t < T; t++) {
    std::vector<int> p(E);
    for (int e = 0; e < E; e++)
      p[e] = e;
    for (int k = 0; k < K; k++) {
      std::uniform_int_distribution<int> d(k, E - 1);
      std::swap(p[k], p[d(g)]);
      ids[t * K + k] = p[k];
      slot[t * K + k] = cnt[p[k]]++;
    }
  }
  if (group > 0) { // per expert: the groups' pair counts in a random order give each group its base
    const int ng = (T + group - 1) / group;
    std::vector<int> gcnt((size_t)ng * E, 0), gbase((size_t)ng * E), order(ng), rank(T * K);
    for (int i = 0; i < T * K; i++) rank[i] = gcnt[(size_t)(i / K / group) * E + ids[i]]++;
    for (int e = 0; e < E; e++) {
      for (int j = 0; j < ng; j++) order[j] = j;
      std::shuffle(order.begin(), order.end(), g);
      for (int j = 0, b = 0; j < ng; j++) {
        gbase[(size_t)order[j] * E + e] = b;
        b += gcnt[(size_t)order[j] * E + e];
      }
    }
    for (int i = 0; i < T * K; i++) slot[i] = gbase[(size_t)(i / K / group) * E + ids[i]] + rank[i];
  }
  Routing r;
  r.cap = compact ? *std::max_element(cnt.begin(), cnt.end()) : T;
  r.rows.resize(T * K);
  for (int i = 0; i < T * K; i++)
    r.rows[i] = contiguous ? i : ids[i] * r.cap + slot[i];
  return r;
}

int main(int argc, char **argv) {
  const char *want_model = argc > 1 ? argv[1] : "", *want_row = argc > 2 ? argv[2] : "";
  int sms, dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const size_t xmax = (size_t)T * 7168 * 2, big = 512ull << 20;
  const size_t codes_bytes = 16ull << 30, scales_bytes = 2ull << 30;
  char *x, *codes, *scales, *src, *dst;
  int *rows;
  CK(cudaMalloc(&x, xmax * NX));
  fill_bf16<<<sms * 8, 256, 0, st>>>((unsigned short *)x, xmax * NX / 2);
  CK(cudaStreamSynchronize(st));
  CK(cudaMalloc(&codes, codes_bytes)); // Qwen3's bf16 rows at dropless capacity: 8 GB; DSv3 FP4 15 GB
  CK(cudaMalloc(&scales, scales_bytes));
  CK(cudaMalloc(&rows, sizeof(int) * T * K));
  CK(cudaMalloc(&src, big));
  CK(cudaMalloc(&dst, big));
  CK(cudaMemset(src, 1, big));
  // The ceiling: a copy kernel and cudaMemcpyAsync of 256 MB (read + write counted).
  const double big_us =
      graph_us(st, 8, 6, 1, [&](int) { cp<<<sms * 8, 256, 0, st>>>((const int4 *)src, (int4 *)dst, big / 2 / 16); });
  const double mc_us =
      graph_us(st, 8, 6, 1, [&](int) { CK(cudaMemcpyAsync(dst, src, big / 2, cudaMemcpyDeviceToDevice, st)); });
  const double kern_gbps = 2.0 * (big / 2) / (big_us * 1e3), mc_gbps = 2.0 * (big / 2) / (mc_us * 1e3);
  const double ceil_gbps = kern_gbps > mc_gbps ? kern_gbps : mc_gbps;
  printf("# scatter_bw, %d SMs; ceiling: copy kernel (256 MB -> 256 MB) %.1f GB/s, cudaMemcpyAsync %.1f GB/s\n", sms,
         kern_gbps, mc_gbps);
  printf("%-44s %9s %9s %8s %9s %8s\n", "row", "MB", "us", "GB/s", "%ceiling", "%cp@sz");
  struct Case {
    const char *name;
    int cb, sp;
    bool compact, contiguous, stcs;
    int per_sm = 8;
    int q = -1;
    int group = 0; // route()'s group: slots by groups of tokens in a random order
  };
  const Case qwen3[] = {
      {"fp4 (1024 + 64 B) scattered", 1, 2, false, false, false},
      {"fp4 codes only scattered", 1, 0, false, false, false},
      {"fp4 scattered, compact capacity", 1, 2, true, false, false},
      {"fp4 scattered, __stcs", 1, 2, false, false, true},
      {"fp4 contiguous rows", 1, 2, false, true, false},
      {"fp4 scattered, 2 x 8 warps per SM", 1, 2, false, false, false, 2},
      {"fp4 scattered, 4 x 8 warps per SM", 1, 2, false, false, false, 4},
      {"nvfp4 (1024 + 128 B) scattered", 1, 4, false, false, false},
      {"fp8 (2048 + 64 B) scattered", 2, 2, false, false, false},
      {"fp8 codes only scattered", 2, 0, false, false, false},
      {"fp8 contiguous rows", 2, 2, false, true, false},
      {"fp8 scattered, 2 x 8 warps per SM", 2, 2, false, false, false, 2},
      {"fp8 scattered, 4 x 8 warps per SM", 2, 2, false, false, false, 4},
      {"fp4 quantized: mxfp4 scattered", 1, 2, false, false, false, 8, SL_QFMT_MXFP4},
      {"fp4 quantized: nvfp4 scattered", 1, 4, false, false, false, 8, SL_QFMT_NVFP4},
      {"fp8 quantized: fp8-g128 scattered", 2, 2, false, false, false, 8, SL_QFMT_FP8_GROUP},
      {"fp8 quantized: mxfp8 scattered", 2, 2, false, false, false, 8, SL_QFMT_MXFP8},
      {"fp4 quantized: mxfp4, slots by groups of 42", 1, 2, false, false, false, 8, SL_QFMT_MXFP4, 42},
      {"fp8 quantized: fp8-g128, slots by groups of 42", 2, 2, false, false, false, 8, SL_QFMT_FP8_GROUP, 42},
      {"bf16 (4096 B) scattered", 4, 0, false, false, false},
      {"bf16 contiguous rows", 4, 0, false, true, false},
  };
  // DeepSeek-V3 at a compact capacity (dropless would be 60 GB of bf16 rows; Qwen3's rows above show the two the same).
  const Case dsv3[] = {
      {"fp4 (3584 + 224 B) scattered", 1, 2, true, false, false},
      {"fp4 codes only scattered", 1, 0, true, false, false},
      {"fp4 contiguous rows", 1, 2, false, true, false},
      {"nvfp4 (3584 + 448 B) scattered", 1, 4, true, false, false},
      {"fp8 (7168 + 224 B) scattered", 2, 2, true, false, false},
      {"fp8 contiguous rows", 2, 2, false, true, false},
      {"bf16 (14336 B) scattered", 4, 0, true, false, false},
      {"fp4 quantized: mxfp4 scattered", 1, 2, true, false, false, 8, SL_QFMT_MXFP4},
      {"fp4 quantized: nvfp4 scattered", 1, 4, true, false, false, 8, SL_QFMT_NVFP4},
      {"fp8 quantized: fp8-g128 scattered", 2, 2, true, false, false, 8, SL_QFMT_FP8_GROUP},
      {"fp4 quantized: mxfp4, slots by groups of 42", 1, 2, true, false, false, 8, SL_QFMT_MXFP4, 42},
      {"fp4 quantized: mxfp4, slots by groups of 8", 1, 2, true, false, false, 8, SL_QFMT_MXFP4, 8},
      {"fp4 quantized: mxfp4, slots shuffled", 1, 2, true, false, false, 8, SL_QFMT_MXFP4, 1},
      {"fp8 quantized: fp8-g128, slots by groups of 42", 2, 2, true, false, false, 8, SL_QFMT_FP8_GROUP, 42},
      {"fp4 quantized: mxfp4 scattered, dropless", 1, 2, false, false, false, 8, SL_QFMT_MXFP4},
      {"fp4 quantized: nvfp4 scattered, dropless", 1, 4, false, false, false, 8, SL_QFMT_NVFP4},
      {"fp4 (3584 + 224 B) scattered, dropless", 1, 2, false, false, false},
  };
  struct Model {
    const char *name;
    int E, H;
    const Case *cases;
    int n;
  };
  const Model models[] = {{"qwen3-30b-a3b (E=128, H=2048)", 128, 2048, qwen3, (int)(sizeof qwen3 / sizeof *qwen3)},
                          {"deepseek-v3 (E=256, H=7168)", 256, 7168, dsv3, (int)(sizeof dsv3 / sizeof *dsv3)}};
  for (const Model &m : models) {
    if (!strstr(m.name, want_model)) continue;
    const size_t xbytes = (size_t)T * m.H * 2;
    const int NC = m.H / ITEM;
    for (int round = 0; round < 2; round++) {
      printf("## %s, T=%d, round %d\n", m.name, T, round + 1);
      for (int i = 0; i < m.n; i++) {
        const Case &cs = m.cases[i];
        if (!strstr(cs.name, want_row)) continue;
        Routing rt = route(m.E, cs.compact, cs.contiguous, cs.group);
        const size_t nrows = cs.contiguous ? (size_t)T * K : (size_t)m.E * rt.cap;
        if (nrows * m.H * cs.cb / 2 > codes_bytes || nrows * NC * cs.sp * 16 > scales_bytes) {
          printf("%-44s does not fit\n", cs.name);
          continue;
        }
        CK(cudaMemcpy(rows, rt.rows.data(), sizeof(int) * T * K, cudaMemcpyHostToDevice));
        int qper = 0; // resident blocks of the quantizing kernel (its registers allow fewer than 8)
        if (cs.q == SL_QFMT_MXFP4)
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&qper, qscatter<SL_QFMT_MXFP4, SL_QRULE_CEIL>, 256, 0));
        if (cs.q == SL_QFMT_NVFP4)
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&qper, qscatter<SL_QFMT_NVFP4, SL_QRULE_IEEE>, 256, 0));
        if (cs.q == SL_QFMT_FP8_GROUP)
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&qper, qscatter<SL_QFMT_FP8_GROUP, SL_QRULE_IEEE>, 256, 0));
        if (cs.q == SL_QFMT_MXFP8)
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&qper, qscatter<SL_QFMT_MXFP8, SL_QRULE_CEIL>, 256, 0));
        auto launch = [&](int r) {
          const uint4 *xr = (const uint4 *)(x + (size_t)(r % NX) * xbytes);
#define L(CB, SP, S) scatter<CB, SP, S><<<sms * cs.per_sm, 256, 0, st>>>(xr, (uint4 *)codes, (uint4 *)scales, rows, m.H)
#define Q(F, R) qscatter<F, R><<<sms * qper, 256, 0, st>>>(xr, (uint4 *)codes, (uint4 *)scales, rows, m.H, 1.0f)
          if (cs.q == SL_QFMT_MXFP4)
            Q(SL_QFMT_MXFP4, SL_QRULE_CEIL);
          else if (cs.q == SL_QFMT_NVFP4)
            Q(SL_QFMT_NVFP4, SL_QRULE_IEEE);
          else if (cs.q == SL_QFMT_FP8_GROUP)
            Q(SL_QFMT_FP8_GROUP, SL_QRULE_IEEE);
          else if (cs.q == SL_QFMT_MXFP8)
            Q(SL_QFMT_MXFP8, SL_QRULE_CEIL);
          else if (cs.cb == 1 && cs.sp == 2 && !cs.stcs)
            L(1, 2, false);
          else if (cs.cb == 1 && cs.sp == 2)
            L(1, 2, true);
          else if (cs.cb == 1 && cs.sp == 0)
            L(1, 0, false);
          else if (cs.cb == 1 && cs.sp == 4)
            L(1, 4, false);
          else if (cs.cb == 2 && cs.sp == 2)
            L(2, 2, false);
          else if (cs.cb == 2 && cs.sp == 0)
            L(2, 0, false);
          else
            L(4, 0, false);
#undef L
#undef Q
        };
        const double us = graph_us(st, 8, 6, 1, launch);
        const double bytes = (double)xbytes + (double)T * K * ((double)m.H * cs.cb / 2 + NC * cs.sp * 16);
        const size_t half = (size_t)(bytes / 2) / 16 * 16;
        const double cus =
            half <= big
                ? graph_us(st, 8, 6, 1, [&](int) { CK(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice, st)); })
                : 0;
        const double gbps = bytes / (us * 1e3);
        printf("%-44s %9.1f %9.2f %8.1f %8.1f%% %7.1f%%\n", cs.name, bytes / 1e6, us, gbps, 100 * gbps / ceil_gbps,
               100 * cus / us);
      }
    }
  }
  CK(cudaGetLastError());
  printf("probe done\n");
  return 0;
}
