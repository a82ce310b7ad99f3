/* MoE local layout: index math shared by the CPU reference (.c) and the kernels (.cu), so
 * the two cannot drift. Expert-major buffers [E_local, capacity, H]: the row of slot s of
 * local expert e is e * capacity + s. The slot of every (token, k) pair is that row, or -1
 * when the pair was not dispatched (expert outside [expert_begin, expert_end), invalid id,
 * or over capacity). Within an expert, slots follow the pair order t * K + k on every path
 * and backend (deterministic: the GPU output equals the CPU reference bit for bit). */
#ifndef SL_MOE_LAYOUT_H
#define SL_MOE_LAYOUT_H

#ifndef __CUDACC_RTC__
#include <stddef.h>
#include <stdint.h>
#endif

#include "kernels/grid_barrier.h"

/* Launch shapes fixed by the protocol (the workspace is sized from them). */
#define SL_MOE_FUSED_THREADS 256  /* decode: one cooperative kernel; 256 pairs routed per block */
#define SL_MOE_FUSED_MAX_WAVES 4  /* fused while copy blocks (8 warps, unroll 1) <= this x SMs */
#define SL_MOE_REPL_MAX_PAIRS 1024 /* replicated routing (every block ranks all pairs) up to T*K */
#define SL_MOE_TOPK_FUSED_MAX_TOKENS 16 /* replicated dispatch computing the top-k itself: up to T */
#define SL_MOE_ROUTE_THREADS 512  /* prefill routing kernel */
#define SL_MOE_ROUTE_MAX_ROUNDS 8 /* pairs per thread of the prefill routing kernel: 1, 2, 4 or 8
                                   * (host choice or force_route_rounds); 512 x rounds per block */
#define SL_MOE_COPY_THREADS 256   /* prefill copy and combine: 8 warps per block */
#define SL_MOE_STAGED_THREADS 128 /* prefill copy of the quantized payloads staged in shared memory */
#define SL_MOE_DIRECT_THREADS 256 /* prefill copy of the FP4 payloads through registers */
#define SL_MOE_DIRECT_SEG 1024    /* its columns per item */
#define SL_MOE_VEC_ELEMS 8        /* bf16 elements per 16-byte vector */
#define SL_MOE_MAX_TOPK 32        /* one lane per k in the copy and combine warps */
#define SL_MOE_MAX_LOCAL_EXPERTS 512 /* route shared memory: warps x E_local ints */

static inline int sl_moe_cdiv(long a, long b) { return (int)((a + b - 1) / b); }

/* Rows of one warp work item: 32 lanes x 8 elements x unroll. */
static inline int sl_moe_chunk_elems(int unroll) { return 32 * SL_MOE_VEC_ELEMS * unroll; }
static inline int sl_moe_chunks_per_row(int hidden, int unroll) {
  return sl_moe_cdiv(hidden, sl_moe_chunk_elems(unroll));
}

/* Row of `slot` of local expert `e` in the expert-major buffer. */
static inline long sl_moe_row(int local_expert, int slot, int capacity) {
  return (long)local_expert * capacity + slot;
}

/* Dropless capacity: a token picks an expert at most once (the router returns K distinct
 * experts), so an expert never receives more than the tokens of one call. */
static inline int sl_moe_dropless_capacity(int max_tokens) { return max_tokens > 0 ? max_tokens : 1; }

/* Workspace of dispatch (device memory, zeroed once at creation):
 *   [0, 32)            sl_grid_barrier_state_t: barrier word + device error record
 *   [32, 36)           route-done counter (prefill: the last routing block finalises)
 *   [256, 1280)        the direct copy's SL_MOE_CLAIM_COUNTERS claim counters, one per 128-byte line (prefill;
 *                      the last routing block zeroes them)
 *   counts  [R, E_local] int32: pairs per (routing block, expert)
 *   offsets [R, E_local] int32: exclusive prefix of counts over blocks (prefill)
 *   pair_rank [T*K] int32: rank of a pair within its routing block's pairs of that expert
 * R is the largest number of routing blocks of either path. */
#define SL_MOE_WS_DONE_OFFSET 32
#define SL_MOE_WS_CLAIMS_OFFSET 256
#define SL_MOE_CLAIM_COUNTERS 8   /* the direct copy's claim counters ... */
#define SL_MOE_CLAIM_STRIDE 32    /* ... SL_MOE_CLAIM_STRIDE words (128 bytes) apart */
#define SL_MOE_WS_HEADER_BYTES (SL_MOE_WS_CLAIMS_OFFSET + SL_MOE_CLAIM_COUNTERS * SL_MOE_CLAIM_STRIDE * 4) /* 1280 */
typedef struct {
  size_t counts, offsets, pair_rank, total;
  int max_route_blocks;
} sl_moe_ws_layout_t;

static inline sl_moe_ws_layout_t sl_moe_ws_layout(int max_tokens, int top_k, int num_local) {
  sl_moe_ws_layout_t l;
  long pairs = (long)(max_tokens > 0 ? max_tokens : 1) * top_k;
  l.max_route_blocks = sl_moe_cdiv(pairs, SL_MOE_FUSED_THREADS);
  size_t counts_bytes = (size_t)l.max_route_blocks * (size_t)num_local * 4u;
  l.counts = SL_MOE_WS_HEADER_BYTES;
  l.offsets = l.counts + ((counts_bytes + 255u) & ~(size_t)255u);
  l.pair_rank = l.offsets + ((counts_bytes + 255u) & ~(size_t)255u);
  l.total = l.pair_rank + (((size_t)pairs * 4u + 255u) & ~(size_t)255u);
  return l;
}

/* Balanced replicated dispatch (opt-in, sl_moe_dispatch_args_t.force_repl_balance): a grid of
 * G blocks where block b copies the contiguous (token, chunk) items
 * [sl_moe_bal_begin(b), sl_moe_bal_begin(b + 1)) of all `items` (T x chunks per row): every
 * item exactly once, block sizes floor or ceil of items / G (equal bytes per block within one
 * item). The kernel's window holds the pairs of at most `warps` tokens per block (the tokens
 * [first item's, last item's]); sl_moe_bal_grid picks G = min(blocks_per_sm x SMs, the plain
 * grid of one item per warp), raised until every block's range spans <= `warps` tokens (at
 * the plain grid a range is <= `warps` items, so this ends there at the latest). */
static inline long sl_moe_bal_begin(long block, long items, long grid) { return block * items / grid; }
/* Most tokens a range of `len` >= 1 contiguous items can touch with `chunks` items per token. */
static inline long sl_moe_bal_span_tokens(long len, int chunks) { return (len - 1 + chunks - 1) / chunks + 1; }
static inline int sl_moe_bal_grid(long items, int chunks, int warps, int blocks_per_sm, int num_sms) {
  if (items <= 0) return 0;
  const long plain = (items + warps - 1) / warps;
  long g = (long)blocks_per_sm * num_sms;
  if (g > plain) g = plain;
  if (g < 1) g = 1;
  while (g < plain && sl_moe_bal_span_tokens((items + g - 1) / g, chunks) > warps) g++;
  return (int)g;
}

/* Which local expert a global id maps to: -1 outside [begin, end) (skipped, no error). */
static inline int sl_moe_local_expert(int id, int expert_begin, int expert_end) {
  return (id >= expert_begin && id < expert_end) ? id - expert_begin : -1;
}

#endif
