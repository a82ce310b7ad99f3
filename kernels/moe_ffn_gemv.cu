// MoE expert FFN for few rows per expert (decode; up to ~16 average rows per expert): two
// weight-streaming kernels on tensor cores (gate_up + SiLU-and-mul, down), fp32 accumulation,
// and the router-logits GEMV for few tokens.
//
// Rounding as the CPU reference (kernels/moe_ffn.c): gate and up rounded to bf16, act =
// silu(g) * u in fp32 rounded to bf16; down output rounded to bf16. Each output is one
// warp's dot product in a fixed order (deterministic; no atomics).
#include <cuda_bf16.h>

#include "kernels/bulk_copy.cuh"    // bulk variant
#include "kernels/grid_barrier.cuh" // sl_dev_error_t, sl_dev_error_record (bulk variant)
#include "kernels/moe_ffn_gemv.h"
#include "kernels/moe_pdl.cuh"

// FFN_SPLIT (JIT constant; host: kernels/moe_ffn.c, ffn_variant): 0 = the wide variant
// (256 threads, 8/16/32 token rows per pass, one warp per 16-row tile over the whole K);
// 1 = the split variant for <= 8 rows per expert (512 threads, 8 token rows per pass, and
// when a block has fewer tiles than warps each tile's K is split over up to
// FFN_WARPS / tiles warps, partial sums added through shared memory in warp order).
// FFN_BULK (JIT constant): 1 = the bulk variant (sm_90+; FFN_SPLIT 0): weights staged in
// shared memory by the bulk-copy engine, a producer warp and SL_MOE_FFN_BULK_CONSUMERS
// consumer warps (kernels/moe_ffn_gemv.h, "Bulk variant"); its kernels replace the two
// FFN kernels below under the same names, with two more arguments (error record, timeout).
#ifndef FFN_SPLIT
#error "FFN_SPLIT (0 wide, 1 split) must be defined by the host (kernels/moe_ffn.c)"
#endif
#ifndef FFN_BULK
#error "FFN_BULK (0, or 1 for the bulk-copy variant) must be defined by the host (kernels/moe_ffn.c)"
#endif
#if FFN_BULK && FFN_SPLIT
#error "FFN_BULK and FFN_SPLIT are separate variants: define at most one of them as 1"
#endif
#define GEMV_WARPS (SL_MOE_FFN_GEMV_THREADS / 32) // router-logits kernel
#if FFN_BULK
#define FFN_THREADS SL_MOE_FFN_BULK_THREADS
#elif FFN_SPLIT
#define FFN_THREADS SL_MOE_FFN_GEMV_SPLIT_THREADS
#else
#define FFN_THREADS SL_MOE_FFN_GEMV_THREADS
#endif
#define FFN_WARPS (FFN_THREADS / 32)
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
// registers (the next chunk's loads are issued before the current one is used), and,
// when FFN_PF > 0, an L2 prefetch PF_AHEAD chunks ahead (one instruction per chunk: lane l
// fetches the 128-byte line l % 2 of row l / 2's 256 bytes), continued into the warp's next
// tile. The default is no prefetch (SL_MOE_FFN_GEMV_PF 0): on the H200 the prefetch's extra
// L2 lookups made L2 throughput the limit (92 % under ncu at T = 128) and the layer ran
// 10-12 % slower at T = 8..128 (kernels/moe_ffn_gemv.h has the sweep).
// Tiles (slot-major) are split into one contiguous, balanced range per block, strided over
// the block's 8 warps: a small tile count still spreads over every SM (T=1: 768 gate_up
// tiles, 5-6 streaming warps on each of 132 SMs), and at larger counts a block works on one
// or two experts, so their token rows (the B operand, up to 16 x 4 KB) stay in its L1
// instead of being re-read from L2 for every tile.
#define MMA_U 4    // k-steps of 32 elements per chunk: 2 rows x 4 x 16 B per lane
#ifndef FFN_PF
#error "FFN_PF (L2 prefetch distance in chunks, 0: none) must be defined by the host (kernels/moe_ffn.c)"
#endif
#define PF_AHEAD FFN_PF // L2 prefetch distance in chunks (256 B of each row per chunk)
#define CHUNK_BYTES (MMA_U * 32 * 2)

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
// Chunks [ch0, ch1) of the K range only (the split variant's part of a tile; else 0, nch):
// next_pf then points at the next unit's first chunk (its own ch0 applied) and
// next_row_bytes counts the bytes from there to its row end.
template <int NT>
__device__ __forceinline__ void ffn_tile_pass(const ffn_rows_t &r, int ch0, int ch1, const char *next_pf,
                                              long next_row_bytes, long row_bytes, const uint4 *in,
                                              long in_stride, int nrows, int V, bool *need_wait, float acc[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  const long half = (long)(lane & 1) * 128; // this lane's half of each row's 256-byte chunk
  const long end_bytes = (long)ch1 * CHUNK_BYTES < row_bytes ? (long)ch1 * CHUNK_BYTES : row_bytes;
#pragma unroll
  for (int d = 0; d < PF_AHEAD; d++)
    if ((long)(ch0 + d) * CHUNK_BYTES + half < end_bytes) ffn_l2_prefetch(r.pf + (long)(ch0 + d) * CHUNK_BYTES);
  uint4 a0[MMA_U], b0[MMA_U], a1[MMA_U], b1[MMA_U];
  ffn_load_chunk(r, ch0, V, c, a0, b0);
  if (ch0 + 1 < ch1) ffn_load_chunk(r, ch0 + 1, V, c, a1, b1);
  if (*need_wait) {
    sl_moe_pdl_wait();
    *need_wait = false;
  }
  for (int ch = ch0; ch < ch1; ch += 2) {
    // Prefetch chunk ch + PF_AHEAD (and + 1) of this range, or the start of the next unit.
#pragma unroll
    for (int d = 0; d < (PF_AHEAD > 0 ? 2 : 0); d++) {
      const long off = (long)(ch + d + PF_AHEAD) * CHUNK_BYTES;
      const long noff = off - (long)ch1 * CHUNK_BYTES; // chunks past this range's end
      if (noff < 0) {
        if (off + half < end_bytes) ffn_l2_prefetch(r.pf + off);
      } else if (next_pf && noff + half < next_row_bytes) {
        ffn_l2_prefetch(next_pf + noff);
      }
    }
    ffn_mma_chunk<NT>(in, in_stride, nrows, ch, V, g, c, a0, b0, acc);
    if (ch + 2 < ch1) ffn_load_chunk(r, ch + 2, V, c, a0, b0);
    if (ch + 1 < ch1) {
      ffn_mma_chunk<NT>(in, in_stride, nrows, ch + 1, V, g, c, a1, b1, acc);
      if (ch + 3 < ch1) ffn_load_chunk(r, ch + 3, V, c, a1, b1);
    }
  }
}

__device__ __forceinline__ int ffn_nch(int V) { return (V + 4 * MMA_U - 1) / (4 * MMA_U); }

// The work split: sl_moe_ffn_work in kernels/moe_ffn_gemv.h (shared with the unit test that
// checks its coverage). Both kernels and gate_up's prefetch of down's first unit use it, so
// they agree.
typedef sl_moe_ffn_work_t ffn_work_t;
__device__ __forceinline__ ffn_work_t ffn_work(long tiles, int grid, int block, int warp, int nch) {
  return sl_moe_ffn_work(tiles, grid, block, warp, nch, FFN_WARPS, FFN_SPLIT);
}
__device__ __forceinline__ void ffn_work_unit(ffn_work_t *w, int u, int nch) { sl_moe_ffn_work_unit(w, u, nch); }

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

// Token rows per pass: NT n-tiles of 8, chosen from the expert's row count. The split
// variant has NT = 1 only (8 rows per pass, more rows take more passes): its 4
// accumulators and the absence of the 16/32-row code are what keep it under the 128
// registers that 16 warps per SM allow (the wide kernel's NT = 4 path sets its 214).
#if FFN_SPLIT
#define FFN_PASS_DISPATCH(n, CALL)                                                                                   \
  do {                                                                                                               \
    constexpr int NT = 1;                                                                                            \
    CALL;                                                                                                            \
  } while (0)
#else
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
#endif

// One pass's outputs, rows r0 + t*8 + 2c + i < n. gate_up: acc[t][0], [1] gate j0 + g for
// tokens t*8 + 2c, +1; [2], [3] up, same tokens.
template <int NT>
__device__ __forceinline__ void ffn_gu_store(const float acc[NT][4], int r0, int n, int slot, int capacity,
                                             int inter, int j0, __nv_bfloat16 *act) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
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

// down: acc[t][0], [1] column h0 + g for tokens t*8 + 2c, +1; [2], [3] column h0 + g + 8.
template <int NT>
__device__ __forceinline__ void ffn_dn_store(const float acc[NT][4], int r0, int n, int e, int capacity, int hidden,
                                             int h0, __nv_bfloat16 *y) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
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

template <int NT>
__device__ __forceinline__ void ffn_gu_tile(const ffn_rows_t &r, const char *next_pf, long next_row_bytes, int n,
                                            int slot, int capacity,
                                            int hidden, int inter, int j0, const __nv_bfloat16 *xe,
                                            __nv_bfloat16 *act) {
  bool no_wait = false;
  for (int r0 = 0; r0 < n; r0 += 8 * NT) {
    float acc[NT][4];
    ffn_tile_pass<NT>(r, 0, ffn_nch(hidden / 8), r0 + 8 * NT >= n ? next_pf : NULL, next_row_bytes,
                      (long)hidden * 2, (const uint4 *)(xe + (long)r0 * hidden), hidden / 8, n - r0, hidden / 8,
                      &no_wait, acc);
    ffn_gu_store<NT>(acc, r0, n, slot, capacity, inter, j0, act);
  }
}

template <int NT>
__device__ __forceinline__ void ffn_dn_tile(const ffn_rows_t &r, const char *next_pf, int n, int slot, int e,
                                            int capacity, int hidden, int inter, int h0, const __nv_bfloat16 *act,
                                            __nv_bfloat16 *y, bool *need_wait) {
  for (int r0 = 0; r0 < n; r0 += 8 * NT) {
    float acc[NT][4];
    ffn_tile_pass<NT>(r, 0, ffn_nch(inter / 8), r0 + 8 * NT >= n ? next_pf : NULL, (long)inter * 2,
                      (long)inter * 2, (const uint4 *)(act + ((long)slot * capacity + r0) * inter), inter / 8,
                      n - r0, inter / 8, need_wait, acc);
    ffn_dn_store<NT>(acc, r0, n, e, capacity, hidden, h0, y);
  }
}

// gate_up's hand-over to down: this lane's prefetch pointer at the first unit that the same
// (block, warp) takes in the down kernel of down_grid blocks (NULL: none), and the bytes
// from there to that row's end. Used only when FFN_PF > 0 (ffn_tile_pass's prefetch).
__device__ __forceinline__ const char *ffn_down_first_pf(int na, const int *active, int down_grid, int hidden,
                                                         int inter, const __nv_bfloat16 *w_down, long *bytes) {
  *bytes = 0;
  if ((int)blockIdx.x >= down_grid) return NULL;
  const int dn_per_slot = (hidden + 15) / 16;
  const ffn_work_t dw =
      ffn_work((long)na * dn_per_slot, down_grid, blockIdx.x, threadIdx.x / 32, ffn_nch(inter / 8));
  if (dw.tile >= dw.end) return NULL;
  *bytes = (long)inter * 2 - (long)dw.ch0 * CHUNK_BYTES;
  return ffn_dn_rows(w_down, active[dw.tile / dn_per_slot], 16 * (int)(dw.tile % dn_per_slot), inter, hidden).pf +
         (long)dw.ch0 * CHUNK_BYTES;
}

// The most rows of the slots that the block's tiles [begin, end) touch: the split path's
// pass count, the same for every warp of the block (they meet at barriers each pass).
__device__ __forceinline__ int ffn_block_rows(const ffn_work_t &w, int per_slot, const int *rows) {
  int nmax = 0;
  for (int s = w.begin / per_slot; s <= (w.end - 1) / per_slot; s++) nmax = rows[s] > nmax ? rows[s] : nmax;
  return nmax;
}

// Split path (S > 1): each pass, every warp stores its part's partial tile in part[warp];
// the part-0 warp of each tile adds parts 1 .. S-1 to its own in that order (fp32; fixed
// order, deterministic) and stores the outputs. Returns the tile's summed accumulators in
// acc (valid in the part-0 warp only).
__device__ __forceinline__ void ffn_split_sum(const ffn_work_t &w, float (*part)[32][4], float acc[1][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < 4; i++) part[warp][lane][i] = acc[0][i];
  __syncthreads();
  if (w.part == 0)
    for (int p = 1; p < w.S; p++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[0][i] += part[warp + p][lane][i];
}

#if !FFN_BULK
// act[slot, r, j] = bf16(silu(bf16(x_e[r] . Wgu_e[j])) * bf16(x_e[r] . Wgu_e[I + j])) for the
// slot-th non-empty expert e and its rows r < min(count, capacity). Launched after dispatch
// (programmatic dependent launch where the device has it: waits before reading the counts)
// and lets the down kernel launch early. A warp's last tile prefetches into L2 the start of
// the down tile that warp (block, warp) will take in the down kernel of down_grid blocks
// (the same split, computed here), so HBM keeps streaming across the kernel boundary
// while down's blocks launch and read the counts.
extern "C" __global__ void __launch_bounds__(FFN_THREADS, 1)
    sl_moe_ffn_gemv_gate_up(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                            int inter, const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_gate_up,
                            __nv_bfloat16 *__restrict__ act, const __nv_bfloat16 *__restrict__ w_down, int down_grid) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  sl_moe_pdl_wait();
  sl_moe_pdl_trigger();
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int per_slot = inter / 8;
  const int nch = ffn_nch(hidden / 8);
  ffn_work_t w = ffn_work((long)na * per_slot, gridDim.x, blockIdx.x, threadIdx.x / 32, nch);
#if !FFN_SPLIT
  for (long t = w.tile; t < w.end; t += FFN_WARPS) {
    const int slot = (int)(t / per_slot), j0 = 8 * (int)(t % per_slot), e = active[slot], n = rows[slot];
    const ffn_rows_t r = ffn_gu_rows(w_gate_up, e, j0, inter, hidden);
    const char *next_pf;
    long next_row_bytes = (long)hidden * 2;
    if (t + FFN_WARPS < w.end) {
      const long tn = t + FFN_WARPS;
      next_pf = ffn_gu_rows(w_gate_up, active[tn / per_slot], 8 * (int)(tn % per_slot), inter, hidden).pf;
    } else {
      next_pf = ffn_down_first_pf(na, active, down_grid, hidden, inter, w_down, &next_row_bytes);
    }
    const __nv_bfloat16 *xe = x + (long)e * capacity * hidden;
    FFN_PASS_DISPATCH(n, (ffn_gu_tile<NT>(r, next_pf, next_row_bytes, n, slot, capacity, hidden, inter, j0, xe, act)));
  }
#else
  // Rounds of one unit per warp (the same count in every warp, so S > 1 can meet at
  // barriers; S = 1 has no barrier and the rounds are just the wide kernel's tile stride).
  __shared__ float part[FFN_WARPS][32][4];
  const int units = (w.end - w.begin) * w.S;
  const int nmax = w.S > 1 ? ffn_block_rows(w, per_slot, rows) : 0;
  for (int u = threadIdx.x / 32; u - (int)(threadIdx.x / 32) < units; u += FFN_WARPS) {
    ffn_work_unit(&w, u, nch);
    const bool has = u < units;
    const int slot = has ? (int)(w.tile / per_slot) : 0, j0 = has ? 8 * (int)(w.tile % per_slot) : 0;
    const int e = active[slot], n = has ? rows[slot] : 0;
    const ffn_rows_t r = ffn_gu_rows(w_gate_up, e, j0, inter, hidden);
    // Next unit of this warp (the same part, ch0, of tile begin + (u + warps) / S), else
    // down's first unit.
    const char *next_pf;
    long next_row_bytes = (long)hidden * 2 - (long)w.ch0 * CHUNK_BYTES;
    if (u + FFN_WARPS < units) {
      const int tn = w.begin + (u + FFN_WARPS) / w.S;
      next_pf = ffn_gu_rows(w_gate_up, active[tn / per_slot], 8 * (int)(tn % per_slot), inter, hidden).pf +
                (long)w.ch0 * CHUNK_BYTES;
    } else {
      next_pf = ffn_down_first_pf(na, active, down_grid, hidden, inter, w_down, &next_row_bytes);
    }
    const __nv_bfloat16 *xe = x + (long)e * capacity * hidden;
    bool no_wait = false;
    const int passes = w.S > 1 ? nmax : n;
    for (int r0 = 0; r0 < passes; r0 += 8) {
      float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
      if (r0 < n)
        ffn_tile_pass<1>(r, w.ch0, w.ch1, r0 + 8 >= n ? next_pf : NULL, next_row_bytes, (long)hidden * 2,
                         (const uint4 *)(xe + (long)r0 * hidden), hidden / 8, n - r0, hidden / 8, &no_wait, acc);
      if (w.S > 1) ffn_split_sum(w, part, acc);
      if (w.part == 0 && r0 < n) ffn_gu_store<1>(acc, r0, n, slot, capacity, inter, j0, act);
      if (w.S > 1) __syncthreads(); // part is rewritten by the next pass
    }
  }
#endif
}

// y_e[r, h] = bf16(act[slot, r] . Wd_e[h]) for the slot-th non-empty expert e, rows r <
// min(count, capacity). Launched as a programmatic dependent of the gate_up kernel: the
// counts (written before gate_up started) and the first tile's weights are read, and its
// L2 prefetch issued, before griddepcontrol.wait; every thread executes the wait before it
// exits, so this kernel's completion implies gate_up's.
extern "C" __global__ void __launch_bounds__(FFN_THREADS, 1)
    sl_moe_ffn_gemv_down(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                         int inter, const __nv_bfloat16 *act, const __nv_bfloat16 *__restrict__ w_down,
                         __nv_bfloat16 *__restrict__ y) {
  __shared__ int active[SL_MOE_FFN_GEMV_MAX_LOCAL], rows[SL_MOE_FFN_GEMV_MAX_LOCAL];
  int na = gemv_active_experts(counts, num_local, capacity, active, rows);
  if (na > slots) na = slots;
  const int per_slot = (hidden + 15) / 16;
  const int nch = ffn_nch(inter / 8);
  ffn_work_t w = ffn_work((long)na * per_slot, gridDim.x, blockIdx.x, threadIdx.x / 32, nch);
  bool need_wait = true;
#if !FFN_SPLIT
  for (long t = w.tile; t < w.end; t += FFN_WARPS) {
    const int slot = (int)(t / per_slot), h0 = 16 * (int)(t % per_slot), e = active[slot], n = rows[slot];
    const ffn_rows_t r = ffn_dn_rows(w_down, e, h0, inter, hidden);
    const char *next_pf = NULL;
    if (t + FFN_WARPS < w.end) {
      const long tn = t + FFN_WARPS;
      next_pf = ffn_dn_rows(w_down, active[tn / per_slot], 16 * (int)(tn % per_slot), inter, hidden).pf;
    }
    FFN_PASS_DISPATCH(n, (ffn_dn_tile<NT>(r, next_pf, n, slot, e, capacity, hidden, inter, h0, act, y, &need_wait)));
  }
#else
  __shared__ float part[FFN_WARPS][32][4];
  const int units = (w.end - w.begin) * w.S;
  const int nmax = w.S > 1 ? ffn_block_rows(w, per_slot, rows) : 0;
  for (int u = threadIdx.x / 32; u - (int)(threadIdx.x / 32) < units; u += FFN_WARPS) {
    ffn_work_unit(&w, u, nch);
    const bool has = u < units;
    const int slot = has ? (int)(w.tile / per_slot) : 0, h0 = has ? 16 * (int)(w.tile % per_slot) : 0;
    const int e = active[slot], n = has ? rows[slot] : 0;
    const ffn_rows_t r = ffn_dn_rows(w_down, e, h0, inter, hidden);
    const char *next_pf = NULL; // the same part of tile begin + (u + warps) / S
    if (u + FFN_WARPS < units) {
      const int tn = w.begin + (u + FFN_WARPS) / w.S;
      next_pf = ffn_dn_rows(w_down, active[tn / per_slot], 16 * (int)(tn % per_slot), inter, hidden).pf +
                (long)w.ch0 * CHUNK_BYTES;
    }
    const int passes = w.S > 1 ? nmax : n;
    for (int r0 = 0; r0 < passes; r0 += 8) {
      float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
      if (r0 < n)
        ffn_tile_pass<1>(r, w.ch0, w.ch1, r0 + 8 >= n ? next_pf : NULL, (long)inter * 2 - (long)w.ch0 * CHUNK_BYTES,
                         (long)inter * 2,
                         (const uint4 *)(act + ((long)slot * capacity + r0) * inter), inter / 8, n - r0, inter / 8,
                         &need_wait, acc);
      if (w.S > 1) ffn_split_sum(w, part, acc);
      if (w.part == 0 && r0 < n) ffn_dn_store<1>(acc, r0, n, e, capacity, hidden, h0, y);
      if (w.S > 1) __syncthreads(); // part is rewritten by the next pass
    }
  }
#endif
  if (need_wait) sl_moe_pdl_wait();
}

#else // FFN_BULK
// ---- Bulk variant: weights staged in shared memory by the bulk-copy engine ----------------
//
// Protocol (one block per SM; ring of g.stages stages, kernels/moe_ffn_gemv.h for the
// geometry). The block's tiles [begin, end) (sl_moe_ffn_work, one contiguous balanced
// range per block), each in passes of up to SL_MOE_FFN_BULK_ROWS token rows, each pass in
// g.nch K chunks: the i-th (tile, pass, chunk) of that walk is "use i" of stage i % stages.
//  - full[s] (count 1): lane 0 of the producer warp arrives with expect_tx(16 x chunk bytes)
//    for use i, then lanes 0..15 each issue one cp.async.bulk of their weight row's chunk
//    into row `lane` of the stage, completing its bytes on full[s]. The phase of use i
//    completes when the arrival and all the bytes are in: consumers wait for parity
//    (i / stages) & 1, which also makes the async-proxy writes visible to them.
//  - empty[s] (count SL_MOE_FFN_BULK_CONSUMERS): every consumer warp, after its last shared
//    read of use i (__syncwarp, then lane 0 arrives, release semantics), releases the stage;
//    the producer waits for parity ((i / stages) & 1) ^ 1 before refilling stage s for use i
//    (on a fresh barrier parity 1 counts as completed: the first round does not wait).
//  - Consumer warp w multiplies k-steps w, w + 8, ... of each chunk (lane (g, c): 16 bytes
//    of rows g and g + 8 at 64 ks + 16 c, the same k permutation as the streaming kernels,
//    zero past the row end) with the expert's token rows (global, via L1), in rounds whose
//    loads all issue before the first mma (BULK_PASS); at the end of a
//    pass the 8 partial tiles meet in shared memory (named barriers 1 and 2, consumers
//    only: the producer keeps copying) and warp (pass index % 8) adds them in warp order
//    and stores, rounding exactly as the other variants.
//  - Every wait is bounded: after timeout_ns (%globaltimer) the waiting warp records
//    SL_DEV_ERR_PIPE_TIMEOUT (block, use, 0 full / 1 empty) in *err (no record: __trap) and
//    sets the block's abort flag; from then on every wait returns at once, nothing is
//    computed or stored, and the consumers still meet at every named barrier (same walk in
//    every warp), so the block always finishes.
#define BULK_CONSUMERS SL_MOE_FFN_BULK_CONSUMERS
#define BULK_BAR_PART_FREE 1 // named barriers of the consumer warps (0 is __syncthreads)
#define BULK_BAR_PART_FULL 2
// One tile pass: 1 n-tile (<= 8 rows) with 4 k-steps per round (a 2 KB chunk is 32 k-steps,
// 4 per warp: one round), or 2 n-tiles with 2 per round (register cap of 2 blocks per SM).
#define BULK_PASS(nrows, ...)                                                                                       \
  do {                                                                                                               \
    if ((nrows) <= 8)                                                                                                \
      bulk_consume_pass<1, 4>(__VA_ARGS__);                                                                          \
    else                                                                                                             \
      bulk_consume_pass<2, 2>(__VA_ARGS__);                                                                          \
  } while (0)

__device__ __forceinline__ void bulk_named_sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(BULK_CONSUMERS * 32) : "memory");
}

typedef struct {
  volatile int *abort;
  sl_dev_error_t *err;
  unsigned long long timeout_ns;
} bulk_guard_t;

// Wait for the phase of `parity` of `bar` to complete; false on timeout or abort.
__device__ __forceinline__ bool bulk_wait(unsigned bar, unsigned parity, const bulk_guard_t &gd, int use, int which) {
  if (*gd.abort) return false;
  if (sl_bulk_try_wait(bar, parity)) return true;
  const unsigned long long start = sl_grid_globaltimer_ns();
  while (!sl_bulk_try_wait(bar, parity)) {
    if (*gd.abort) return false;
    if (sl_grid_globaltimer_ns() - start > gd.timeout_ns) {
      *gd.abort = 1;
      if (!gd.err) __trap();
      sl_dev_error_record(gd.err, SL_DEV_ERR_PIPE_TIMEOUT, (int)blockIdx.x, use, which);
      return false;
    }
  }
  return true;
}

// The walk both roles follow: tiles [begin, end), passes of SL_MOE_FFN_BULK_ROWS rows.
typedef struct {
  int begin, end, per_slot;
} bulk_walk_t;

// Producer warp: fills the ring along the walk. row_ptr(slot, t0, r) gives weight row r
// (0..15) of the tile at index t0 within its slot (gate_up: rows j0 + r / I + j0 + r - 8;
// down: column h0 + r, clamped to H - 1).
template <typename RowPtr>
__device__ __forceinline__ void bulk_produce(const bulk_walk_t &wk, const int *active, const int *rows,
                                             const sl_moe_ffn_bulk_geom_t &g, char *ring, unsigned long long bars,
                                             const bulk_guard_t &gd, RowPtr row_ptr) {
  const int lane = threadIdx.x & 31;
  const unsigned ring_addr = sl_bulk_smem_addr(ring), full0 = (unsigned)bars, empty0 = full0 + 8u * g.stages;
  int s = 0, use = 0;
  unsigned phase = 0;
  for (int t = wk.begin; t < wk.end; t++) {
    const int slot = t / wk.per_slot, t0 = t % wk.per_slot, n = rows[slot];
    const char *src = lane < 16 ? row_ptr(active[slot], t0, lane) : NULL;
    for (int r0 = 0; r0 < n; r0 += SL_MOE_FFN_BULK_ROWS)
      for (int ch = 0; ch < g.nch; ch++) {
        // Every lane waits (each acquires the consumers' release before its own copy); the
        // verdict is made warp-uniform so no lane continues alone.
        if (!__all_sync(0xffffffffu, bulk_wait(empty0 + 8u * s, phase ^ 1u, gd, use, 1))) return;
        const int bytes = sl_moe_ffn_bulk_chunk(&g, ch);
        if (lane == 0) sl_bulk_arrive_expect_tx(full0 + 8u * s, 16u * (unsigned)bytes);
        __syncwarp();
        if (lane < 16)
          sl_bulk_copy(ring_addr + (unsigned)sl_moe_ffn_bulk_offset(&g, s, lane, 0, 0), src + (long)ch * g.chunk_bytes,
                    (unsigned)bytes, full0 + 8u * s);
        use++;
        if (++s == g.stages) {
          s = 0;
          phase ^= 1u;
        }
      }
  }
}

// Consumer warps: one tile pass (rows r0 .. min(n, r0 + 16)) over all chunks; acc gets this
// warp's partial sums (its k-steps only). in: the pass's first token row, V = K / 8
// vectors per row (the row stride of `in` too).
template <int NT, int U>
__device__ __forceinline__ void bulk_consume_pass(const sl_moe_ffn_bulk_geom_t &g, const char *ring,
                                                  unsigned long long bars, const bulk_guard_t &gd, int *s, int *use,
                                                  unsigned *phase, const uint4 *in, int nrows, int V, float acc[2][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gq = lane >> 2, c = lane & 3;
  const unsigned full0 = (unsigned)bars, empty0 = full0 + 8u * g.stages;
#pragma unroll
  for (int t = 0; t < 2; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int ch = 0; ch < g.nch; ch++) {
    // Warp-uniform verdict: mma.sync needs all 32 lanes (a timeout seen by one lane only
    // would otherwise split the warp).
    if (__all_sync(0xffffffffu, bulk_wait(full0 + 8u * *s, *phase, gd, *use, 0))) {
      const int nks = (sl_moe_ffn_bulk_chunk(&g, ch) + 63) / 64, v0 = ch * (g.chunk_bytes / 16);
      const char *lo = ring + sl_moe_ffn_bulk_offset(&g, *s, gq, 0, c);
      const char *hi = ring + sl_moe_ffn_bulk_offset(&g, *s, gq + 8, 0, c);
      // Up to U k-steps per round, all their loads issued before the first mma (one
      // shared + one L1/L2 round trip per round, not per k-step). No branch around a load:
      // addresses are clamped into the stage / the token rows and the values past the row
      // end, past the chunk's k-steps or past the token rows are replaced by zeros.
      for (int ks0 = warp; ks0 < nks; ks0 += U * BULK_CONSUMERS) {
        uint4 a[U], b[U], xv[NT][U];
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int ks = ks0 + u * BULK_CONSUMERS, v = v0 + 4 * ks + c; // this lane's 8 elements
          const bool ok = ks < nks && v < V;
          const int kc = ks < nks ? ks : ks0;
          a[u] = *(const uint4 *)(lo + 64 * kc);
          b[u] = *(const uint4 *)(hi + 64 * kc);
          const long vx = ok ? v : 0; // vector 0 of a clamped row: always inside x
#pragma unroll
          for (int t = 0; t < NT; t++) {
            const int row = t * 8 + gq;
            xv[t][u] = in[(long)(row < nrows ? row : nrows - 1) * V + vx];
            if (!ok || row >= nrows) xv[t][u] = make_uint4(0u, 0u, 0u, 0u);
          }
          if (!ok) a[u] = b[u] = make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
          for (int t = 0; t < NT; t++) {
            ffn_mma(acc[t], a[u].x, b[u].x, a[u].y, b[u].y, xv[t][u].x, xv[t][u].y);
            ffn_mma(acc[t], a[u].z, b[u].z, a[u].w, b[u].w, xv[t][u].z, xv[t][u].w);
          }
      }
    }
    __syncwarp();
    if (lane == 0) sl_bulk_arrive(empty0 + 8u * *s);
    (*use)++;
    if (++*s == g.stages) {
      *s = 0;
      *phase ^= 1u;
    }
  }
}

// End of a tile pass: the consumer warps' partial tiles summed in warp order (fp32) into
// the accumulators of warp `owner`; true in that warp (which then stores).
__device__ __forceinline__ bool bulk_reduce(float (*part)[32][8], int owner, float acc[2][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  bulk_named_sync(BULK_BAR_PART_FREE); // the previous pass's owner has read `part`
#pragma unroll
  for (int i = 0; i < 8; i++) part[warp][lane][i] = acc[i / 4][i % 4];
  bulk_named_sync(BULK_BAR_PART_FULL);
  if (warp != owner) return false;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    float sum = part[0][lane][i];
    for (int w = 1; w < BULK_CONSUMERS; w++) sum += part[w][lane][i];
    acc[i / 4][i % 4] = sum;
  }
  return true;
}

// Kernel set-up shared by both: the ring, barriers, tables in dynamic shared memory; the
// non-empty experts; the block's tile range. Called by all threads.
typedef struct {
  sl_moe_ffn_bulk_geom_t g;
  char *ring;
  unsigned long long bars; // shared address of full[0] (as an integer)
  float (*part)[32][8];
  int *active, *rows;
  bulk_walk_t wk;
} bulk_block_t;

__device__ __forceinline__ bulk_block_t bulk_setup(char *smem, int k, const int *counts, int num_local, int slots,
                                                   int capacity, int per_slot) {
  bulk_block_t b;
  b.g = sl_moe_ffn_bulk_geom(k, num_local);
  b.ring = smem;
  b.bars = sl_bulk_smem_addr(smem + b.g.bar_offset);
  b.part = (float(*)[32][8])(smem + b.g.part_offset);
  b.active = (int *)(smem + b.g.table_offset);
  b.rows = b.active + num_local;
  if (threadIdx.x == 0) {
    for (int s = 0; s < b.g.stages; s++) {
      sl_bulk_mbar_init((unsigned)b.bars + 8u * s, 1u);
      sl_bulk_mbar_init((unsigned)b.bars + 8u * (b.g.stages + s), BULK_CONSUMERS);
    }
    sl_bulk_mbar_init_fence();
  }
  int na = gemv_active_experts(counts, num_local, capacity, b.active, b.rows); // __syncthreads inside
  if (na > slots) na = slots;
  const sl_moe_ffn_work_t w = sl_moe_ffn_work((long)na * per_slot, gridDim.x, blockIdx.x, 0, 1, BULK_CONSUMERS, 0);
  b.wk.begin = w.begin;
  b.wk.end = w.end;
  b.wk.per_slot = per_slot;
  return b;
}

// act[slot, r, j] = bf16(silu(bf16(x_e[r] . Wgu_e[j])) * bf16(x_e[r] . Wgu_e[I + j])), as the
// other variants; launched after dispatch (programmatic dependent launch: waits before
// reading the counts, then lets down launch: down's blocks fit next to this kernel's, so
// down's producer starts streaming its weights while this kernel drains).
extern "C" __global__ void __launch_bounds__(FFN_THREADS, 2)
    sl_moe_ffn_gemv_gate_up(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                            int inter, const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_gate_up,
                            __nv_bfloat16 *__restrict__ act, sl_dev_error_t *err, unsigned long long timeout_ns) {
  extern __shared__ __align__(128) char bulk_smem[];
  __shared__ int abort_flag;
  sl_moe_pdl_wait();
  sl_moe_pdl_trigger();
  if (threadIdx.x == 0) abort_flag = 0;
  const int per_slot = inter / 8;
  const bulk_block_t b = bulk_setup(bulk_smem, hidden, counts, num_local, slots, capacity, per_slot);
  const bulk_guard_t gd = {&abort_flag, err, timeout_ns};
  const int warp = threadIdx.x / 32;
  if (warp == BULK_CONSUMERS) {
    const long expert_elems = (long)2 * inter * hidden;
    bulk_produce(b.wk, b.active, b.rows, b.g, b.ring, b.bars, gd, [&](int e, int t0, int r) {
      const int j = 8 * t0 + (r & 7) + (r < 8 ? 0 : inter);
      return (const char *)(w_gate_up + e * expert_elems + (long)j * hidden);
    });
    return;
  }
  int s = 0, use = 0, pass = 0;
  unsigned phase = 0;
  for (int t = b.wk.begin; t < b.wk.end; t++) {
    const int slot = t / per_slot, j0 = 8 * (t % per_slot), e = b.active[slot], n = b.rows[slot];
    const __nv_bfloat16 *xe = x + (long)e * capacity * hidden;
    for (int r0 = 0; r0 < n; r0 += SL_MOE_FFN_BULK_ROWS, pass++) {
      float acc[2][4];
      BULK_PASS(n - r0, b.g, b.ring, b.bars, gd, &s, &use, &phase, (const uint4 *)(xe + (long)r0 * hidden), n - r0,
                hidden / 8, acc);
      if (bulk_reduce(b.part, pass % BULK_CONSUMERS, acc) && !abort_flag)
        ffn_gu_store<2>(acc, r0, n, slot, capacity, inter, j0, act);
    }
  }
}

// y_e[r, h] = bf16(act[slot, r] . Wd_e[h]), as the other variants. Programmatic dependent
// of gate_up: the producer streams down's weights from the start; the consumers wait
// (griddepcontrol.wait) before reading the activations; every thread executes the wait
// before it exits, so this kernel's completion implies gate_up's.
extern "C" __global__ void __launch_bounds__(FFN_THREADS, 2)
    sl_moe_ffn_gemv_down(const int *__restrict__ counts, int num_local, int slots, int capacity, int hidden,
                         int inter, const __nv_bfloat16 *act, const __nv_bfloat16 *__restrict__ w_down,
                         __nv_bfloat16 *__restrict__ y, sl_dev_error_t *err, unsigned long long timeout_ns) {
  extern __shared__ __align__(128) char bulk_smem[];
  __shared__ int abort_flag;
  if (threadIdx.x == 0) abort_flag = 0;
  const int per_slot = (hidden + 15) / 16;
  const bulk_block_t b = bulk_setup(bulk_smem, inter, counts, num_local, slots, capacity, per_slot);
  const bulk_guard_t gd = {&abort_flag, err, timeout_ns};
  const int warp = threadIdx.x / 32;
  if (warp == BULK_CONSUMERS) {
    const long expert_elems = (long)hidden * inter;
    bulk_produce(b.wk, b.active, b.rows, b.g, b.ring, b.bars, gd, [&](int e, int t0, int r) {
      const int h = 16 * t0 + r < hidden ? 16 * t0 + r : hidden - 1; // rows past H: results dropped
      return (const char *)(w_down + e * expert_elems + (long)h * inter);
    });
    sl_moe_pdl_wait();
    return;
  }
  sl_moe_pdl_wait(); // the activations come from gate_up
  int s = 0, use = 0, pass = 0;
  unsigned phase = 0;
  for (int t = b.wk.begin; t < b.wk.end; t++) {
    const int slot = t / per_slot, h0 = 16 * (t % per_slot), e = b.active[slot], n = b.rows[slot];
    for (int r0 = 0; r0 < n; r0 += SL_MOE_FFN_BULK_ROWS, pass++) {
      float acc[2][4];
      BULK_PASS(n - r0, b.g, b.ring, b.bars, gd, &s, &use, &phase,
                (const uint4 *)(act + ((long)slot * capacity + r0) * inter), n - r0, inter / 8, acc);
      if (bulk_reduce(b.part, pass % BULK_CONSUMERS, acc) && !abort_flag)
        ffn_dn_store<2>(acc, r0, n, e, capacity, hidden, h0, y);
    }
  }
}
#endif // FFN_BULK

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
