// MoE dispatch kernels: deterministic slot ranking (pair order t*K+k within an expert),
// then 16-byte copies of each token into the rows of its K experts.
//   sl_moe_dispatch_replicated  decode: each block ranks its own pairs from all ids in shared memory
//                               (MOE_ROUTE = 1: it first computes the top-k from router logits)
//   sl_moe_dispatch_fused  decode: route, grid barrier, copy in one cooperative launch
//   sl_moe_dispatch_route  prefill: rank pairs per block; the last block scans the counts
//   sl_moe_dispatch_copy   prefill: copy over many blocks
//   sl_moe_dispatch_copy_staged / _direct  prefill: the quantized payloads' copies (x staged in shared memory /
//                          through registers)
// With MOE_PAYLOAD >= 0 the copy quantizes each token once (kernels/quant_formats.h) and
// stores codes + per-expert scales instead of bf16.
#include <cuda_bf16.h>

#include "kernels/grid_barrier.cuh"
#include "kernels/moe_layout.h"
#include "kernels/quant_formats.h"
#include "kernels/quant_dev.cuh"
#include "kernels/moe_pdl.cuh"
#include "kernels/vec.cuh"
#if MOE_ROUTE
#include "kernels/router_topk.cuh"
#endif

#ifndef MOE_HIDDEN
#error "MOE_HIDDEN (hidden size, a multiple of 8) must be defined by the JIT"
#endif
#ifndef MOE_TOPK
#error "MOE_TOPK (experts per token) must be defined by the JIT"
#endif
#ifndef MOE_LOCAL
#error "MOE_LOCAL (experts in this rank's range) must be defined by the JIT"
#endif
#ifndef MOE_UNROLL
#error "MOE_UNROLL (16-byte vectors per lane per work item) must be defined by the JIT"
#endif
#ifndef MOE_KERNEL
#error "MOE_KERNEL (0: fused, 1: route, 2: copy, 3: replicated; only that kernel is compiled) must be defined by the JIT"
#endif
#ifndef MOE_PAYLOAD
#error "MOE_PAYLOAD (-1: bf16 copy, else an SL_QFMT_* format) must be defined by the JIT"
#endif
#ifndef MOE_QRULE
#error "MOE_QRULE (an SL_QRULE_* scale rule) must be defined by the JIT"
#endif
// MOE_ROUTE (optional, 0 if absent): 1 = the replicated kernel takes the router logits instead
// of the ids and runs the router's warp routine itself (kernels/router_topk.cuh, which then
// needs the router's constants KIND, NUM_EXPERTS, TOPK = MOE_TOPK, NUM_GROUPS, TOPK_GROUPS,
// DTYPE); bf16 payload, T <= SL_MOE_TOPK_FUSED_MAX_TOKENS.
#ifndef MOE_ROUTE
#define MOE_ROUTE 0
#endif
// MOE_REPL_BAL (optional, 0 if absent): the replicated kernel (MOE_KERNEL 3) as the balanced
// variant with this many threads per block (256 or 512); histogram ranking, no MOE_ROUTE.
#ifndef MOE_REPL_BAL
#define MOE_REPL_BAL 0
#endif
#if MOE_ROUTE
#if MOE_KERNEL != 3 || MOE_PAYLOAD >= 0
#error "MOE_ROUTE: replicated kernel (MOE_KERNEL 3), bf16 payload only"
#endif
#if !defined(KIND) || !defined(NUM_EXPERTS) || !defined(TOPK) || !defined(NUM_GROUPS) || !defined(TOPK_GROUPS) || \
    !defined(DTYPE)
#error "MOE_ROUTE needs the router's KIND, NUM_EXPERTS, TOPK, NUM_GROUPS, TOPK_GROUPS and DTYPE"
#endif
#if TOPK != MOE_TOPK
#error "MOE_ROUTE: TOPK must equal MOE_TOPK"
#endif
#endif
#if MOE_HIDDEN % 8 != 0 || MOE_TOPK < 1 || MOE_TOPK > SL_MOE_MAX_TOPK || MOE_LOCAL < 1 || \
    MOE_LOCAL > SL_MOE_MAX_LOCAL_EXPERTS
#error "MoE dispatch constants out of range"
#endif

#define MOE_CHUNK (32 * SL_MOE_VEC_ELEMS * MOE_UNROLL)
#define MOE_CHUNKS ((MOE_HIDDEN + MOE_CHUNK - 1) / MOE_CHUNK)

#if MOE_PAYLOAD >= 0
#define MOE_QBLOCK (MOE_PAYLOAD == SL_QFMT_FP8_GROUP ? 128 : MOE_PAYLOAD == SL_QFMT_NVFP4 ? 16 : 32)
#define MOE_QFP4 (MOE_PAYLOAD == SL_QFMT_MXFP4 || MOE_PAYLOAD == SL_QFMT_NVFP4)
#define MOE_ROW_BYTES (MOE_QFP4 ? MOE_HIDDEN / 2 : MOE_HIDDEN)
#define MOE_QLANES (MOE_QBLOCK / SL_MOE_VEC_ELEMS) // lanes holding one scale block
#if MOE_HIDDEN % MOE_QBLOCK != 0
#error "MOE_HIDDEN must be a multiple of the payload's scale block"
#endif

// One lane's 8 elements quantized within their block: the kernel library's quantizer
// (kernels/quant_dev.cuh, the same code as sl_quantize's kernels, bit-identical to the CPU
// reference): the block absmax and its "not finite" flag from the packed bf16 words (sign mask,
// max.u16x2, a butterfly over the block's lanes), then the fast exact rules -- the hardware E4M3
// conversion, the division by a reciprocal with its exactness check, the packed E2M1 encoder.
// Session 17: the reference-shaped per-element encode (an IEEE division and a software E4M3/E2M1
// conversion per element) made the quantized decode dispatch issue-bound (DeepSeek-V3 T=128:
// 5.1-5.8 us writing a half to a quarter of the bf16 bytes, bf16 5.4). Packed codes (8 E4M3
// bytes, or 8 E2M1 nibbles with element 2i low) and the block's scale; a non-finite block gets
// the format's NaN scale and codes.
struct QuantVec {
  uint2 codes; // FP4 uses .x only
  float scale_f32;
  unsigned char scale_u8;
  bool finite;
};

__device__ __forceinline__ QuantVec quantize_vec(const uint4 &v, float global_scale) {
  static_assert(SL_MOE_VEC_ELEMS == 8, "one 16-byte packet of bf16 per lane");
  float f[SL_MOE_VEC_ELEMS];
  sl_kq_unpack<SL_DTYPE_BF16>(v, f);
  float absmax;
  int bad;
  sl_kq_block_absmax16<SL_DTYPE_BF16, MOE_QLANES>(v, absmax, bad);
  QuantVec q;
  const unsigned long long w = sl_kq_quantize_fast<MOE_PAYLOAD, MOE_QRULE, SL_MOE_VEC_ELEMS, SL_DTYPE_BF16, true>(
      f, absmax, bad, global_scale, q.scale_f32, q.scale_u8, v);
  q.codes = make_uint2((unsigned)w, (unsigned)(w >> 32));
  q.finite = !bad;
  return q;
}

// Lane vector `vec` of an item quantized into a row buffer laid out as the destination row: codes, then the
// item's scales at byte code_bytes (the staged and direct copies). bad_block takes the lane's first non-finite
// block (its index in the row; col0: the item's first column).
__device__ __forceinline__ void quantize_into_row(const uint4 &v, int vec, int col0, int code_bytes,
                                                  float global_scale, unsigned char *buf, int &bad_block) {
  const QuantVec q = quantize_vec(v, global_scale);
  if (!q.finite && bad_block < 0) bad_block = (col0 + vec * SL_MOE_VEC_ELEMS) / MOE_QBLOCK;
#if MOE_QFP4
  reinterpret_cast<unsigned *>(buf)[vec] = q.codes.x;
#else
  reinterpret_cast<uint2 *>(buf)[vec] = q.codes;
#endif
  if (threadIdx.x % 32 % MOE_QLANES == 0) {
    const int blk = vec * SL_MOE_VEC_ELEMS / MOE_QBLOCK;
    if (MOE_PAYLOAD == SL_QFMT_FP8_GROUP)
      reinterpret_cast<float *>(buf + code_bytes)[blk] = q.scale_f32;
    else
      buf[code_bytes + blk] = q.scale_u8;
  }
}
#endif

__device__ __forceinline__ unsigned sl_moe_atom_add_acq_rel_u32(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Bits of a local expert id: MOE_LOCAL experts, 0 .. MOE_LOCAL - 1.
constexpr int sl_moe_id_bits(int n) { return n <= 1 ? 0 : 1 + sl_moe_id_bits((n + 1) / 2); }

// The lanes of the warp holding the same local expert as this lane, for e >= 0 (lanes with e < 0 are in no
// lane's group): one ballot for e >= 0, then one per bit of e, each keeping the lanes that agree on that bit.
// Why not __match_any_sync: ncu of the routing kernel (H200, session 26 call 1, DeepSeek-V3 T=16384) put 28 % of
// its warps' stall samples on the instructions waiting for the match's result. A/B (call 2, by events, ballots /
// match): Qwen3 T=16384 fp8-g128 99.6 / 100.1-100.3 us, mxfp4 66.5-66.6 / 66.9-67.1, nvfp4 70.2-70.3 /
// 70.6-71.1; the fused path at T=512 (Qwen3 FP8 rows) 692-700 / 668-670 GB/s; DeepSeek-V3 T=16384 equal.
__device__ __forceinline__ unsigned warp_peers(int e) {
  unsigned peers = __ballot_sync(0xffffffffu, e >= 0);
#pragma unroll
  for (int b = 0; b < sl_moe_id_bits(MOE_LOCAL); b++) {
    const bool bit = (e >> b) & 1;
    const unsigned set = __ballot_sync(0xffffffffu, bit);
    peers &= bit ? set : ~set;
  }
  return peers;
}

// Rank the pairs [route_block * THREADS * ROUNDS, +THREADS * ROUNDS) within their expert, in pair order.
// Deterministic: no order of atomics decides a rank. Writes pair_rank[p] and counts[route_block][e].
// Warp w takes the block's pairs [w * 32 * ROUNDS, (w + 1) * 32 * ROUNDS), round r lane l pair w * 32 * ROUNDS +
// r * 32 + l: lanes holding the same expert find each other (warp_peers; rank = lower lanes of the
// group) and the warp's own counters in shared memory (warp_counts[w][e]) carry its rounds -- no block barrier
// between rounds. Then one exclusive scan over the warps per expert turns warp_counts[w][e] into warp w's base.
// Why (session 25): the round-major ranking before it (each round: lanes matched, group sizes published per warp,
// every warp adding the earlier warps' -- three block barriers per round, 12 at DeepSeek-V3's 4 rounds) was on
// the copy's critical path: the routing (11.3 us alone at DeepSeek-V3 T=16384) is what the copy waits for.
// H200, bench/results/2026-12-01-s25-h200-call5 (A/B on one machine, two rounds, T=16384 by events, warp / round-
// major): Qwen3 bf16 171.3-171.6 / 172.9-173.0 us, fp8-g128 100.2-100.3 / 101.4-101.6, mxfp4 66.7-67.2 / 68.4,
// nvfp4 70.7-70.8 / 72.2-72.4; DeepSeek-V3 fp8-g128 339.9-340.4 / 342.1-342.3, mxfp4 215.0-215.3 / 216.8, nvfp4
// 226.0-226.1 / 228.0-228.4; T=512 (DeepSeek-V3 mxfp4) 12.3-12.9 / 13.2-13.3.
template <int THREADS, int ROUNDS>
__device__ __forceinline__ void route_pairs(int route_block, int num_pairs, const int *__restrict__ topk_ids,
                                            int num_experts, int expert_begin, int expert_end, int *counts,
                                            int *pair_rank, sl_dev_error_t *err, int *warp_counts) {
  constexpr int NW = THREADS / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lower_lanes = (1u << lane) - 1u;
  const int p0 = route_block * (THREADS * ROUNDS) + warp * (32 * ROUNDS) + lane; // + r * 32
  // All rounds' ids are loaded up front: one memory latency instead of ROUNDS.
  int round_ids[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) round_ids[r] = p0 + r * 32 < num_pairs ? topk_ids[p0 + r * 32] : 0;
  for (int i = threadIdx.x; i < NW * MOE_LOCAL; i += THREADS) warp_counts[i] = 0;
  __syncthreads();
  int *mine = warp_counts + warp * MOE_LOCAL;
  int e_r[ROUNDS], rank_r[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = p0 + r * 32;
    int e = -1;
    if (p < num_pairs) {
      const int id = round_ids[r];
      if (id < 0 || id >= num_experts)
        sl_dev_error_record(err, SL_DEV_ERR_RANGE, p / MOE_TOPK, id, num_experts);
      else
        e = sl_moe_local_expert(id, expert_begin, expert_end);
    }
    const unsigned peers = warp_peers(e);
    const int intra = __popc(peers & lower_lanes);
    e_r[r] = e;
    rank_r[r] = e >= 0 ? mine[e] + intra : 0;
    __syncwarp(); // every lane has read its expert's count before the group's leader adds to it
    if (intra == 0 && e >= 0) mine[e] += __popc(peers);
    __syncwarp();
  }
  __syncthreads();
  // Exclusive scan over the warps, per expert; the block's totals.
  for (int e = threadIdx.x; e < MOE_LOCAL; e += THREADS) {
    int run = 0;
#pragma unroll
    for (int w = 0; w < NW; w++) {
      const int v = warp_counts[w * MOE_LOCAL + e];
      warp_counts[w * MOE_LOCAL + e] = run;
      run += v;
    }
    counts[route_block * MOE_LOCAL + e] = run;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < ROUNDS; r++)
    if (e_r[r] >= 0) pair_rank[p0 + r * 32] = mine[e_r[r]] + rank_r[r];
}

// Copy work items: one warp copies (token, span of `span` chunks of MOE_CHUNK columns).
// The rows of the token's K pairs are computed once per item by lanes k < K and broadcast
// with K 32-bit shuffles into registers of every lane (no shared memory, no per-packet
// shuffle); then each chunk's 16-byte vectors are loaded once and stored to all K rows.
// Decode items are one chunk (span 1: many small items over many SMs); the prefill copy
// takes whole rows (span = MOE_CHUNKS when there are enough tokens), with the next chunk's
// loads issued before the current chunk's K stores. The item's first vectors and expert
// id do not depend on routing (load_item: the fused kernel issues it before its barrier).
struct ItemInput {
  uint4 v[MOE_UNROLL]; // vectors of the item's first chunk
  int id;              // topk id of pair (t, lane) for lane < K
};

__device__ __forceinline__ void load_chunk(const __nv_bfloat16 *__restrict__ x, int t, int c, uint4 *v) {
  const int lane = threadIdx.x % 32;
  const uint4 *src = reinterpret_cast<const uint4 *>(x + (long)t * MOE_HIDDEN);
#pragma unroll
  for (int j = 0; j < MOE_UNROLL; j++) {
    const int col = c * MOE_CHUNK + (j * 32 + lane) * SL_MOE_VEC_ELEMS;
    v[j] = col < MOE_HIDDEN ? __ldg(src + col / SL_MOE_VEC_ELEMS) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// Item `item` with `spans` items per token: token and first chunk. Item is long on the paths
// whose item count T * spans may pass 2^31, int on the replicated one (T * K <= 1024): its 64-bit
// division by the constant chunk count was ~20 instructions ahead of the first loads and again
// after the ranking (session 17).
template <typename Item> __device__ __forceinline__ void item_coords(Item item, int span, int spans, int &t, int &c0) {
  t = (int)(item / spans);
  c0 = (int)(item % spans) * span;
}

template <typename Item>
__device__ __forceinline__ void load_item(Item item, int span, int spans, const __nv_bfloat16 *__restrict__ x,
                                          const int *__restrict__ topk_ids, ItemInput &in) {
  const int lane = threadIdx.x % 32;
  int t, c0;
  item_coords(item, span, spans, t, c0);
  // A plain load, not __ldg: ptxas sank the non-coherent one past the replicated kernel's
  // block barriers (to after its histogram atomics), one more L2 round trip before the rows.
  in.id = lane < MOE_TOPK ? topk_ids[t * MOE_TOPK + lane] : -1;
  load_chunk(x, t, c0, in.v);
}

// Store one chunk's vectors (bf16) or their quantized codes and scales to the K rows.
// Addressing: a lane's byte offset within a row is computed once per chunk, then each row
// costs one 64-bit multiply-add (row x row bytes + the lane's base pointer) and its stores
// take the vectors' constant distances as immediate offsets. Session 18: the per-row, per-vector
// signed column arithmetic made ~45 instructions per row of the quantized copy's ~750 per item
// (Qwen3 T=16384 mxfp4: 62 % of issue slots used, ncu).
// A chunk's vector j lies inside the row unless H is not a multiple of the chunk (the last one).
__device__ __forceinline__ bool vec_in_row(int c, int j, int lane) {
  return MOE_HIDDEN % MOE_CHUNK == 0 || c * MOE_CHUNK + (j * 32 + lane) * SL_MOE_VEC_ELEMS < MOE_HIDDEN;
}
__device__ __forceinline__ void store_chunk(int t, int c, const uint4 *v, const int *rows,
                                           void *__restrict__ expert_x, void *__restrict__ expert_scales,
                                           float global_scale, sl_dev_error_t *err) {
  const int lane = threadIdx.x % 32;
  const unsigned col0 = (unsigned)c * MOE_CHUNK + (unsigned)lane * SL_MOE_VEC_ELEMS; // vector 0's first column
#if MOE_PAYLOAD < 0
  unsigned char *base = static_cast<unsigned char *>(expert_x) + (size_t)col0 * 2;
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) {
    const int r = rows[k]; // warp-uniform
    if (r < 0) continue;
    unsigned char *dst = base + (size_t)(unsigned)r * (MOE_HIDDEN * 2);
#pragma unroll
    for (int j = 0; j < MOE_UNROLL; j++)
      if (vec_in_row(c, j, lane)) *reinterpret_cast<uint4 *>(dst + j * 32 * 16) = v[j];
  }
#else
  // Quantize once per token chunk (all lanes take part in the block reductions; lanes past
  // the row end quantize zeros that are never stored: H is a multiple of the block).
  QuantVec q[MOE_UNROLL];
#pragma unroll
  for (int j = 0; j < MOE_UNROLL; j++) {
    q[j] = quantize_vec(v[j], global_scale);
    if (!q[j].finite && vec_in_row(c, j, lane) && lane % MOE_QLANES == 0)
      sl_dev_error_record(err, SL_DEV_ERR_NUMERIC, t, (int)(col0 + j * 32 * SL_MOE_VEC_ELEMS) / MOE_QBLOCK,
                          MOE_QBLOCK);
  }
  constexpr int code_bytes = MOE_QFP4 ? 4 : 8;                                     // one vector's codes
  constexpr int scale_bytes = MOE_PAYLOAD == SL_QFMT_FP8_GROUP ? 4 : 1;            // one block's scale
  constexpr int vec_scale_step = 32 * SL_MOE_VEC_ELEMS / MOE_QBLOCK * scale_bytes; // vector j to j + 1
  unsigned char *cbase = static_cast<unsigned char *>(expert_x) + (size_t)(col0 / SL_MOE_VEC_ELEMS) * code_bytes;
  unsigned char *sbase = static_cast<unsigned char *>(expert_scales) + (size_t)(col0 / MOE_QBLOCK) * scale_bytes;
  const bool scale_lane = lane % MOE_QLANES == 0;
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) {
    const int r = rows[k];
    if (r < 0) continue;
    unsigned char *dst = cbase + (size_t)(unsigned)r * MOE_ROW_BYTES;
#pragma unroll
    for (int j = 0; j < MOE_UNROLL; j++) {
      if (!vec_in_row(c, j, lane)) continue;
#if MOE_QFP4
      *reinterpret_cast<unsigned *>(dst + j * 32 * code_bytes) = q[j].codes.x;
#else
      *reinterpret_cast<uint2 *>(dst + j * 32 * code_bytes) = q[j].codes;
#endif
    }
    if (scale_lane) {
      unsigned char *sd = sbase + (size_t)(unsigned)r * (MOE_HIDDEN / MOE_QBLOCK * scale_bytes);
#pragma unroll
      for (int j = 0; j < MOE_UNROLL; j++) {
        if (!vec_in_row(c, j, lane)) continue;
        if (MOE_PAYLOAD == SL_QFMT_FP8_GROUP)
          *reinterpret_cast<float *>(sd + j * vec_scale_step) = q[j].scale_f32;
        else
          sd[j * vec_scale_step] = q[j].scale_u8;
      }
    }
  }
#endif
}

template <typename OffsetFn, typename Item>
__device__ __forceinline__ void copy_item(Item item, int span, int spans, ItemInput &in,
                                          const __nv_bfloat16 *__restrict__ x, int num_experts, int expert_begin,
                                          int expert_end, int capacity, void *__restrict__ expert_x,
                                          void *__restrict__ expert_scales, float global_scale, sl_dev_error_t *err,
                                          int *__restrict__ slots, OffsetFn offset_fn) {
  const int lane = threadIdx.x % 32;
  int t, c0;
  item_coords(item, span, spans, t, c0);
  // Rows fit int32 (slots are int32): E_local x capacity rows.
  int row = -1;
  if (lane < MOE_TOPK) {
    const int p = t * MOE_TOPK + lane;
    const int id = in.id;
    const int e = (id >= 0 && id < num_experts) ? sl_moe_local_expert(id, expert_begin, expert_end) : -1;
    if (e >= 0) {
      const int rank = offset_fn(p, e);
      if (rank < capacity) row = (int)sl_moe_row(e, rank, capacity);
    }
    if (c0 == 0) slots[p] = row;
  }
  int rows[MOE_TOPK];
  bool any = false;
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) {
    rows[k] = __shfl_sync(0xffffffffu, row, k);
    any |= rows[k] >= 0;
  }
  // A token with no row here (other ranks' experts, dropped, invalid) is not quantized.
  if (!any) return;
  const int c1 = min(c0 + span, MOE_CHUNKS);
  for (int c = c0; c < c1; c++) {
#if MOE_PAYLOAD < 0
    uint4 next[MOE_UNROLL];
    if (c + 1 < c1) load_chunk(x, t, c + 1, next); // in flight during this chunk's K stores
    store_chunk(t, c, in.v, rows, expert_x, expert_scales, global_scale, err);
    if (c + 1 < c1) {
#pragma unroll
      for (int j = 0; j < MOE_UNROLL; j++) in.v[j] = next[j];
    }
#else
    // Quantized: the quantizer's registers leave no room for a second chunk in flight.
    if (c != c0) load_chunk(x, t, c, in.v);
    store_chunk(t, c, in.v, rows, expert_x, expert_scales, global_scale, err);
#endif
  }
}

// The split path's copy: grid-strided items. Launched with PDL after the routing kernel: a
// warp issues its first item's loads, then waits for the routing grid (once).
template <typename OffsetFn>
__device__ __forceinline__ void copy_items(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids,
                                           int num_tokens, int span, int num_experts, int expert_begin,
                                           int expert_end, int capacity, void *__restrict__ expert_x,
                                           void *__restrict__ expert_scales, float global_scale,
                                           sl_dev_error_t *err, int *__restrict__ slots, OffsetFn offset_fn) {
  const int warps_per_block = blockDim.x / 32;
  const int spans = (MOE_CHUNKS + span - 1) / span;
  const long num_items = (long)num_tokens * spans;
  bool waited = false;
  for (long item = (long)blockIdx.x * warps_per_block + threadIdx.x / 32; item < num_items;
       item += (long)gridDim.x * warps_per_block) {
    ItemInput in;
    load_item(item, span, spans, x, topk_ids, in);
    if (!waited) {
      sl_moe_pdl_wait();
      waited = true;
    }
    copy_item(item, span, spans, in, x, num_experts, expert_begin, expert_end, capacity, expert_x, expert_scales,
              global_scale, err, slots, offset_fn);
  }
}

// Totals per expert (clamped to capacity; an overflow is recorded, never written).
__device__ __forceinline__ void finish_expert(int e, int total, int capacity, int expert_begin,
                                              int *expert_counts, sl_dev_error_t *err) {
  expert_counts[e] = total < capacity ? total : capacity;
  if (total > capacity) sl_dev_error_record(err, SL_DEV_ERR_CAPACITY, expert_begin + e, total, capacity);
}

// The histogram ranking stage of the replicated kernels (plain and balanced): with the ids
// staged in registers (idv[r] = id of pair r*NT + tid, for pairs below id_end), count per local
// expert the pairs before the window [q0, q0 + n) (below); record range errors; write the
// window's local experts (win, -1 for none). Ends after a block barrier: ranks are then
// available (and the last block's totals, hist_counts below).
// The last block's items reach the last token, so its window ends at the last pair and
// total[e] = below[e] + the window's pairs of e (both callers: the plain grid's last block and
// the balanced grid's last range): no second histogram of all pairs, one shared atomic per id
// less in the block the kernel's end waits for (session 7 measured that block's counts work at
// 0.12 us of DeepSeek-V3 T=128).
template <int NT, int ROUNDS>
__device__ __forceinline__ void hist_rank_stage(const int (&idv)[ROUNDS], int id_end, int q0, int n,
                                                int num_experts, int expert_begin, int expert_end,
                                                sl_grid_barrier_state_t *state, int *below, int *win) {
  constexpr int LOCAL_ROUNDS = (MOE_LOCAL + NT - 1) / NT;
#pragma unroll
  for (int r = 0; r < LOCAL_ROUNDS; r++) {
    const int e = r * NT + threadIdx.x;
    if (e < MOE_LOCAL) below[e] = 0;
  }
  __syncthreads(); // the caller's id (and first x) loads are still in flight here
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = r * NT + threadIdx.x;
    if (p >= id_end) continue;
    const int id = idv[r];
    int e = -1;
    if (id < 0 || id >= num_experts)
      sl_dev_error_record(&state->error, SL_DEV_ERR_RANGE, p / MOE_TOPK, id, num_experts);
    else
      e = sl_moe_local_expert(id, expert_begin, expert_end);
    if (e >= 0 && p < q0) atomicAdd(&below[e], 1);
    if (p >= q0 && p < q0 + n) win[p - q0] = e;
  }
  __syncthreads();
}
// The last block's expert totals (below[e] + the window's pairs of e) and capacity errors,
// after hist_rank_stage. Called after the block's copies are issued (session 17): the
// totals' loop (a window scan per expert) is no longer between that block's ids and its
// first stores, and the kernel's end waits for that block. Range errors were recorded in
// hist_rank_stage, before any capacity error, as on every path.
template <int NT>
__device__ __forceinline__ void hist_counts(int n, int capacity, int expert_begin, int *expert_counts,
                                            sl_grid_barrier_state_t *state, const int *below, const int *win) {
  constexpr int LOCAL_ROUNDS = (MOE_LOCAL + NT - 1) / NT;
#pragma unroll
  for (int r = 0; r < LOCAL_ROUNDS; r++) {
    const int e = r * NT + threadIdx.x;
    if (e >= MOE_LOCAL) continue;
    int total = below[e];
    for (int i = 0; i < n; i++) total += win[i] == e;
    finish_expert(e, total, capacity, expert_begin, expert_counts, &state->error);
  }
}

struct FusedOffset {
  const int *counts, *pair_rank;
  __device__ int operator()(int p, int e) const {
    int off = __ldcg(&pair_rank[p]);
#pragma unroll 4
    for (int b = 0; b < p / SL_MOE_FUSED_THREADS; b++) off += __ldcg(&counts[b * MOE_LOCAL + e]);
    return off;
  }
};

#if MOE_KERNEL == 0
extern "C" __global__ void __launch_bounds__(SL_MOE_FUSED_THREADS)
    sl_moe_dispatch_fused(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids, int num_tokens,
                          int num_experts, int expert_begin, int expert_end, int capacity,
                          void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                          int *__restrict__ expert_counts, int *__restrict__ slots, sl_grid_barrier_state_t *state,
                          int *counts, int *pair_rank, unsigned long long timeout_ns) {
  __shared__ int warp_counts[(SL_MOE_FUSED_THREADS / 32) * MOE_LOCAL];
  sl_grid_barrier_t bar;
  sl_grid_barrier_init(&bar, state);
  const int num_pairs = num_tokens * MOE_TOPK;
  const int route_blocks = (num_pairs + SL_MOE_FUSED_THREADS - 1) / SL_MOE_FUSED_THREADS;
  if ((int)blockIdx.x < route_blocks)
    route_pairs<SL_MOE_FUSED_THREADS, 1>(blockIdx.x, num_pairs, topk_ids, num_experts, expert_begin, expert_end,
                                         counts, pair_rank, &state->error, warp_counts);
  // This warp's first copy item does not depend on the routing: load it before the barrier.
  const long num_items = (long)num_tokens * MOE_CHUNKS;
  const long first_item = (long)blockIdx.x * (SL_MOE_FUSED_THREADS / 32) + threadIdx.x / 32;
  ItemInput first;
  if (first_item < num_items) load_item(first_item, 1, MOE_CHUNKS, x, topk_ids, first);
  if (!sl_grid_barrier_sync(&bar, timeout_ns)) return;
  for (int e = blockIdx.x * SL_MOE_FUSED_THREADS + threadIdx.x; e < MOE_LOCAL;
       e += gridDim.x * SL_MOE_FUSED_THREADS) {
    int total = 0;
    for (int b = 0; b < route_blocks; b++) total += __ldcg(&counts[b * MOE_LOCAL + e]);
    finish_expert(e, total, capacity, expert_begin, expert_counts, &state->error);
  }
  for (long item = first_item; item < num_items; item += (long)gridDim.x * (SL_MOE_FUSED_THREADS / 32)) {
    if (item != first_item) load_item(item, 1, MOE_CHUNKS, x, topk_ids, first);
    copy_item(item, 1, MOE_CHUNKS, first, x, num_experts, expert_begin, expert_end, capacity, expert_x,
              expert_scales, global_scale, &state->error, slots, FusedOffset{counts, pair_rank});
  }
}

#endif

#if MOE_KERNEL == 1
#ifndef MOE_ROUTE_ROUNDS
#error "MOE_ROUTE_ROUNDS (pairs per thread of the routing kernel: 1, 2, 4 or 8) must be defined by the JIT"
#endif
#if MOE_ROUTE_ROUNDS != 1 && MOE_ROUTE_ROUNDS != 2 && MOE_ROUTE_ROUNDS != 4 && MOE_ROUTE_ROUNDS != 8
#error "MOE_ROUTE_ROUNDS must be 1, 2, 4 or 8"
#endif
// The last block's scan: the per-block counts of an expert are split into SCAN_SEGS
// contiguous ranges of routing blocks, one thread per (expert, range), so all 512 threads
// load (Qwen3 E=128: 4 ranges) instead of one thread per expert walking every block; the
// range totals meet in shared memory. BATCH loads in flight per thread (L2-latency bound);
// the first batch stays in registers for the offsets pass, later batches are re-read.
#define MOE_SCAN_SEGS_RAW (SL_MOE_ROUTE_THREADS / MOE_LOCAL)
#define MOE_SCAN_SEGS (MOE_SCAN_SEGS_RAW >= 16 ? 16 : MOE_SCAN_SEGS_RAW >= 8 ? 8 : MOE_SCAN_SEGS_RAW >= 4 ? 4 \
                       : MOE_SCAN_SEGS_RAW >= 2 ? 2 : 1)
extern "C" __global__ void __launch_bounds__(SL_MOE_ROUTE_THREADS)
    sl_moe_dispatch_route(const int *__restrict__ topk_ids, int num_tokens, int num_experts, int expert_begin,
                          int expert_end, int capacity, int *__restrict__ expert_counts,
                          sl_grid_barrier_state_t *state, unsigned *done, unsigned *claims, int *counts,
                          int *offsets, int *pair_rank) {
  __shared__ int warp_counts[(SL_MOE_ROUTE_THREADS / 32) * MOE_LOCAL];
  __shared__ int is_last;
  __shared__ int seg_total[MOE_SCAN_SEGS * MOE_LOCAL];
  // Programmatic dependent launch (kernels/moe_pdl.cuh; a no-op without the PDL attribute): the
  // copy kernel may launch now; it issues its first loads (x, topk ids: inputs, not routing
  // results) and waits for this grid before it reads ranks and offsets.
  sl_moe_pdl_trigger();
  const int num_pairs = num_tokens * MOE_TOPK;
  route_pairs<SL_MOE_ROUTE_THREADS, MOE_ROUTE_ROUNDS>(blockIdx.x, num_pairs, topk_ids, num_experts, expert_begin,
                                                      expert_end, counts, pair_rank, &state->error, warp_counts);
  // The last block to finish scans the per-block counts. Same ordering argument as the grid
  // barrier: __syncthreads, then one acq_rel arrival per block on `done`.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence(); // one per block, off the latency path: belt and braces for the release
    is_last = sl_moe_atom_add_acq_rel_u32(done, 1u) == gridDim.x - 1u;
  }
  __syncthreads();
  if (!is_last) return;
  const int blocks = gridDim.x;
  // The host keeps routing blocks <= SMs: Qwen3 T=16384, 128 blocks: one batch. Fewer loads in flight (fewer
  // registers: 32 per thread at a batch of 8 instead of 81, so that copy blocks fit beside a routing block) measured
  // slower (H200, session 25 call 7, T=16384 by events, batch 32 / 16 / 8: Qwen3 fp8-g128 100.9-101.3 / 102.3 /
  // 103.9-104.6 us, DeepSeek-V3 mxfp4 216.8-217.3 / 218.6 / 218.3-218.8).
  constexpr int BATCH = 32;
  const int e = threadIdx.x % MOE_LOCAL, seg = threadIdx.x / MOE_LOCAL;
  const bool scans = seg < MOE_SCAN_SEGS;
  const int per = (blocks + MOE_SCAN_SEGS - 1) / MOE_SCAN_SEGS;
  const int b_begin = min(seg * per, blocks), b_end = min(b_begin + per, blocks);
  int first[BATCH];
  int sum = 0;
  if (scans) {
    for (int b0 = b_begin; b0 < b_end; b0 += BATCH) {
      int n[BATCH];
#pragma unroll
      for (int j = 0; j < BATCH; j++) n[j] = b0 + j < b_end ? __ldcg(&counts[(b0 + j) * MOE_LOCAL + e]) : 0;
#pragma unroll
      for (int j = 0; j < BATCH; j++) {
        sum += n[j];
        if (b0 == b_begin) first[j] = n[j];
      }
    }
    seg_total[seg * MOE_LOCAL + e] = sum;
  }
  __syncthreads();
  if (!scans) return;
  int acc = 0, total = 0;
#pragma unroll
  for (int g = 0; g < MOE_SCAN_SEGS; g++) {
    const int v = seg_total[g * MOE_LOCAL + e];
    if (g < seg) acc += v;
    total += v;
  }
  for (int b0 = b_begin; b0 < b_end; b0 += BATCH) {
    int n[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; j++)
      n[j] = b0 == b_begin ? first[j] : b0 + j < b_end ? __ldcg(&counts[(b0 + j) * MOE_LOCAL + e]) : 0;
#pragma unroll
    for (int j = 0; j < BATCH; j++) {
      if (b0 + j < b_end) offsets[(b0 + j) * MOE_LOCAL + e] = acc;
      acc += n[j];
    }
  }
  if (seg == 0) finish_expert(e, total, capacity, expert_begin, expert_counts, &state->error);
  if (threadIdx.x == 0) *done = 0u; // ready for the next launch (kernel boundary orders it)
  // The direct copy claims items after its griddepcontrol.wait, i.e. after this grid.
  if (threadIdx.x < SL_MOE_CLAIM_COUNTERS) claims[threadIdx.x * SL_MOE_CLAIM_STRIDE] = 0u;
}

#endif

#if MOE_KERNEL == 2
struct SplitOffset {
  const int *offsets, *pair_rank;
  int route_shift; // log2 of the pairs per routing block (512 x the routing kernel's rounds)
  __device__ int operator()(int p, int e) const {
    return __ldcg(&pair_rank[p]) + __ldcg(&offsets[(p >> route_shift) * MOE_LOCAL + e]);
  }
};

// span: chunks per warp item (host: whole rows when the tokens alone fill the GPU).
// Blocks per SM the copy is compiled for. The FP4 payloads at 6 (40 registers, ~20 bytes of
// spill): 48 warps per SM hide the quantizer's chains better than 32 at 52-56 registers (H200,
// session 18 call 2, T=16384 us by events, default / 5 / 6 blocks: Qwen3 mxfp4 84.0 / 79.2 / 76.9,
// nvfp4 88.3 / 82.4 / 78.4; DSv3 mxfp4 255.9 / 240.2 / 240.9, nvfp4 269.2 / 252.4 / 241.6). The
// FP8 payloads spill more at 5 or 6 and ran slower there (Qwen3 fp8-g128 107.2 / 122.0 / 131.2). At 8
// (and 7: the same 32 registers) the FP4 copy spills ~80 bytes and lost 30-40 % (call 8: Qwen3 mxfp4 103.1).
#if MOE_PAYLOAD >= 0 && MOE_QFP4
#define MOE_COPY_MIN_BLOCKS 6
#else
#define MOE_COPY_MIN_BLOCKS 1
#endif
extern "C" __global__ void __launch_bounds__(SL_MOE_COPY_THREADS, MOE_COPY_MIN_BLOCKS)
    sl_moe_dispatch_copy(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids, int num_tokens,
                         int num_experts, int expert_begin, int expert_end, int capacity,
                         void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                         int *__restrict__ slots, const int *offsets, const int *pair_rank,
                         sl_grid_barrier_state_t *state, int span, int route_shift) {
  copy_items(x, topk_ids, num_tokens, span, num_experts, expert_begin, expert_end, capacity, expert_x,
             expert_scales, global_scale, &state->error, slots, SplitOffset{offsets, pair_rank, route_shift});
}
#endif

#if MOE_KERNEL == 3
#ifndef MOE_REPL_RANK
#error "MOE_REPL_RANK (replicated ranking: 1 histogram, 0 scan of the staged ids) must be defined by the JIT"
#endif
// MOE_REPL_WARPS: warps per block of the plain replicated kernel (host: sl_moe_repl_warps, 8
// unless fewer make every block's chunks one token's; 8 if absent). The scan ranking needs 8.
#ifndef MOE_REPL_WARPS
#define MOE_REPL_WARPS 8
#endif
#if MOE_REPL_WARPS < 1 || MOE_REPL_WARPS > 32 || (MOE_REPL_RANK == 0 && MOE_REPL_WARPS != 8)
#error "MOE_REPL_WARPS: 1..32 warps per block (8 for the scan ranking)"
#endif
#define MOE_REPL_THREADS (32 * MOE_REPL_WARPS)
// Replicated routing (decode, T*K <= SL_MOE_REPL_MAX_PAIRS), one plain launch, one warp
// per (token, chunk) item (grid = items / NW: every warp has at most one item). No block
// waits for another: no grid barrier, no cooperative launch, no global rank round trip.
// A block needs the ranks of its own pairs only (those of the <= NW tokens its NW items
// touch, pairs [q0, q0 + n)): the rank of pair q is the number of earlier pairs with the
// same local expert,
//   rank(q) = #{p < q : e(p) == e(q)}   (pair order t*K + k, as on every path).
// MOE_REPL_RANK 1 (histogram, default): every thread loads its <= 1024 / NT ids (all loads up
// front), validates them and adds the pairs below q0 to a shared per-expert histogram
// with integer atomics (order-free, exact); rank(q) = below[e(q)] + the earlier pairs of
// the block's own window [q0, q) with the same expert (<= n - 1 compares by the k < K
// lanes, n = 8 or 16 at K=8). Per thread at 8 warps: 4 LDG + <= 4 ATOMS (5 at 7), two __syncthreads.
// MOE_REPL_RANK 0 (scan, the comparison): the ids are staged in shared memory and S
// threads per needed pair (S = 32 when a block needs 8 pairs, 16 for 16) each scan every
// S-th 16-byte group of ids below q, S-lane butterflies: at T*K = 1024 up to 16 LDS.128
// plus ~12 dependent ALU ops each per thread, in every one of the 448 blocks of DSv3 T=128.
// The expert totals come from a shared-memory histogram of all pairs in the last block.
// Every block validates all ids before copying, so a range error is recorded before any
// copy-time (numeric) error, as on the other paths.
#define MOE_REPL_NEED (MOE_REPL_WARPS * MOE_TOPK) // needed pairs per block: <= NW tokens (one per warp)
struct ReplicatedRank {
  const int *rank; // shared, the block's needed pairs from q0
  int q0;
  __device__ int operator()(int p, int e) const { return rank[p - q0]; }
};
// NG: 16-byte groups of the window to scan, a compile-time bound on ceil(n / 4): every group is
// loaded and compared unconditionally (masked by the pair index), so the loads go out together
// instead of one per loop trip (session 7: -0.07 us at DeepSeek-V3 T=128). Entries past n are
// never counted (index >= i).
template <int NG> struct HistRank {
  const int *below; // shared [MOE_LOCAL]: pairs p < q0 per local expert
  const int *win;   // shared [>= 4 NG]: local expert of pair q0 + i, or -1
  int q0;
  __device__ int operator()(int p, int e) const {
    int rank = below[e];
    const int i = p - q0; // the window's pairs before p
    const int4 *w4 = reinterpret_cast<const int4 *>(win);
#pragma unroll
    for (int g = 0; g < NG; g++) {
      const int4 v = w4[g];
      const int b = 4 * g;
      rank += (b < i && v.x == e) + (b + 1 < i && v.y == e) + (b + 2 < i && v.z == e) + (b + 3 < i && v.w == e);
    }
    return rank;
  }
};
// The plain replicated kernel's window groups: its NW consecutive items touch at most
// (NW - 1 + CHUNKS - 1) / CHUNKS + 1 tokens (and at most NW); exactly one when NW divides the
// row's chunks (blocks start at a token's first chunk: the host's usual choice, session 17).
constexpr int repl_win_groups() {
  constexpr int nw = MOE_REPL_WARPS, t = (nw - 1 + MOE_CHUNKS - 1) / MOE_CHUNKS + 1;
  constexpr int tokens = MOE_CHUNKS % nw == 0 ? 1 : t < nw ? t : nw;
  return (tokens * MOE_TOPK + 3) / 4;
}

#if MOE_ROUTE
// The top-k of all T <= SL_MOE_TOPK_FUSED_MAX_TOKENS tokens from the router logits, computed
// by every block (the same redundant-compute trick as the ranking: no block waits for another),
// one warp per token with the router kernel's warp routine, so ids and weights equal
// sl_router's bit for bit; first this warp's x chunk is loaded (a layer input, complete before
// the router logits kernel started). Ids go to shared memory (returned); block 0 also writes
// ids and weights to global memory (combine reads the weights; sl_moe_layer_last_routing the
// ids). Launched as a programmatic dependent of the router logits kernel: the bias is a
// constant and is loaded before griddepcontrol.wait, the logits after it. Every thread of the
// block calls it (it ends with a block barrier).
__device__ __forceinline__ const int *moe_repl_route(int item, int num_items, const __nv_bfloat16 *__restrict__ x,
                                                     ItemInput &in, const void *__restrict__ logits,
                                                     const float *__restrict__ bias, int num_tokens, int renormalize,
                                                     float scaling, int *__restrict__ ids_out,
                                                     float *__restrict__ weights_out) {
  __shared__ int topk_s[SL_MOE_TOPK_FUSED_MAX_TOKENS * MOE_TOPK];
  const int lane = threadIdx.x & 31;
  if (item < num_items) load_chunk(x, (int)(item / MOE_CHUNKS), (int)(item % MOE_CHUNKS), in.v);
  sl_router_lane_t ls;
  sl_router_lane_init(logits, bias, lane, ls);
  sl_moe_pdl_wait();
  for (int t = threadIdx.x / 32; t < num_tokens; t += MOE_REPL_WARPS) {
    int id;
    float w;
    sl_router_token(logits, t, lane, ls, renormalize, scaling, id, w);
    if (lane < MOE_TOPK) {
      topk_s[t * MOE_TOPK + lane] = id;
      if (blockIdx.x == 0) {
        ids_out[t * MOE_TOPK + lane] = id;
        weights_out[t * MOE_TOPK + lane] = w;
      }
    }
  }
  __syncthreads();
  if (item < num_items) in.id = lane < MOE_TOPK ? topk_s[(int)(item / MOE_CHUNKS) * MOE_TOPK + lane] : -1;
  return topk_s;
}
// The warp's item (x chunk and ids) and the source of the ids, on either build.
#define MOE_REPL_START()                                                                                      \
  const int *topk_s = moe_repl_route(item, num_items, x, in, logits, bias, num_tokens, renormalize, scaling, \
                                     ids_out, weights_out)
#define MOE_REPL_ID(p) topk_s[p]
#else
// (A warp past the last item loads the last one and never stores it: without the branch, ptxas keeps
// these loads ahead of the ids' and their validation, session 17.)
#define MOE_REPL_START() load_item(item < num_items ? item : num_items - 1, 1, MOE_CHUNKS, x, topk_ids, in)
#define MOE_REPL_ID(p) __ldg(&topk_ids[p])
#endif

#if MOE_REPL_BAL
// Balanced replicated dispatch (opt-in: force_repl_balance; MOE_REPL_BAL = threads per block,
// 256 or 512). The plain kernel's grid is one item per warp (DSv3 T=128: 448 blocks, 3.39
// per SM: some SMs store 4 blocks' items, most 3, and every block stages ids first). Here the
// host launches G = blocks-per-SM x SMs blocks (sl_moe_bal_grid) and block b copies the
// contiguous items [sl_moe_bal_begin(b), sl_moe_bal_begin(b + 1)) -- sizes differ by at most
// one item, so every SM stores the same bytes -- its warps taking items warp, warp + NW, ...
// (<= 2 per warp at DSv3 T=128; the first MOE_BAL_PRE items' loads go before the ranking).
// Ranking as MOE_REPL_RANK 1, with the window = the pairs of the tokens [t0, t1] the block's
// range touches (it may cross token boundaries; the host keeps t1 - t0 < NW): below[e]
// (pairs < q0) from shared atomics, then the earlier window pairs. All ranks are known after
// the one block barrier, so every warp stores right after it. Same ranks and error order as
// the plain kernel: the last block validates all ids before the capacity check; with a
// quantized payload every block validates all ids before copying.
#if MOE_ROUTE
#error "MOE_REPL_BAL: the router runs as its own launch (no MOE_ROUTE)"
#endif
#if MOE_REPL_RANK != 1
#error "MOE_REPL_BAL: histogram ranking (MOE_REPL_RANK 1) only"
#endif
#if MOE_REPL_BAL != 256 && MOE_REPL_BAL != 512
#error "MOE_REPL_BAL must be 256 or 512 (threads per block)"
#endif
#define MOE_BAL_NW (MOE_REPL_BAL / 32)
#define MOE_BAL_NEED (MOE_BAL_NW * MOE_TOPK) // window pairs: <= NW tokens per block (host)
#define MOE_BAL_PRE (MOE_PAYLOAD < 0 ? 2 : 1) // items per warp loaded before the ranking
extern "C" __global__ void __launch_bounds__(MOE_REPL_BAL)
    sl_moe_dispatch_replicated(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids,
                               int num_tokens, int num_experts, int expert_begin, int expert_end, int capacity,
                               void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                               int *__restrict__ expert_counts, int *__restrict__ slots,
                               sl_grid_barrier_state_t *state) {
  constexpr int NT = MOE_REPL_BAL, NW = MOE_BAL_NW;
  constexpr int ROUNDS = SL_MOE_REPL_MAX_PAIRS / NT;
  static_assert(SL_MOE_REPL_MAX_PAIRS % NT == 0, "staging rounds");
  __shared__ int below[MOE_LOCAL];
  __shared__ __align__(16) int win[MOE_BAL_NEED];
  static_assert(MOE_BAL_NEED % 4 == 0, "HistRank scans whole 16-byte groups of win");
  const int num_pairs = num_tokens * MOE_TOPK; // <= SL_MOE_REPL_MAX_PAIRS (host)
  const long num_items = (long)num_tokens * MOE_CHUNKS;
  const long ib = sl_moe_bal_begin(blockIdx.x, num_items, gridDim.x);
  const long ie = sl_moe_bal_begin((long)blockIdx.x + 1, num_items, gridDim.x);
  const int warp = threadIdx.x / 32;
  // The warp's first items do not depend on the routing: their loads go first, then the ids.
  ItemInput in[MOE_BAL_PRE];
#pragma unroll
  for (int j = 0; j < MOE_BAL_PRE; j++) {
    const long item = ib + warp + (long)j * NW;
    if (item < ie) load_item(item, 1, MOE_CHUNKS, x, topk_ids, in[j]);
  }
  const bool counts_block = blockIdx.x == gridDim.x - 1;
  // The block's tokens [t0, t1] and their pairs [q0, q0 + n), n <= MOE_BAL_NEED (n = 0: no items).
  const int t0 = (int)(ib / MOE_CHUNKS), t1 = ie > ib ? (int)((ie - 1) / MOE_CHUNKS) : t0 - 1;
  const int q0 = t0 * MOE_TOPK, n = (t1 - t0 + 1) * MOE_TOPK;
  // As the plain kernel: a bf16 block loads the ids below its window's end, the last block
  // and every block of a quantized payload all of them (range errors precede the others).
  const int id_end = (MOE_PAYLOAD >= 0 || counts_block) ? num_pairs : q0 + n;
  int idv[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = r * NT + threadIdx.x;
    idv[r] = p < id_end ? __ldg(&topk_ids[p]) : 0;
  }
  hist_rank_stage<NT, ROUNDS>(idv, id_end, q0, n, num_experts, expert_begin, expert_end, state, below, win);
  const HistRank<MOE_BAL_NEED / 4> rank{below, win, q0};
#pragma unroll
  for (int j = 0; j < MOE_BAL_PRE; j++) {
    const long item = ib + warp + (long)j * NW;
    if (item < ie)
      copy_item(item, 1, MOE_CHUNKS, in[j], x, num_experts, expert_begin, expert_end, capacity, expert_x,
                expert_scales, global_scale, &state->error, slots, rank);
  }
  for (long item = ib + warp + (long)MOE_BAL_PRE * NW; item < ie; item += NW) {
    ItemInput more;
    load_item(item, 1, MOE_CHUNKS, x, topk_ids, more);
    copy_item(item, 1, MOE_CHUNKS, more, x, num_experts, expert_begin, expert_end, capacity, expert_x,
              expert_scales, global_scale, &state->error, slots, rank);
  }
  if (counts_block) hist_counts<NT>(n, capacity, expert_begin, expert_counts, state, below, win);
}
#else
extern "C" __global__ void __launch_bounds__(MOE_REPL_THREADS)
    sl_moe_dispatch_replicated(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids,
                               int num_tokens, int num_experts, int expert_begin, int expert_end, int capacity,
                               void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                               int *__restrict__ expert_counts, int *__restrict__ slots,
                               sl_grid_barrier_state_t *state
#if MOE_ROUTE
                               ,
                               const void *__restrict__ logits, const float *__restrict__ bias,
                               int *__restrict__ ids_out, float *__restrict__ weights_out, int renormalize,
                               float scaling
#endif
) {
#if MOE_REPL_RANK == 1
  constexpr int NT = MOE_REPL_THREADS, NW = MOE_REPL_WARPS;
  constexpr int ROUNDS = (SL_MOE_REPL_MAX_PAIRS + NT - 1) / NT; // the last round guarded by id_end
  __shared__ int below[MOE_LOCAL];
  // Whole 16-byte groups: HistRank reads repl_win_groups() of them unconditionally (entries past n are masked,
  // but must lie inside the array: at K=1 and one warp the window is one pair; memcheck, session 23).
  __shared__ __align__(16) int win[(MOE_REPL_NEED + 3) / 4 * 4];
  static_assert(4 * repl_win_groups() <= (MOE_REPL_NEED + 3) / 4 * 4, "the window scan stays inside win");
  const int num_pairs = num_tokens * MOE_TOPK; // <= SL_MOE_REPL_MAX_PAIRS (host)
  // Items fit int here: T * K <= 1024, so T * chunks < 2^31.
  const int num_items = num_tokens * MOE_CHUNKS;
  const int item = (int)blockIdx.x * NW + (int)threadIdx.x / 32;
  // This warp's item does not depend on the routing: its loads go first, then the ids. (Ids
  // first measured no better: ptxas then put the ids' validation ahead of the x loads, which
  // waited for the ids -- two memory latencies in a row.)
  ItemInput in;
  MOE_REPL_START();
  const bool counts_block = blockIdx.x == gridDim.x - 1;
  // The block's tokens [t0, t1] and its pairs [q0, q0 + n), n <= MOE_REPL_NEED.
  const int first = (int)blockIdx.x * NW;
  const int last = min(first + NW, num_items) - 1;
  const int t0 = first / MOE_CHUNKS, t1 = last / MOE_CHUNKS;
  const int q0 = t0 * MOE_TOPK, n = (t1 - t0 + 1) * MOE_TOPK;
  // Ids a block needs: those below the end of its window (half of all on average: L2 reads
  // of 448 blocks x 4 KB at DSv3 T=128 were ~10 % of the kernel's sectors). The last block
  // reads and validates all of them before it records capacity errors. A bf16 copy records
  // no copy-time error, so a range error of a later pair, recorded by the last block (or
  // another), still precedes every other error; a quantized payload can record a numeric
  // error while copying, so there every block validates every id first, as before.
  const int id_end = (MOE_PAYLOAD >= 0 || counts_block) ? num_pairs : q0 + n;
  int idv[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = r * NT + threadIdx.x;
    idv[r] = p < id_end ? MOE_REPL_ID(p) : 0;
  }
  hist_rank_stage<NT, ROUNDS>(idv, id_end, q0, n, num_experts, expert_begin, expert_end, state, below, win);
  if (item < num_items)
    copy_item(item, 1, MOE_CHUNKS, in, x, num_experts, expert_begin, expert_end, capacity, expert_x,
              expert_scales, global_scale, &state->error, slots, HistRank<repl_win_groups()>{below, win, q0});
  if (counts_block) hist_counts<NT>(n, capacity, expert_begin, expert_counts, state, below, win);
#else
  constexpr int NT = MOE_REPL_THREADS, NW = MOE_REPL_WARPS; // 8 (checked above)
  __shared__ __align__(16) int ids_s[SL_MOE_REPL_MAX_PAIRS]; // local expert of each pair, or -1
  __shared__ int rank_s[MOE_REPL_NEED];
  __shared__ int hist[MOE_LOCAL]; // last block only
  const int num_pairs = num_tokens * MOE_TOPK; // <= SL_MOE_REPL_MAX_PAIRS (host)
  const long num_items = (long)num_tokens * MOE_CHUNKS;
  const long item = (long)blockIdx.x * NW + threadIdx.x / 32;
  // This warp's item does not depend on the routing: its loads go first.
  ItemInput in;
  MOE_REPL_START();
  const bool counts_block = blockIdx.x == gridDim.x - 1;
  if (counts_block)
    for (int e = threadIdx.x; e < MOE_LOCAL; e += NT) hist[e] = 0;
  // Stage the local expert ids, padded with -1 to a multiple of 4 (the 16-byte groups).
  // All loads first (one L2 latency, not one per round).
  constexpr int ROUNDS = SL_MOE_REPL_MAX_PAIRS / NT;
  static_assert(SL_MOE_REPL_MAX_PAIRS % NT == 0, "staging rounds");
  const int padded = (num_pairs + 3) & ~3;
  int idv[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = r * NT + threadIdx.x;
    idv[r] = p < num_pairs ? MOE_REPL_ID(p) : -1;
  }
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    const int p = r * NT + threadIdx.x;
    if (p >= padded) continue;
    int e = -1;
    if (p < num_pairs) {
      const int id = idv[r];
      if (id < 0 || id >= num_experts)
        sl_dev_error_record(&state->error, SL_DEV_ERR_RANGE, p / MOE_TOPK, id, num_experts);
      else
        e = sl_moe_local_expert(id, expert_begin, expert_end);
    }
    ids_s[p] = e;
  }
  __syncthreads();
  // The block's tokens [t0, t1] and needed pairs [q0, q0 + n).
  const long first = (long)blockIdx.x * NW;
  const long last = min(first + NW, num_items) - 1;
  const int t0 = (int)(first / MOE_CHUNKS), t1 = (int)(last / MOE_CHUNKS);
  const int q0 = t0 * MOE_TOPK, n = (t1 - t0 + 1) * MOE_TOPK; // n <= MOE_REPL_NEED <= NT
  int S = 32;                                                 // threads per needed pair: S * n <= NT
  while (S > 1 && S * n > NT) S >>= 1;
  {
    const int i = threadIdx.x / S, s = threadIdx.x % S;
    const int q = q0 + i;
    const int e = i < n ? ids_s[q] : -1;
    int cnt = 0;
    if (e >= 0) {
      const int4 *g4 = reinterpret_cast<const int4 *>(ids_s);
      const int full = q / 4; // groups entirely below q
#pragma unroll 4
      for (int g = s; g < full; g += S) {
        const int4 v = g4[g];
        cnt += (v.x == e) + (v.y == e) + (v.z == e) + (v.w == e);
      }
      if (s == full % S && (q & 3)) { // the group holding q: its pairs below q
        const int4 v = g4[full];
        cnt += (v.x == e) + ((q & 3) > 1 && v.y == e) + ((q & 3) > 2 && v.z == e);
      }
    }
    // Butterfly over the S lanes of this pair (aligned groups of a warp; every lane joins).
    for (int o = 1; o < 32; o <<= 1)
      if (o < S) cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
    if (s == 0 && i < n) rank_s[i] = cnt;
  }
  if (counts_block)
    for (int p = threadIdx.x; p < num_pairs; p += NT)
      if (ids_s[p] >= 0) atomicAdd(&hist[ids_s[p]], 1);
  __syncthreads();
  if (counts_block)
    for (int e = threadIdx.x; e < MOE_LOCAL; e += NT)
      finish_expert(e, hist[e], capacity, expert_begin, expert_counts, &state->error);
  if (item < num_items)
    copy_item(item, 1, MOE_CHUNKS, in, x, num_experts, expert_begin, expert_end, capacity, expert_x,
              expert_scales, global_scale, &state->error, slots, ReplicatedRank{rank_s, q0});
#endif
}
#endif // MOE_REPL_BAL
#undef MOE_REPL_START
#undef MOE_REPL_ID
#endif

#if MOE_KERNEL == 4
// The split path's copy for the quantized payloads, staged through shared memory (session 21).
// Why: the register copy (MOE_KERNEL 2) runs one warp per (token, 512-column chunk): every item
// pays its own prologue, its x loads and its routing lookups in a chain (two memory latencies
// before the first store), 2 x 8 code stores and 2 x 8 one-byte scale stores with their
// addresses -- ~500 instructions per item, and a warp holds only 1 KB of x in flight (Qwen3
// T=16384 mxfp4: 64 % of copy bandwidth, issue ~50 % busy, long-scoreboard stalls; session 18).
// Here each warp walks items of MOE_SEG columns of one token (grid-strided over a resident grid):
//  - lane 0 asks the bulk-copy engine for item k + MOE_STAGES's x segment into the warp's ring
//    as soon as item k's stage is read, so MOE_STAGES segments per warp are in flight without
//    holding a register;
//  - the warp quantizes the segment from shared memory with the same per-vector code as the
//    register copy (quantize_vec: bit-identical) into one of two output buffers, codes and
//    scales laid out as in the destination row;
//  - lanes k < K each store that buffer's codes to their pair's row with a bulk copy (the scales
//    by the lanes' 16-byte stores: MOE_STAGED_SCALE_ST below) and commit one bulk group per item,
//    so a buffer is rewritten only after its stores have read it (wait_group.read 1).
// The routing lookups of item k (pair_rank, offsets) are issued before its quantization and the
// ids of item k + 1 after its stores, so neither latency sits on the warp's chain. With PDL the
// first segment's loads and quantization run before griddepcontrol.wait (they read only inputs).
// Measured (H200, bench/results/2026-12-01-s21-h200-call{6,7}, T=16384 by events, register copy ->
// staged): Qwen3 fp8-g128 107.5 -> 104.7 us, mxfp8 107.2 -> 102.1, mxfp4 77.2 -> 69.3, nvfp4 78.4 -> 72.7;
// DSv3 mxfp4 241.8 -> 221.0, nvfp4 242.7 -> 234.8, FP8 equal (~348). The copy's end is then set by its
// store stream (~84-87 % of copy bandwidth once the routing is done; ending the routing sooner moved nothing).
// Needs (host: sl_moe_staged_applies): a quantized payload, MOE_HIDDEN % MOE_SEG == 0, MOE_SEG
// a multiple of 512 (every format's codes and scales of a segment are then whole 16-byte
// units), x / expert_x / expert_scales 16-byte aligned.
#if MOE_PAYLOAD < 0
#error "the staged copy quantizes: MOE_PAYLOAD must be an SL_QFMT_* format"
#endif
#ifndef MOE_SEG
#error "MOE_SEG (columns per staged item, a multiple of 512 dividing MOE_HIDDEN) must be defined by the JIT"
#endif
#ifndef MOE_STAGES
#error "MOE_STAGES (x segments in flight per warp, 2..4) must be defined by the JIT"
#endif
#if MOE_SEG % 512 != 0 || MOE_HIDDEN % MOE_SEG != 0 || MOE_STAGES < 2 || MOE_STAGES > 4
#error "staged copy: MOE_SEG must be a multiple of 512 dividing MOE_HIDDEN, MOE_STAGES 2..4"
#endif
#include "kernels/bulk_copy.cuh"
// MOE_STAGED_SCALE_ST (the host: 1 unless staged_scale_bulk): the scales go out by plain 16-byte stores from
// the lanes (lane i: piece i % P of row i / P, P = the item's scale bytes per row / 16; K x P <= 32 lanes
// at Qwen3 / DeepSeek-V3 sizes), not by one bulk copy per row -- an FP4 item of 1024 columns is 8 x 512
// bytes of codes and 8 x 32 of scales: half its bulk copies moved 6 % of its bytes. H200, session 22 call 6,
// T=16384 by events, bulk -> lanes: Qwen3 fp8-g128 106.5 -> 102.4 us, mxfp8 103.9 -> 102.5, mxfp4 69.9 ->
// 68.9, nvfp4 73.4 -> 72.6 (T=4096 -0.5..-1.0 us each); DeepSeek-V3 within +-1 % (mxfp4 225.3 / 226.8).
#ifndef MOE_STAGED_SCALE_ST
#define MOE_STAGED_SCALE_ST 1
#endif
#define MOE_SEGS (MOE_HIDDEN / MOE_SEG)                     // items per token
#define MOE_SEG_VECS (MOE_SEG / (32 * SL_MOE_VEC_ELEMS))   // 16-byte vectors per lane per item
#define MOE_SEG_IN (MOE_SEG * 2)                            // x bytes per item
#define MOE_SEG_CODES (MOE_QFP4 ? MOE_SEG / 2 : MOE_SEG)   // code bytes per item and row
#define MOE_SCALE_BYTES (MOE_PAYLOAD == SL_QFMT_FP8_GROUP ? 4 : 1)
#define MOE_SEG_SCALES (MOE_SEG / MOE_QBLOCK * MOE_SCALE_BYTES) // scale bytes per item and row
#define MOE_SEG_OUT (MOE_SEG_CODES + MOE_SEG_SCALES)
// Per warp: MOE_STAGES input segments, then two output buffers (codes, then scales).
#define MOE_STAGED_WARP_BYTES (MOE_STAGES * MOE_SEG_IN + 2 * MOE_SEG_OUT)
static_assert(MOE_SEG_CODES % 16 == 0 && MOE_SEG_SCALES % 16 == 0 && MOE_SEG_IN % 16 == 0, "16-byte units");

extern "C" __global__ void __launch_bounds__(SL_MOE_STAGED_THREADS)
    sl_moe_dispatch_copy_staged(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids,
                                int num_tokens, int num_experts, int expert_begin, int expert_end, int capacity,
                                void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                                int *__restrict__ slots, const int *offsets, const int *pair_rank,
                                sl_grid_barrier_state_t *state, int route_shift, unsigned long long timeout_ns) {
  constexpr int NW = SL_MOE_STAGED_THREADS / 32;
  extern __shared__ __align__(128) unsigned char staged_smem[];
  __shared__ __align__(8) unsigned long long bars[NW][MOE_STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char *mine = staged_smem + warp * MOE_STAGED_WARP_BYTES;
  const unsigned in0 = sl_bulk_smem_addr(mine), out0 = in0 + MOE_STAGES * MOE_SEG_IN;
  const long num_items = (long)num_tokens * MOE_SEGS;
  const long stride = (long)gridDim.x * NW;
  const long first = (long)blockIdx.x * NW + warp;
  if (first >= num_items) return;
  if (lane == 0) {
    for (int s = 0; s < MOE_STAGES; s++) sl_bulk_mbar_init(sl_bulk_smem_addr(&bars[warp][s]), 1);
    sl_bulk_mbar_init_fence();
    for (int s = 0; s < MOE_STAGES; s++) {
      const long it = first + s * stride;
      if (it >= num_items) break;
      const unsigned bar = sl_bulk_smem_addr(&bars[warp][s]);
      sl_bulk_arrive_expect_tx(bar, MOE_SEG_IN);
      sl_bulk_copy(in0 + s * MOE_SEG_IN, x + it * MOE_SEG, MOE_SEG_IN, bar);
    }
  }
  __syncwarp();
  sl_dev_error_t *err = &state->error;
  // Pair (t, lane)'s expert id for the warp's first item (an input: loaded before the wait).
  int id = lane < MOE_TOPK ? topk_ids[(first / MOE_SEGS) * MOE_TOPK + lane] : -1;
  bool waited = false;
  int k = 0;
  for (long item = first; item < num_items; item += stride, k++) {
    const int t = (int)(item / MOE_SEGS), seg = (int)(item % MOE_SEGS);
    const int p = t * MOE_TOPK + lane;
    // Local expert and routing lookups (after the wait: the routing kernel's outputs).
    const int e = lane < MOE_TOPK && id >= 0 && id < num_experts ? sl_moe_local_expert(id, expert_begin, expert_end)
                                                                : -1;
    int rank_in_block = 0, block_off = 0;
    if (waited && e >= 0) {
      rank_in_block = __ldcg(&pair_rank[p]);
      block_off = __ldcg(&offsets[(p >> route_shift) * MOE_LOCAL + e]);
    }
    // This item's x segment (bounded wait: a stalled copy engine is reported, not waited on forever;
    // the warp decides together, so no lane leaves while the others go on to __syncwarp).
    const int stage = k % MOE_STAGES;
    const unsigned bar = sl_bulk_smem_addr(&bars[warp][stage]), parity = (unsigned)(k / MOE_STAGES) & 1u;
    bool landed = sl_bulk_try_wait(bar, parity);
    if (!__all_sync(0xffffffffu, landed)) {
      const unsigned long long start = sl_grid_globaltimer_ns();
      while (!__all_sync(0xffffffffu, landed = landed || sl_bulk_try_wait(bar, parity)))
        if (__any_sync(0xffffffffu, sl_grid_globaltimer_ns() - start > timeout_ns)) {
          if (lane == 0) sl_dev_error_record(err, SL_DEV_ERR_PIPE_TIMEOUT, (int)blockIdx.x, warp, k);
          sl_bulk_wait_all();
          return;
        }
    }
    // Output buffer k & 1: free once the stores of item k - 2 have read it.
    sl_bulk_wait_read_1();
    __syncwarp();
    const unsigned ob = out0 + (k & 1) * MOE_SEG_OUT;
    unsigned char *obp = mine + MOE_STAGES * MOE_SEG_IN + (k & 1) * MOE_SEG_OUT;
    const uint4 *in = reinterpret_cast<const uint4 *>(mine + stage * MOE_SEG_IN);
    int bad_block = -1; // this lane's first non-finite block of the item (its column / block)
#pragma unroll
    for (int v = 0; v < MOE_SEG_VECS; v++)
      quantize_into_row(in[v * 32 + lane], v * 32 + lane, seg * MOE_SEG, MOE_SEG_CODES, global_scale, obp, bad_block);
    __syncwarp(); // every lane has read the stage: lane 0 refills it
    if (lane == 0 && item + MOE_STAGES * stride < num_items) {
      sl_bulk_arrive_expect_tx(bar, MOE_SEG_IN);
      sl_bulk_copy(in0 + stage * MOE_SEG_IN, x + (item + MOE_STAGES * stride) * MOE_SEG, MOE_SEG_IN, bar);
    }
    if (!waited) { // first item: the routing grid's outputs from here on
      sl_moe_pdl_wait();
      waited = true;
      if (e >= 0) {
        rank_in_block = __ldcg(&pair_rank[p]);
        block_off = __ldcg(&offsets[(p >> route_shift) * MOE_LOCAL + e]);
      }
    }
    int row = -1;
    if (e >= 0) {
      const int rank = rank_in_block + block_off;
      if (rank < capacity) row = (int)sl_moe_row(e, rank, capacity);
    }
    if (lane < MOE_TOPK && seg == 0) slots[p] = row;
    // A token with no row here is not reported (as the register copy and the CPU reference).
    if (__any_sync(0xffffffffu, row >= 0) && bad_block >= 0)
      sl_dev_error_record(err, SL_DEV_ERR_NUMERIC, t, bad_block, MOE_QBLOCK);
    sl_bulk_fence_smem_writes();
    __syncwarp();
    if (lane < MOE_TOPK) {
      if (row >= 0) {
        unsigned char *cd = static_cast<unsigned char *>(expert_x) + (size_t)(unsigned)row * MOE_ROW_BYTES +
                            (size_t)seg * MOE_SEG_CODES;
        sl_bulk_store(cd, ob, MOE_SEG_CODES);
#if !MOE_STAGED_SCALE_ST
        unsigned char *sd = static_cast<unsigned char *>(expert_scales) +
                            (size_t)(unsigned)row * (MOE_HIDDEN / MOE_QBLOCK * MOE_SCALE_BYTES) +
                            (size_t)seg * MOE_SEG_SCALES;
        sl_bulk_store(sd, ob + MOE_SEG_CODES, MOE_SEG_SCALES);
#endif
      }
      sl_bulk_commit(); // one group per item in every lane < K (empty without a row)
    }
#if MOE_STAGED_SCALE_ST
    // The scales by plain 16-byte stores: lane i takes piece i % PIECES of row i / PIECES.
    {
      constexpr int PIECES = MOE_SEG_SCALES / 16;
#pragma unroll
      for (int i0 = 0; i0 < MOE_TOPK * PIECES; i0 += 32) {
        const int i = i0 + lane, kk = min(i / PIECES, MOE_TOPK - 1), j = i % PIECES;
        const int r = __shfl_sync(0xffffffffu, row, kk);
        if (i < MOE_TOPK * PIECES && r >= 0) {
          const uint4 v = reinterpret_cast<const uint4 *>(obp + MOE_SEG_CODES)[j];
          *reinterpret_cast<uint4 *>(static_cast<unsigned char *>(expert_scales) +
                                     (size_t)(unsigned)r * (MOE_HIDDEN / MOE_QBLOCK * MOE_SCALE_BYTES) +
                                     (size_t)seg * MOE_SEG_SCALES + j * 16) = v;
        }
      }
    }
#endif
    // The next item's ids (an input), in flight during the next wait.
    const long next = item + stride;
    if (lane < MOE_TOPK && next < num_items) id = topk_ids[(next / MOE_SEGS) * MOE_TOPK + lane];
  }
  sl_bulk_wait_all(); // the shared memory stays until every store has completed
}
#endif

#if MOE_KERNEL == 5
// The split path's copy of the FP4 payloads through registers (session 23; the staged copy's twin).
// Why: bench/probes/scatter_bw.cu measured the floor of the scattered writes -- a kernel that reads x and stores
// the K rows to given destinations, nothing else. With the real encoder in registers (its "quantized" rows)
// that walk stays at the floor for FP4 (Qwen3 T=16384 mxfp4 59.2-59.6 us, floor 59.3), while the staged copy
// plus routing ran 65.2 us (DeepSeek-V3 223 vs a 204 us floor): the staged copy is 9-10 % over the floor on FP4,
// ~1.5 % on FP8. Shape (the probe's): each warp of a resident grid walks items of SL_MOE_DIRECT_SEG (1024)
// columns of one token, two items' x in flight (lane vector j * 32 + lane: every load instruction is 512
// contiguous bytes; streaming loads, x is read once). Each item is quantized by the same quantize_vec
// (bit-identical) into the warp's shared row buffer laid out as the destination row (codes, then scales), read
// back as 16-byte pieces and stored to the K rows by plain 16-byte stores (FP4: one per lane per row); the scales
// by the lanes' 16-byte pieces as in the staged copy. With PDL the first item's loads and quantization run
// before griddepcontrol.wait; the routing lookups of both items in flight go out together after it.
// Measured in the dispatch (H200, bench/results/2026-12-01-s23-h200-call{7,8}, T=16384 by events, direct /
// staged): DeepSeek-V3 mxfp4 221.9-222.2 / 225.8-226.6 us, nvfp4 233.6-234.2 / 238.6-238.7 -- its stream is the
// faster; but Qwen3 mxfp4 69.9-70.3 / 68.8-69.1, DeepSeek-V3 T=4096 mxfp4 61.7 / 58.8: with two items per warp in
// flight it starts worse after the routing than the staged copy with three prefetched; FP8 slower everywhere
// (Qwen3 fp8-g128 108.0 / 102.4). So the host took it for FP4 on long streams only; since its later rounds are
// claimed (session 26, below) it runs every quantized payload on long streams (sl_moe_split_copy).
// Needs (host: sl_moe_direct_applies): a quantized payload, MOE_HIDDEN a multiple of 1024, x / expert_x /
// expert_scales 16-byte aligned.
#if MOE_PAYLOAD < 0
#error "the direct copy quantizes: MOE_PAYLOAD must be an SL_QFMT_* format"
#endif
#if MOE_HIDDEN % SL_MOE_DIRECT_SEG != 0
#error "the direct copy needs MOE_HIDDEN a multiple of SL_MOE_DIRECT_SEG"
#endif
#ifndef SL_MOE_DIRECT_PF_PASSES
#define SL_MOE_DIRECT_PF_PASSES 1 // passes of x prefetched to L2 before the routing wait (above)
#endif
#define MOE_DSEGS (MOE_HIDDEN / SL_MOE_DIRECT_SEG)                 // items per token
#define MOE_DVECS (SL_MOE_DIRECT_SEG / (32 * SL_MOE_VEC_ELEMS))   // 16-byte x vectors per lane per item
#define MOE_DCODES (MOE_QFP4 ? SL_MOE_DIRECT_SEG / 2 : SL_MOE_DIRECT_SEG) // code bytes per item and row
#define MOE_DPIECES (MOE_DCODES / 512)                            // 16-byte code pieces per lane per row
#define MOE_DSCALE_BYTES (MOE_PAYLOAD == SL_QFMT_FP8_GROUP ? 4 : 1)
#define MOE_DSCALES (SL_MOE_DIRECT_SEG / MOE_QBLOCK * MOE_DSCALE_BYTES) // scale bytes per item and row
static_assert(MOE_DCODES % 512 == 0 && MOE_DSCALES % 16 == 0, "whole 16-byte pieces per lane");

// Item it's routing lookups (after griddepcontrol.wait): lane k < K's pair rank within its routing block and that
// block's offset for its expert e (e < 0: no row here).
struct DirectRoute {
  int e, rank_in_block, block_off;
};
__device__ __forceinline__ void direct_lookup(DirectRoute &r, long item, long num_items, const int *pair_rank,
                                              const int *offsets, int route_shift) {
  r.rank_in_block = r.block_off = 0;
  if (item < num_items && r.e >= 0) {
    const int p = (int)(item / MOE_DSEGS) * MOE_TOPK + (int)(threadIdx.x % 32);
    r.rank_in_block = __ldcg(&pair_rank[p]);
    r.block_off = __ldcg(&offsets[(p >> route_shift) * MOE_LOCAL + r.e]);
  }
}
// Quantize one item's vectors into the warp's row buffer b (codes, then scales); returns the lane's first
// non-finite block (its index in the row), or -1.
__device__ __forceinline__ int direct_quantize(const uint4 (&v)[MOE_DVECS], int seg, float global_scale,
                                               unsigned char *b) {
  const int lane = threadIdx.x % 32;
  int bad_block = -1;
#pragma unroll
  for (int j = 0; j < MOE_DVECS; j++)
    quantize_into_row(v[j], j * 32 + lane, seg * SL_MOE_DIRECT_SEG, MOE_DCODES, global_scale, b, bad_block);
  return bad_block;
}

extern "C" __global__ void __launch_bounds__(SL_MOE_DIRECT_THREADS)
    sl_moe_dispatch_copy_direct(const __nv_bfloat16 *__restrict__ x, const int *__restrict__ topk_ids,
                                int num_tokens, int num_experts, int expert_begin, int expert_end, int capacity,
                                void *__restrict__ expert_x, void *__restrict__ expert_scales, float global_scale,
                                int *__restrict__ slots, const int *offsets, const int *pair_rank,
                                sl_grid_barrier_state_t *state, int route_shift, unsigned *claims) {
  constexpr int NW = SL_MOE_DIRECT_THREADS / 32;
  __shared__ __align__(16) unsigned char rowbuf[NW][MOE_DCODES + MOE_DSCALES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char *b = rowbuf[warp];
  const long num_items = (long)num_tokens * MOE_DSEGS;
  const long stride = (long)gridDim.x * NW;
  sl_dev_error_t *err = &state->error;
  bool waited = false;
  // Which items a warp takes. Round 0 is static: items w and w + stride (w: the warp's index in the grid), so
  // every warp has x to load and quantize before the routing wait. Later rounds are claimed: claim c on counter
  // j = w % NC (atomics the routing's last block zeroed) is pair q = c * NC + j, items 2 * stride + 2q and the
  // next one. Why: the routing blocks launch first and hold registers on their SMs, so a third of this grid's
  // blocks (DeepSeek-V3: 64 routing blocks; Qwen3: 128) cannot start until the routing ends; with a static walk
  // those blocks ended ~10 us after the rest. A warp claims its next round one round ahead (lane 0, after the
  // wait), so the atomic's round trip is under the current round's stores; NC counters on separate lines keep
  // the claims from queueing on one L2 slice (right after the wait every resident warp claims at once).
  // H200, T=16384 by events (bench/results/2026-12-01-s26-h200-call{2..4}): DeepSeek-V3 nvfp4 226.1-226.8 us
  // static (call 2) -> 224.4-224.6 one counter (call 3) -> 221.9-222.1 eight counters (call 4; one counter in
  // the same run 226.4-226.5), mxfp4 214.8-215.7 -> 213.9-214.1 -> 208.8-208.9; the forced direct copy of
  // DeepSeek-V3 fp8-g128 338.7-339.5 (the staged copy 345.9-346.0), so FP8 takes it too (sl_moe_split_copy).
  constexpr int NC = SL_MOE_CLAIM_COUNTERS;
  static_assert(NW >= NC, "every counter needs a warp in every block: a counter nobody claims from loses its items");
  const int cj = (int)(((long)blockIdx.x * NW + warp) % NC);
  unsigned *claim = claims + cj * SL_MOE_CLAIM_STRIDE;
  unsigned next = 0;
  for (long item = (long)blockIdx.x * NW + warp, item2 = item + stride; item < num_items;) {
    const long its[2] = {item, item2};
    if (waited && lane == 0) next = atomicAdd(claim, 1u);
    uint4 v[2][MOE_DVECS];
    DirectRoute rt[2];
#pragma unroll
    for (int u = 0; u < 2; u++) {
      const bool live = its[u] < num_items;
      const int t = (int)(its[u] / MOE_DSEGS), seg = (int)(its[u] % MOE_DSEGS);
      const uint4 *src = reinterpret_cast<const uint4 *>(x + (long)t * MOE_HIDDEN + seg * SL_MOE_DIRECT_SEG) + lane;
#pragma unroll
      for (int j = 0; j < MOE_DVECS; j++) v[u][j] = live ? __ldcs(src + 32 * j) : make_uint4(0u, 0u, 0u, 0u);
      const int id = live && lane < MOE_TOPK ? topk_ids[t * MOE_TOPK + lane] : -1;
      rt[u].e = id >= 0 && id < num_experts ? sl_moe_local_expert(id, expert_begin, expert_end) : -1;
    }
    if (waited) {
#pragma unroll
      for (int u = 0; u < 2; u++) direct_lookup(rt[u], its[u], num_items, pair_rank, offsets, route_shift);
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (its[u] >= num_items) break;
      const int t = (int)(its[u] / MOE_DSEGS), seg = (int)(its[u] % MOE_DSEGS);
      __syncwarp(); // the previous item's stores have read the buffer
      const int bad_block = direct_quantize(v[u], seg, global_scale, b);
      if (!waited) { // the first item is quantized: the routing grid's outputs from here on
        // Before the wait, the x of the warp's next SL_MOE_DIRECT_PF_PASSES passes goes to L2 (prefetch.global.L2,
        // a 128-byte line per lane): HBM reads while the copy cannot store yet (the routing is not done; at
        // DeepSeek-V3 T=16384 the copy alone runs at the scatter floor and the routing's ~11 us were all exposed).
        // H200, session 24 call 5, DSv3 T=16384 by events, 0 / 1 / 2 passes: mxfp4 222.4-222.5 / 220.4 / 222.1 us,
        // nvfp4 233.1-233.4 / 230.9-231.6 / 232.3 -- two passes slow the routing more than they save.
#pragma unroll
        for (int w = 2; w < 2 + 2 * SL_MOE_DIRECT_PF_PASSES; w++) {
          const long it2 = item + w * stride;
          if (it2 < num_items && lane < SL_MOE_DIRECT_SEG * 2 / 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char *>(
                x + (it2 / MOE_DSEGS) * MOE_HIDDEN + (it2 % MOE_DSEGS) * SL_MOE_DIRECT_SEG) + lane * 128));
        }
        sl_moe_pdl_wait();
        waited = true;
        if (lane == 0) next = atomicAdd(claim, 1u);
#pragma unroll
        for (int w = 0; w < 2; w++) direct_lookup(rt[w], its[w], num_items, pair_rank, offsets, route_shift);
      }
      int row = -1;
      if (rt[u].e >= 0) {
        const int rank = rt[u].rank_in_block + rt[u].block_off;
        if (rank < capacity) row = (int)sl_moe_row(rt[u].e, rank, capacity);
      }
      if (lane < MOE_TOPK && seg == 0) slots[t * MOE_TOPK + lane] = row;
      // A token with no row here is not reported (as the other copies and the CPU reference).
      if (__any_sync(0xffffffffu, row >= 0) && bad_block >= 0)
        sl_dev_error_record(err, SL_DEV_ERR_NUMERIC, t, bad_block, MOE_QBLOCK);
      __syncwarp(); // the buffer is written
      uint4 codes[MOE_DPIECES];
#pragma unroll
      for (int j = 0; j < MOE_DPIECES; j++) codes[j] = reinterpret_cast<const uint4 *>(b)[j * 32 + lane];
      unsigned char *cbase = static_cast<unsigned char *>(expert_x) + (size_t)seg * MOE_DCODES + (size_t)lane * 16;
#pragma unroll
      for (int k = 0; k < MOE_TOPK; k++) {
        const int r = __shfl_sync(0xffffffffu, row, k);
        if (r < 0) continue;
        uint4 *dst = reinterpret_cast<uint4 *>(cbase + (size_t)(unsigned)r * MOE_ROW_BYTES);
#pragma unroll
        for (int j = 0; j < MOE_DPIECES; j++) dst[j * 32] = codes[j];
      }
      // The scales by 16-byte pieces: lane i takes piece i % PIECES of row i / PIECES.
      constexpr int PIECES = MOE_DSCALES / 16;
#pragma unroll
      for (int i0 = 0; i0 < MOE_TOPK * PIECES; i0 += 32) {
        const int i = i0 + lane, kk = min(i / PIECES, MOE_TOPK - 1), j = i % PIECES;
        const int r = __shfl_sync(0xffffffffu, row, kk);
        if (i < MOE_TOPK * PIECES && r >= 0)
          *reinterpret_cast<uint4 *>(static_cast<unsigned char *>(expert_scales) +
                                     (size_t)(unsigned)r * (MOE_HIDDEN / MOE_QBLOCK * MOE_DSCALE_BYTES) +
                                     (size_t)seg * MOE_DSCALES + j * 16) =
              reinterpret_cast<const uint4 *>(b + MOE_DCODES)[j];
      }
    }
    item = 2 * stride + 2 * ((long)__shfl_sync(0xffffffffu, next, 0) * NC + cj);
    item2 = item + 1;
  }
}
#endif
