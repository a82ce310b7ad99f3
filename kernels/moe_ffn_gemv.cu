// MoE expert FFN for few rows per expert (decode; up to ~16 average rows per expert): two
// weight-streaming kernels on tensor cores (gate_up + SiLU-and-mul, down), fp32 accumulation,
// and the router-logits GEMV for few tokens.
//
// Rounding as the CPU reference (kernels/moe_ffn.c): gate and up rounded to bf16, act =
// silu(g) * u in fp32 rounded to bf16; down output rounded to bf16. Each output is one
// warp's dot product in a fixed order (deterministic; no atomics).
#include <cuda_bf16.h>

#include "kernels/moe_ffn_gemv.h"

#define GEMV_WARPS (SL_MOE_FFN_GEMV_THREADS / 32)
__device__ __forceinline__ float gemv_bf16_round(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }

// The block's table of non-empty experts (expert order) and their row counts; returns
// how many there are. Called by all threads. The counts are first read by the whole block
// at once (one L2 round trip; a warp looping over 128 experts would pay four in a row),
// then one warp compacts them in place (slot i <= expert e, and each lane reads its count
// before the ballot, where the warp converges, and writes after).
__device__ __forceinline__ int gemv_active_experts(const int *__restrict__ counts, int num_local, int capacity,
                                                   int *active, int *rows) {
  __shared__ int n_active;
  for (int e = threadIdx.x; e < num_local; e += blockDim.x)
    rows[e] = __ldcg(counts + e); // L2: the down kernel reads them before griddepcontrol.wait
  __syncthreads();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x, lower = (1u << lane) - 1u;
    int na = 0;
    for (int e0 = 0; e0 < num_local; e0 += 32) {
      const int e = e0 + (int)lane;
      const int c = e < num_local ? rows[e] : 0;
      const unsigned on = __ballot_sync(0xffffffffu, c > 0);
      if (c > 0) {
        active[na + __popc(on & lower)] = e;
        rows[na + __popc(on & lower)] = c < capacity ? c : capacity;
      }
      na += __popc(on);
    }
    if (lane == 0) n_active = na;
  }
  __syncthreads();
  return n_active;
}

// ---- Expert FFN weight-streaming kernels (tensor cores) -------------------------------------
//
// Work: a warp owns a tile of 16 weight rows over the whole reduction length K (gate_up:
// gate rows j0..j0+7 and up rows j0..j0+7, K = H; down: output columns h0..h0+15, K = I)
// and multiplies it with all of the expert's input rows (tokens) by mma.sync m16n8k16
// (bf16 in, fp32 accumulate): the weights are the A operand, the tokens the B operand in
// n-tiles of 8, NT n-tiles per pass (1, 2 or 4: up to 32 tokens per weight pass; an expert
// with more rows takes further passes, which re-read its weights, correct but slower).
// The reduction order inside a 32-element k-step is permuted (lane c of a quad loads the
// 16 bytes at k0 + 8c of its rows; words .x/.y feed the first mma, .z/.w the second): the
// same permutation for weights and tokens, so every output is a plain dot product.
// Streaming: 16-byte loads of each lane's two rows, MMA_U k-steps per chunk, two chunks in
// registers (the next chunk's loads are issued before the current one is used), and an
// L2 prefetch PF_AHEAD chunks ahead (one instruction per chunk: lane l fetches the 128-byte
// line l % 2 of row l / 2's 256 bytes), continued into the warp's next tile: the HBM sees
// ~(PF_AHEAD + 2) x 4 KB in flight per warp however few warps have work.
// Tiles (slot-major) are split into one contiguous, balanced range per block, strided over
// the block's 8 warps: a small tile count still spreads over every SM (T=1: 768 gate_up
// tiles, 5-6 streaming warps on each of 132 SMs), and at larger counts a block works on one
// or two experts, so their token rows (the B operand, up to 16 x 4 KB) stay in its L1
// instead of being re-read from L2 for every tile.
#define MMA_U 4    // k-steps of 32 elements per chunk: 2 rows x 4 x 16 B per lane
#define PF_AHEAD 4 // L2 prefetch distance in chunks (256 B of each row per chunk)
#define CHUNK_BYTES (MMA_U * 32 * 2)

__device__ __forceinline__ void ffn_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void ffn_pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Hint only: ask L2 to fetch the 128-byte line holding p. Per lane (CCTL, any address per
// lane); the bulk form (cp.async.bulk.prefetch.L2) takes a warp-uniform address, so 16
// rows would need a 16-step waterfall loop per chunk.
__device__ __forceinline__ void ffn_l2_prefetch(const char *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p) : "memory");
}

__device__ __forceinline__ void ffn_mma(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                        unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One tile's rows as the streaming loop sees them.
typedef struct {
  const uint4 *w0, *w1; // this lane's rows: g and g + 8 of the tile (g = lane / 4)
  const char *pf;       // L2 prefetch: row lane / 2 of the tile, + 128 bytes for odd lanes
} ffn_rows_t;

// Chunk ch of this lane's two rows (zeros past the row end).
__device__ __forceinline__ void ffn_load_chunk(const ffn_rows_t &r, int ch, int V, int c, uint4 a[MMA_U],
                                               uint4 b[MMA_U]) {
#pragma unroll
  for (int u = 0; u < MMA_U; u++) {
    const int v = (ch * MMA_U + u) * 4 + c;
    if (v < V) {
      a[u] = __ldcs(r.w0 + v);
      b[u] = __ldcs(r.w1 + v);
    } else {
      a[u] = b[u] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// acc[t] += W[16 rows, chunk] . X[chunk, tokens t*8 .. t*8+7]; in: the pass's first token
// row (vectors), rows >= nrows read as zero.
template <int NT>
__device__ __forceinline__ void ffn_mma_chunk(const uint4 *in, long in_stride, int nrows, int ch, int V, int g, int c,
                                              const uint4 a[MMA_U], const uint4 b[MMA_U], float acc[NT][4]) {
#pragma unroll
  for (int u = 0; u < MMA_U; u++) {
    const int v = (ch * MMA_U + u) * 4 + c;
#pragma unroll
    for (int t = 0; t < NT; t++) {
      const int row = t * 8 + g;
      uint4 xv = make_uint4(0u, 0u, 0u, 0u);
      if (v < V && row < nrows) xv = in[row * in_stride + v];
      ffn_mma(acc[t], a[u].x, b[u].x, a[u].y, b[u].y, xv.x, xv.y);
      ffn_mma(acc[t], a[u].z, b[u].z, a[u].w, b[u].w, xv.z, xv.w);
    }
  }
}

// One pass of a tile: acc = W_tile . X[rows 0 .. min(nrows, 8 NT))^T over K = 8 V elements.
// next_pf: this lane's prefetch pointer (ffn_rows_t.pf) in the warp's next tile (NULL:
// none; rows of next_row_bytes), whose first chunks are prefetched into L2 during this
// tile's last ones. *need_wait: griddepcontrol.wait still owed before the
// first read of `in` (the down kernel: the activations come from the gate_up kernel).
template <int NT>
__device__ __forceinline__ void ffn_tile_pass(const ffn_rows_t &r, const char *next_pf, long next_row_bytes,
                                              long row_bytes, const uint4 *in,
                                              long in_stride, int nrows, int V, bool *need_wait, float acc[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int nch = (V + 4 * MMA_U - 1) / (4 * MMA_U);
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  const long half = (long)(lane & 1) * 128; // this lane's half of each row's 256-byte chunk
#pragma unroll
  for (int d = 0; d < PF_AHEAD; d++)
    if ((long)d * CHUNK_BYTES + half < row_bytes) ffn_l2_prefetch(r.pf + (long)d * CHUNK_BYTES);
  uint4 a0[MMA_U], b0[MMA_U], a1[MMA_U], b1[MMA_U];
  ffn_load_chunk(r, 0, V, c, a0, b0);
  if (nch > 1) ffn_load_chunk(r, 1, V, c, a1, b1);
  if (*need_wait) {
    ffn_pdl_wait();
    *need_wait = false;
  }
  for (int ch = 0; ch < nch; ch += 2) {
    // Prefetch chunk ch + PF_AHEAD (and + 1) of this tile, or the start of the next tile.
#pragma unroll
    for (int d = 0; d < 2; d++) {
      const long off = (long)(ch + d + PF_AHEAD) * CHUNK_BYTES;
      const long noff = off - (long)nch * CHUNK_BYTES; // chunks past this tile's end
      if (noff < 0) {
        if (off + half < row_bytes) ffn_l2_prefetch(r.pf + off);
      } else if (next_pf && noff + half < next_row_bytes) {
        ffn_l2_prefetch(next_pf + noff);
      }
    }
    ffn_mma_chunk<NT>(in, in_stride, nrows, ch, V, g, c, a0, b0, acc);
    if (ch + 2 < nch) ffn_load_chunk(r, ch + 2, V, c, a0, b0);
    if (ch + 1 < nch) {
      ffn_mma_chunk<NT>(in, in_stride, nrows, ch + 1, V, g, c, a1, b1, acc);
      if (ch + 3 < nch) ffn_load_chunk(r, ch + 3, V, c, a1, b1);
    }
  }
}

// Tiles of the gate_up kernel: slot-major, I / 8 per slot.
__device__ __forceinline__ ffn_rows_t ffn_gu_rows(const __nv_bfloat16 *w_gate_up, int e, int j0, int inter,
                                                 int hidden) {
  const int lane = threadIdx.x & 31, g = lane >> 2, r = lane >> 1;
  const __nv_bfloat16 *base = w_gate_up + (long)e * 2 * inter * hidden;
  ffn_rows_t t;
  t.w0 = (const uint4 *)(base + (long)(j0 + g) * hidden);
  t.w1 = (const uint4 *)(base + (long)(inter + j0 + g) * hidden);
  t.pf = (const char *)(base + (long)(r < 8 ? j0 + r : inter + j0 + r - 8) * hidden) + (lane & 1) * 128;
  return t;
}

// Tiles of the down kernel: slot-major, ceil(H / 16) per slot; rows past H read row H - 1
// (results dropped).
__device__ __forceinline__ ffn_rows_t ffn_dn_rows(const __nv_bfloat16 *w_down, int e, int h0, int inter, int hidden) {
  const int lane = threadIdx.x & 31, g = lane >> 2, r = lane >> 1;
  const __nv_bfloat16 *base = w_down + (long)e * hidden * inter;
  const int h_a = h0 + g < hidden ? h0 + g : hidden - 1, h_b = h0 + g + 8 < hidden ? h0 + g + 8 : hidden - 1;
  const int h_p = h0 + r < hidden ? h0 + r : hidden - 1;
  ffn_rows_t t;
  t.w0 = (const uint4 *)(base + (long)h_a * inter);
  t.w1 = (const uint4 *)(base + (long)h_b * inter);
  t.pf = (const char *)(base + (long)h_p * inter) + (lane & 1) * 128;
  return t;
}

// Token rows per pass: NT n-tiles of 8, chosen from the expert's row count.
#define FFN_PASS_DISPATCH(n, CALL)                                                                                   \
  do {                                                                                                               \
    if ((n) <= 8) {                                                                                                  \
      constexpr int NT = 1;                                                                                          \
      CALL;                                                                                                          \
    } else if ((n) <= 16) {                                                                                          \
      constexpr int NT = 2;                                                                                          \
      CALL;                                                                                                          \
    } else {                                                                                                         \
      constexpr int NT = 4;                                                                                          \
      CALL;                                                                                                          \
    }                                                                                                                \
  } while (0)

template <int NT>
__device__ __forceinline__ void ffn_gu_tile(const ffn_rows_t &r, const char *next_pf, long next_row_bytes, int n,
                                            int slot, int capacity,
                                            int hidden, int inter, int j0, const __nv_bfloat16 *xe,
                                            __nv_bfloat16 *act) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  bool no_wait = false;
  for (int r0 = 0; r0 < n; r0 += 8 * NT) {
    float acc[NT][4];
    ffn_tile_pass<NT>(r, r0 + 8 * NT >= n ? next_pf : NULL, next_row_bytes, (long)hidden * 2,
                      (const uint4 *)(xe + (long)r0 * hidden), hidden / 8, n - r0, hidden / 8, &no_wait, acc);
    // acc[t]: [0], [1] gate j0 + g for tokens t*8 + 2c, +1; [2], [3] up, same tokens.
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int row = r0 + t * 8 + 2 * c + i;
        if (row < n) {
          const float gb = gemv_bf16_round(acc[t][i]), ub = gemv_bf16_round(acc[t][2 + i]);
          act[((long)slot * capacity + row) * inter + j0 + g] = __float2bfloat16_rn(gb / (1.0f + expf(-gb)) * ub);
        }
      }
  }
}

template <int NT>
__device__ __forceinline__ void ffn_dn_tile(const ffn_rows_t &r, const char *next_pf, int n, int slot, int e,
                                            int capacity, int hidden, int inter, int h0, const __nv_bfloat16 *act,
                                            __nv_bfloat16 *y, bool *need_wait) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  for (int r0 = 0; r0 < n; r0 += 8 * NT) {
    float acc[NT][4];
    ffn_tile_pass<NT>(r, r0 + 8 * NT >= n ? next_pf : NULL, (long)inter * 2, (long)inter * 2,
                      (const uint4 *)(act + ((long)slot * capacity + r0) * inter), inter / 8, n - r0, inter / 8,
                      need_wait, acc);
    // acc[t]: [0], [1] column h0 + g for tokens t*8 + 2c, +1; [2], [3] column h0 + g + 8.
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int row = r0 + t * 8 + 2 * c + i;
        if (row < n) {
          __nv_bfloat16 *yr = y + ((long)e * capacity + row) * hidden;
          if (h0 + g < hidden) yr[h0 + g] = __float2bfloat16_rn(acc[t][i]);
          if (h0 + g + 8 < hidden) yr[h0 + g + 8] = __float2bfloat16_rn(acc[t][2 + i]);
        }
      }
  }
}

// act[slot, r, j] = bf16(silu(bf16(x_e[r] . Wgu_e[j])) * bf16(x_e[r] . Wgu_e[I + j])) for the
// slot-th non-empty expert e and its rows r < min(count, capacity). Launched after dispatch
// (programmatic dependent launch where the device has it: waits before reading the counts)
// and lets the down kernel launch early. A warp's last tile prefetches into L2 the start of
// the down tile that warp (block, warp) will take in the down kernel of down_grid blocks
// (the same split, computed here), so HBM keeps streaming across the kernel boundary
// while down's blocks launch and read the counts.
extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS, 1)
    sl_moe_ffn_gemv_gate_up(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                            int inter, const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_gate_up,
                            __nv_bfloat16 *__restrict__ act, const __nv_bfloat16 *__restrict__ w_down, int down_grid) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  ffn_pdl_wait();
  ffn_pdl_trigger();
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int per_slot = inter / 8;
  const long tiles = (long)na * per_slot, begin = tiles * blockIdx.x / gridDim.x,
             end = tiles * (blockIdx.x + 1) / gridDim.x;
  for (long t = begin + threadIdx.x / 32; t < end; t += GEMV_WARPS) {
    const int slot = (int)(t / per_slot), j0 = 8 * (int)(t % per_slot), e = active[slot], n = rows[slot];
    const ffn_rows_t r = ffn_gu_rows(w_gate_up, e, j0, inter, hidden);
    const char *next_pf = NULL;
    long next_row_bytes = (long)hidden * 2;
    if (t + GEMV_WARPS < end) {
      const long tn = t + GEMV_WARPS;
      next_pf = ffn_gu_rows(w_gate_up, active[tn / per_slot], 8 * (int)(tn % per_slot), inter, hidden).pf;
    } else if ((int)blockIdx.x < down_grid) { // the first down tile of this (block, warp)
      const int dn_per_slot = (hidden + 15) / 16;
      const long dn_tiles = (long)na * dn_per_slot, tn = dn_tiles * blockIdx.x / down_grid + threadIdx.x / 32;
      if (tn < dn_tiles * (blockIdx.x + 1) / down_grid) {
        next_pf = ffn_dn_rows(w_down, active[tn / dn_per_slot], 16 * (int)(tn % dn_per_slot), inter, hidden).pf;
        next_row_bytes = (long)inter * 2;
      }
    }
    const __nv_bfloat16 *xe = x + (long)e * capacity * hidden;
    FFN_PASS_DISPATCH(n, (ffn_gu_tile<NT>(r, next_pf, next_row_bytes, n, slot, capacity, hidden, inter, j0, xe, act)));
  }
}

// y_e[r, h] = bf16(act[slot, r] . Wd_e[h]) for the slot-th non-empty expert e, rows r <
// min(count, capacity). Launched as a programmatic dependent of the gate_up kernel: the
// counts (written before gate_up started) and the first tile's weights are read, and its
// L2 prefetch issued, before griddepcontrol.wait; every thread executes the wait before it
// exits, so this kernel's completion implies gate_up's.
extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS, 1)
    sl_moe_ffn_gemv_down(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                         int inter, const __nv_bfloat16 *act, const __nv_bfloat16 *__restrict__ w_down,
                         __nv_bfloat16 *__restrict__ y) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int per_slot = (hidden + 15) / 16;
  const long tiles = (long)na * per_slot, begin = tiles * blockIdx.x / gridDim.x,
             end = tiles * (blockIdx.x + 1) / gridDim.x;
  bool need_wait = true;
  for (long t = begin + threadIdx.x / 32; t < end; t += GEMV_WARPS) {
    const int slot = (int)(t / per_slot), h0 = 16 * (int)(t % per_slot), e = active[slot], n = rows[slot];
    const ffn_rows_t r = ffn_dn_rows(w_down, e, h0, inter, hidden);
    const char *next_pf = NULL;
    if (t + GEMV_WARPS < end) {
      const long tn = t + GEMV_WARPS;
      next_pf = ffn_dn_rows(w_down, active[tn / per_slot], 16 * (int)(tn % per_slot), inter, hidden).pf;
    }
    FFN_PASS_DISPATCH(n, (ffn_dn_tile<NT>(r, next_pf, n, slot, e, capacity, hidden, inter, h0, act, y, &need_wait)));
  }
  if (need_wait) ffn_pdl_wait();
}

// Router logits for few tokens (T <= 16): logits[t, e] = x[t] . w_router[e] in fp32 (no
// rounding). A block per 16 experts (E=128: 8 blocks, 64 KB of weights each), its 8 warps
// splitting the reduction: warp w takes chunks w, w + 8, ... (128 elements each) of the 16
// rows, two chunks' loads in flight at once (all of it at H = 2048: one round trip) after an
// L2 prefetch of all its chunks, then the 8 partial tiles are summed in warp order through
// shared memory (deterministic). The CUDA-core version (a warp per two experts, 4 KB per
// pass, two dependent round trips and shuffle reductions) needed ~2-3 us at Qwen3 size.
template <int NT>
__device__ __forceinline__ void gate_tile(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_router,
                                          float *__restrict__ logits, int num_tokens, int num_experts, int hidden,
                                          int e0, float (*part)[32][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int V = hidden / 8, nch = (V + 4 * MMA_U - 1) / (4 * MMA_U), last = num_experts - 1;
  const long row_bytes = (long)hidden * 2, half = (long)(lane & 1) * 128;
  ffn_rows_t r;
  r.w0 = (const uint4 *)(w_router + (long)(e0 + g < last ? e0 + g : last) * hidden);
  r.w1 = (const uint4 *)(w_router + (long)(e0 + g + 8 < last ? e0 + g + 8 : last) * hidden);
  r.pf = (const char *)(w_router + (long)(e0 + (lane >> 1) < last ? e0 + (lane >> 1) : last) * hidden) + half;
  for (int ch = warp; ch < nch; ch += GEMV_WARPS)
    if ((long)ch * CHUNK_BYTES + half < row_bytes) ffn_l2_prefetch(r.pf + (long)ch * CHUNK_BYTES);
  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  const uint4 *in = (const uint4 *)x;
  for (int ch = warp; ch < nch; ch += 2 * GEMV_WARPS) {
    uint4 a0[MMA_U], b0[MMA_U], a1[MMA_U], b1[MMA_U];
    const bool two = ch + GEMV_WARPS < nch;
    ffn_load_chunk(r, ch, V, c, a0, b0);
    if (two) ffn_load_chunk(r, ch + GEMV_WARPS, V, c, a1, b1);
    ffn_mma_chunk<NT>(in, V, num_tokens, ch, V, g, c, a0, b0, acc);
    if (two) ffn_mma_chunk<NT>(in, V, num_tokens, ch + GEMV_WARPS, V, g, c, a1, b1, acc);
  }
#pragma unroll
  for (int t = 0; t < NT; t++)
#pragma unroll
    for (int i = 0; i < 4; i++) part[warp * 2 + t][lane][i] = acc[t][i];
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float sum = part[t][lane][i];
        for (int w = 1; w < GEMV_WARPS; w++) sum += part[w * 2 + t][lane][i];
        const int tok = t * 8 + 2 * c + (i & 1), e = e0 + g + (i >= 2 ? 8 : 0);
        if (tok < num_tokens && e < num_experts) logits[(long)tok * num_experts + e] = sum;
      }
  }
  __syncthreads(); // part is reused by the block's next tile
}

extern "C" __global__ void __launch_bounds__(SL_MOE_FFN_GEMV_THREADS, 1)
    sl_moe_gate_gemv(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_router,
                     float *__restrict__ logits, int num_tokens, int num_experts, int hidden) {
  __shared__ float part[GEMV_WARPS * 2][32][4];
  for (int e0 = 16 * blockIdx.x; e0 < num_experts; e0 += 16 * gridDim.x) {
    if (num_tokens <= 8)
      gate_tile<1>(x, w_router, logits, num_tokens, num_experts, hidden, e0, part);
    else
      gate_tile<2>(x, w_router, logits, num_tokens, num_experts, hidden, e0, part);
  }
}
