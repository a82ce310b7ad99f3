/* MoE dispatch host side: path choice, JIT specs, launches, and the CPU reference.
 *
 * Configuration choice:
 *  - Work item = one warp copying (token, chunk) where a chunk is 32 lanes x 16 bytes x
 *    unroll; the token's 16-byte vectors are loaded once and stored K times, so x is read
 *    once. Decode uses unroll 1 (more, smaller items spread over more SMs); prefill uses
 *    unroll 2 (two loads in flight per lane before the K stores).
 *  - Decode, T*K <= SL_MOE_REPL_MAX_PAIRS (1024: T <= 128 at K=8): the replicated path, one
 *    plain launch of copy_blocks blocks (one item per warp) where every block stages all
 *    T*K ids in shared memory and ranks only the pairs of its own <= 8 tokens (rank = earlier
 *    pairs with the same expert: the same ranks as the other paths), then copies its items.
 *    H200 run 3: the fused path cost 3.8 us in a graph at T=1, of which the grid barrier is
 *    1.26 us and the global rank/count round trips after it another L2 latency or two.
 *    Issue #4: ranking all 1024 pairs in every block (4 warp-match rounds, 12 block
 *    barriers) was most of DSv3 T=128's 9.3 us; the per-block scan ranking (<= 16 LDS.128
 *    per thread, two barriers) measured 6.72 us. Now (default, SL_MOE_REPL_RANK_HIST) a
 *    block adds the pairs below its own window to a shared per-expert histogram (<= 4
 *    shared atomics per thread) and its k < K lanes count the few earlier window pairs;
 *    the scan stays selectable (force_repl_rank, bench row "replicated scan").
 *    DSv3 T=128 bf16 and quantized payloads take about the same time (6.6-7.2 us for 3.7
 *    to 14.7 MB written), so the per-block ranking work (448 blocks, 3.4 per SM), not the
 *    store drain, was the excess (kernels/NOTES.md).
 *    Warps per block (sl_moe_repl_warps, session 17): the largest of 8..4 dividing the row's
 *    256-column chunks, so every block copies chunks of one token and ranks one token's K
 *    pairs after the histogram. DeepSeek-V3 (28 chunks) takes 7 warps: T=128 kern 4.96-5.15 us
 *    vs 5.31-5.41 at 8 warps (whose blocks straddle two tokens), 5.18-5.31 at 4, 5.15 at 14,
 *    5.47 at 28 (bench rows "replicated wN"); 4.83-4.93 after the kernel's chain before its
 *    first store was shortened (kernels/NOTES.md, session 17). Quantized payloads quantize with
 *    the kernel library's fast exact rules (kernels/quant_dev.cuh): DSv3 T=128 3.8-4.5 us (was
 *    5.1-5.8).
 *    Opt-in comparison (force_repl_balance, bench rows "replicated bal TxB"): the balanced
 *    kernel, G = blocks-per-SM x SMs blocks (sl_moe_bal_grid) of 256 or 512 threads, block b
 *    copying the contiguous items [b*items/G, (b+1)*items/G). Measured slower at every shape
 *    (session 15: DSv3 T=128 5.86-7.52 us vs 5.38 for the plain kernel).
 *  - The split path's copy takes one 16-byte chunk per warp item by default (measured faster
 *    than whole rows per item at every prefill shape: see SPLIT_DEFAULT_SPAN); whole rows
 *    (a token's K rows computed once) stay selectable by force_span.
 *  - Otherwise DESIGN.md's rule, "does the copy fit in one resident wave": copy_blocks =
 *    items / 8 warps (unroll 1). If copy_blocks <= SL_MOE_FUSED_MAX_WAVES x SMs (and the
 *    routing fits in one 256-pair round per block), one cooperative launch (route, grid barrier, copy)
 *    with grid = min(copy_blocks, resident blocks, 2 per SM) and the copy grid-strided.
 *    The H200 run 3 showed why the bound is not "copy_blocks < SMs": DeepSeek-V3 at T=128
 *    (448 copy blocks) took the split path at 11.2 us in a graph, where the fused kernel
 *    needs barrier + one routing round + 16.5 MB of copy (3.9 us at copy bandwidth), and
 *    the split path's routing kernel (one 512-thread block for <= 4096 pairs, 8 rounds, then
 *    a ticket-ordered scan) plus a second launch cost more than the grid-stride loop.
 *    At 4 waves a warp copies <= 4 items (2 at 2 blocks per SM).
 *    Else a routing launch (512 threads x 1/2/4/8 pairs per block, the fewest rounds with
 *    routing blocks <= SMs and, with a resident copy, blocks x E_local <= 512 x 32:
 *    sl_moe_route_rounds; each warp ranks its own pairs without block barriers between
 *    rounds (session 25); the last block scans the per-block counts with all 512 threads)
 *    and a copy launch, launched with PDL: its warps issue their first item's x loads while
 *    the routing runs (split_no_pdl: off). The copy of the quantized payloads is the staged
 *    one where it applies (sl_moe_staged_applies: items of 2048, 1024
 *    or 512 columns, x brought into shared memory by the bulk-copy engine, quantized there,
 *    stored to the K rows by bulk copies, the scales by the lanes' stores; sessions 21-22), except
 *    on long streams (>= 16 items per 32 warps per SM: DeepSeek-V3 T=16384), which take the
 *    direct copy (items of 1024 columns through registers, two in flight; session 23; rounds after
 *    the first claimed from counters, session 26: sl_moe_split_copy); bf16 and the rest take the
 *    register copy (copy_blocks blocks, one (token, chunk) per warp).
 *    Session 22 measured the staged copy routing the pairs itself (one cooperative launch: rank,
 *    grid barrier, a parallel scan of the counts, grid barrier, copy) and removed it: 5-10 us
 *    slower than these two launches, its copy phase slower (bench/results/2026-12-01-s22-h200-
 *    call{1..5}, call5/fused-route.patch).
 *    The H200 ncu run put DSv3 T=16384's copy kernel at 574 us of the 587 us dispatch:
 *    ~12 us of routing + launch gap, 7 % of Qwen3's 180 us, the lever at Qwen3 size.
 *  - All paths rank the pairs of an expert in pair order (t * K + k): the slots, hence the
 *    expert buffers, are identical across paths and equal to the CPU reference. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_dispatch.h"
#include "kernels/quant.h"
#include "runtime/sl_config.h"

enum {
  DECODE_UNROLL = 1,
  PREFILL_UNROLL = 2,
  ENTRY_FUSED = 0,
  ENTRY_ROUTE = 1,
  ENTRY_COPY = 2,
  ENTRY_REPL = 3,
  ENTRY_STAGED = 4,
  ENTRY_DIRECT = 5
};
static const char *const entries[] = {"sl_moe_dispatch_fused",      "sl_moe_dispatch_route",
                                      "sl_moe_dispatch_copy",       "sl_moe_dispatch_replicated",
                                      "sl_moe_dispatch_copy_staged", "sl_moe_dispatch_copy_direct"};

const char *sl_moe_path_name(sl_moe_path_t p) {
  switch (p) {
  case SL_MOE_PATH_NONE: return "none";
  case SL_MOE_PATH_FUSED: return "fused-coop";
  case SL_MOE_PATH_SPLIT: return "route+copy";
  case SL_MOE_PATH_CPU: return "cpu";
  case SL_MOE_PATH_REPLICATED: return "replicated";
  }
  return "?";
}

const char *sl_moe_payload_name(sl_moe_payload_t p) {
  switch (p) {
  case SL_MOE_PAYLOAD_BF16: return "bf16";
  case SL_MOE_PAYLOAD_FP8_GROUP: return "fp8-g128";
  case SL_MOE_PAYLOAD_MXFP8: return "mxfp8";
  case SL_MOE_PAYLOAD_MXFP4: return "mxfp4";
  case SL_MOE_PAYLOAD_NVFP4: return "nvfp4";
  }
  return "?";
}

/* The quantizer's format of a payload (payload - 1), -1 for bf16. */
static int payload_qfmt(sl_moe_payload_t p) { return (int)p - 1; }

size_t sl_moe_payload_row_bytes(sl_moe_payload_t p, int hidden) {
  if (p == SL_MOE_PAYLOAD_BF16) return (size_t)hidden * 2;
  return sl_qfmt_is_fp4(payload_qfmt(p)) ? (size_t)hidden / 2 : (size_t)hidden;
}
int sl_moe_payload_scales_per_row(sl_moe_payload_t p, int hidden) {
  return p == SL_MOE_PAYLOAD_BF16 ? 0 : hidden / sl_qfmt_block(payload_qfmt(p));
}
size_t sl_moe_payload_scale_bytes(sl_moe_payload_t p) {
  return p == SL_MOE_PAYLOAD_BF16 ? 0 : p == SL_MOE_PAYLOAD_FP8_GROUP ? 4 : 1;
}

size_t sl_moe_dispatch_workspace_bytes(int max_tokens, int top_k, int num_local_experts) {
  return sl_moe_ws_layout(max_tokens, top_k, num_local_experts).total;
}

sl_status_t sl_moe_dispatch_workspace_init(sl_device_t *dev, void *workspace, size_t bytes, sl_stream_t *stream) {
  return sl_memset(dev, workspace, 0, bytes, stream);
}

static sl_status_t validate(const sl_moe_dispatch_args_t *a) {
  if (a->num_tokens < 0) return SL_ERR(SL_ERR_INVALID, "moe dispatch: num_tokens %d < 0", a->num_tokens);
  if (a->hidden <= 0 || a->hidden % 8)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: hidden %d must be a positive multiple of 8", a->hidden);
  if (a->top_k < 1 || a->top_k > SL_MOE_MAX_TOPK)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: top_k %d outside [1, %d]", a->top_k, SL_MOE_MAX_TOPK);
  int local = a->expert_end - a->expert_begin;
  if (a->num_experts < 1 || a->expert_begin < 0 || a->expert_end > a->num_experts || local < 1 ||
      local > SL_MOE_MAX_LOCAL_EXPERTS)
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: expert range [%d, %d) of %d experts: need 0 <= begin < end <= E and at most %d local "
                  "experts",
                  a->expert_begin, a->expert_end, a->num_experts, SL_MOE_MAX_LOCAL_EXPERTS);
  if (a->capacity < 1) return SL_ERR(SL_ERR_INVALID, "moe dispatch: capacity %d < 1", a->capacity);
  if (a->force_span < 0) return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_span %d < 0", a->force_span);
  const int rr = a->force_route_rounds;
  if (rr != 0 && rr != 1 && rr != 2 && rr != 4 && rr != 8)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_route_rounds %d is not 0 (default), 1, 2, 4 or 8", rr);
  if (a->split_no_pdl != 0 && a->split_no_pdl != 1)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: split_no_pdl %d is not 0 or 1", a->split_no_pdl);
  if (a->force_repl_rank < 0 || a->force_repl_rank > SL_MOE_REPL_RANK_SCAN)
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: force_repl_rank %d is not 0 (default), SL_MOE_REPL_RANK_HIST or "
                  "SL_MOE_REPL_RANK_SCAN",
                  a->force_repl_rank);
  if (a->force_repl_warps < 0 || a->force_repl_warps > 32)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_repl_warps %d is not 0 (host choice) or 1..32",
                  a->force_repl_warps);
  if (a->force_copy < 0 || a->force_copy > SL_MOE_COPY_DIRECT)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_copy %d is not 0 (host choice), SL_MOE_COPY_REGS, "
                  "SL_MOE_COPY_STAGED or SL_MOE_COPY_DIRECT", a->force_copy);
  if (a->force_staged_seg && (a->force_staged_seg < 0 || a->force_staged_seg % 512 || a->hidden % a->force_staged_seg))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_staged_seg %d is not 0 or a multiple of 512 dividing H %d",
                  a->force_staged_seg, a->hidden);
  if (a->force_staged_stages && (a->force_staged_stages < 2 || a->force_staged_stages > 4))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_staged_stages %d is not 0 or 2..4", a->force_staged_stages);
  if (a->staged_scale_bulk != 0 && a->staged_scale_bulk != 1)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: staged_scale_bulk %d is not 0 or 1", a->staged_scale_bulk);
  if (a->force_repl_warps && a->force_repl_warps != 8 && a->force_repl_rank == SL_MOE_REPL_RANK_SCAN)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: the scan ranking runs at 8 warps per block, not force_repl_warps %d",
                  a->force_repl_warps);
  if (a->force_repl_balance < 0 || a->force_repl_balance > SL_MOE_REPL_BAL_LAST)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: force_repl_balance %d is not 0 (off) or an SL_MOE_REPL_BAL_* (1..%d)",
                  a->force_repl_balance, SL_MOE_REPL_BAL_LAST);
  if (a->force_repl_balance && a->force_repl_rank == SL_MOE_REPL_RANK_SCAN)
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: the balanced replicated kernel (force_repl_balance %d) ranks with the histogram only: "
                  "leave force_repl_rank 0 or SL_MOE_REPL_RANK_HIST",
                  a->force_repl_balance);
  if ((int)a->payload < SL_MOE_PAYLOAD_BF16 || a->payload > SL_MOE_PAYLOAD_NVFP4)
    return SL_ERR(SL_ERR_UNSUPPORTED, "moe dispatch: payload %d unknown (bf16, fp8-g128, mxfp8, mxfp4, nvfp4)",
                  (int)a->payload);
  if (a->payload != SL_MOE_PAYLOAD_BF16) {
    const int block = sl_qfmt_block(payload_qfmt(a->payload));
    if (a->hidden % block)
      return SL_ERR(SL_ERR_INVALID, "moe dispatch: hidden %d is not a multiple of the %s scale block %d", a->hidden,
                    sl_moe_payload_name(a->payload), block);
    const bool fp8g = a->payload == SL_MOE_PAYLOAD_FP8_GROUP, nv = a->payload == SL_MOE_PAYLOAD_NVFP4;
    if (!nv && (fp8g ? (a->quant_rule != SL_QRULE_IEEE && a->quant_rule != SL_QRULE_CEIL)
                     : (a->quant_rule != SL_QRULE_CEIL && a->quant_rule != SL_QRULE_FLOOR)))
      return SL_ERR(SL_ERR_INVALID, "moe dispatch: scale rule %d not valid for %s (%s)", a->quant_rule,
                    sl_moe_payload_name(a->payload), fp8g ? "IEEE or CEIL" : "CEIL or FLOOR");
    if (nv && !(a->global_scale > 0.0f && a->global_scale < 3.0e38f))
      return SL_ERR(SL_ERR_INVALID, "moe dispatch: nvfp4 global_scale %g must be finite and > 0",
                    (double)a->global_scale);
    if (a->num_tokens > 0 && !a->expert_scales)
      return SL_ERR(SL_ERR_INVALID, "moe dispatch: %s payload needs expert_scales", sl_moe_payload_name(a->payload));
  }
  if (a->num_tokens > 0 && (!a->x || !a->topk_ids || !a->expert_x || !a->slots))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: NULL x, topk_ids, expert_x or slots");
  if (!a->expert_counts || !a->workspace) return SL_ERR(SL_ERR_INVALID, "moe dispatch: NULL expert_counts or workspace");
  size_t need = sl_moe_ws_layout(a->num_tokens, a->top_k, local).total;
  if (a->workspace_bytes < need)
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: workspace of %zu bytes is too small for %d tokens (%zu needed): size it with "
                  "sl_moe_dispatch_workspace_bytes(max_tokens, ...)",
                  a->workspace_bytes, a->num_tokens, need);
  return SL_OK;
}

int sl_moe_repl_warps(int hidden) {
  const int chunks = sl_moe_chunks_per_row(hidden, DECODE_UNROLL);
  for (int w = 8; w >= 4; w--)
    if (chunks % w == 0) return w;
  return 8;
}

/* The replicated kernel's ranking and warps per block (the spec variant) for these arguments. */
static int repl_variant(const sl_moe_dispatch_args_t *a) {
  return a->force_repl_rank | SL_MOE_REPL_WARPS(a->force_repl_warps);
}
/* Its grid: one item (token, chunk) per warp. */
static int repl_blocks(const sl_moe_dispatch_args_t *a, int warps) {
  return sl_moe_cdiv((long)a->num_tokens * sl_moe_chunks_per_row(a->hidden, DECODE_UNROLL), warps);
}
/* Warps per block of a replicated spec variant (validated by the spec). */
static int variant_warps(int hidden, int variant) {
  const int rank = variant & 0xf, warps = variant >> 4;
  return warps ? warps : rank == SL_MOE_REPL_RANK_SCAN ? 8 : sl_moe_repl_warps(hidden);
}

static int copy_blocks(const sl_moe_dispatch_args_t *a, int unroll) {
  long items = (long)a->num_tokens * sl_moe_chunks_per_row(a->hidden, unroll);
  return sl_moe_cdiv(items, SL_MOE_COPY_THREADS / 32);
}

/* Prefill copy: chunks per warp item. One chunk per item (span 1) by default: measured on the
 * H200 (2026-11-29, bench/results/2026-11-29-s2-h200-tune/) against whole rows per item (a
 * token's K destination rows computed once, next chunk's loads in flight during the K stores):
 * span 1 was faster at every prefill shape -- Qwen3 T=4096 59.5 vs 62.9 us, T=16384 182.5 vs
 * 186.0; DeepSeek-V3 T=4096 164.5 vs 178.9, T=16384 598.7 vs 673.4 (83.5 % vs 74.2 % of copy),
 * T=512 equal. More, smaller items keep more independent loads in flight across the grid than
 * one warp walking a 14 KB row. Whole rows stay available (force_span) for the comparison row. */
enum { SPLIT_DEFAULT_SPAN = 1 };

/* Prefill routing: pairs per thread (512 threads per block). The fewest rounds with routing
 * blocks <= SMs (one block per SM, one wave), at most SL_MOE_ROUTE_MAX_ROUNDS (was a fixed 8:
 * 32 blocks on 132 SMs, each 8 serial rounds of 3 block barriers). Where the copy runs on a
 * resident grid (the staged and direct copies of the quantized payloads), up to 4 rounds also
 * blocks x E_local <= 512 x 32: the last block's scan, which reads every block's counts with
 * all 512 threads, then takes one batch of 32 loads per thread. T=16384 x K=8 -> Qwen3 (E=128)
 * 2 rounds, 128 blocks; DeepSeek-V3 (E=256) 4 rounds, 64 blocks with a resident copy, else 2.
 * H200, session 24 call 6, quantized rows at T=16384 by events, 4 rounds / 2: DeepSeek-V3
 * fp8-g128 342.4-342.8 / 347.7-348.3 us, mxfp8 341.9-342.1 / 346.2-347.5, mxfp4 217.3-217.4 /
 * 219.0-219.1, nvfp4 228.5-228.6 / 229.9-230.4 (resident copies); but the register copy's grid of
 * many blocks lost (mxfp4 248.6-249.4 / 241.8-242.0, fp8-g128 348.2-348.3 / 346.8-347.0), so the
 * bf16 copy, its kind, keeps the SMs-only rule; Qwen3 fp8-g128 102.9-103.2 / 101.2-101.6 (its scan
 * already one batch). Session 21 measured each block summing its predecessors' counts itself (flags, no
 * last block): no gain (bench/results/2026-12-01-s21-h200-call2/lookback.patch); session 24 the
 * copy waiting per chunk on such sums: slower (call4/chunks.patch). */
int sl_moe_route_rounds(long pairs, int num_sms, int num_local, bool resident_copy) {
  int r = 1;
  while (r < SL_MOE_ROUTE_MAX_ROUNDS) {
    const long blocks = sl_moe_cdiv(pairs, (long)SL_MOE_ROUTE_THREADS * r);
    /* The scan rule raises the rounds to 4 at most: 8 rounds measured slower for both models (call 6). */
    const bool scan_ok = !resident_copy || blocks * num_local <= (long)SL_MOE_ROUTE_THREADS * 32 || r >= 4;
    if (blocks <= num_sms && scan_ok) break;
    r *= 2;
  }
  return r;
}

sl_moe_path_t sl_moe_dispatch_choose_path(const sl_moe_dispatch_args_t *a, int num_sms) {
  if (a->num_tokens == 0) return SL_MOE_PATH_NONE;
  if ((long)a->num_tokens * a->top_k <= SL_MOE_REPL_MAX_PAIRS) return SL_MOE_PATH_REPLICATED;
  const long route_blocks = sl_moe_cdiv((long)a->num_tokens * a->top_k, SL_MOE_FUSED_THREADS);
  const long waves = (long)SL_MOE_FUSED_MAX_WAVES * num_sms;
  return route_blocks <= num_sms && copy_blocks(a, DECODE_UNROLL) <= waves ? SL_MOE_PATH_FUSED : SL_MOE_PATH_SPLIT;
}

sl_status_t sl_moe_dispatch_spec(int hidden, int top_k, int num_local, sl_moe_payload_t payload, int quant_rule,
                                 int which, sl_jit_spec_t *spec) {
  return sl_moe_dispatch_spec_variant(hidden, top_k, num_local, payload, quant_rule, which, 0, spec);
}

/* Staged copy, default shape (H200, session 21 call 1, us by events at T=16384; bench rows "staged SxN"):
 * FP8 payloads on items of 2048 columns with 2 stages where 2048 divides H (Qwen3 fp8-g128 / mxfp8 105.6 / 103.4
 * vs 106.8 / 106.0 at 1024 x 3), else 1024 x 4 (DeepSeek-V3 348.8 / 346.3 vs 351.8 / 350.2); FP4 payloads on
 * 1024 x 3 (Qwen3 mxfp4 69.6 vs 71.4-71.8 at 1024 x 4 and 2048 x 2). 512-column items were slower everywhere
 * (Qwen3 fp8-g128 117-119, mxfp4 78-81). 0 where the staged copy does not apply (H not a multiple of 512). */
static int staged_default_seg(sl_moe_payload_t payload, int hidden) {
  const bool fp8 = payload == SL_MOE_PAYLOAD_FP8_GROUP || payload == SL_MOE_PAYLOAD_MXFP8;
  return fp8 && hidden % 2048 == 0 ? 2048 : hidden % 1024 == 0 ? 1024 : hidden % 512 == 0 ? 512 : 0;
}
static int staged_default_stages(sl_moe_payload_t payload, int seg) {
  const bool fp8 = payload == SL_MOE_PAYLOAD_FP8_GROUP || payload == SL_MOE_PAYLOAD_MXFP8;
  return !fp8 ? 3 : seg == 2048 ? 2 : 4;
}

/* Shared memory of one staged warp: `stages` x segments of bf16, two output buffers (codes + scales). */
static size_t staged_warp_bytes(sl_moe_payload_t payload, int seg, int stages) {
  const size_t out = sl_moe_payload_row_bytes(payload, seg) +
                     (size_t)sl_moe_payload_scales_per_row(payload, seg) * sl_moe_payload_scale_bytes(payload);
  return (size_t)stages * seg * 2 + 2 * out;
}

bool sl_moe_staged_applies(const sl_moe_dispatch_args_t *a, int arch, int *seg, int *stages, size_t *smem_bytes) {
  if (arch < SL_ARCH_HOPPER) return false;
  const int s = a->force_staged_seg ? a->force_staged_seg : staged_default_seg(a->payload, a->hidden);
  const int n = a->force_staged_stages ? a->force_staged_stages : staged_default_stages(a->payload, s);
  const bool aligned = ((uintptr_t)a->x | (uintptr_t)a->expert_x | (uintptr_t)a->expert_scales) % 16 == 0;
  if (a->payload == SL_MOE_PAYLOAD_BF16 || s <= 0 || s % 512 || a->hidden % s || n < 2 || n > 4 || !aligned)
    return false;
  *seg = s;
  *stages = n;
  *smem_bytes = staged_warp_bytes(a->payload, s, n) * (SL_MOE_STAGED_THREADS / 32);
  return true;
}

bool sl_moe_direct_applies(const sl_moe_dispatch_args_t *a) {
  const bool aligned = ((uintptr_t)a->x | (uintptr_t)a->expert_x | (uintptr_t)a->expert_scales) % 16 == 0;
  return a->payload != SL_MOE_PAYLOAD_BF16 && a->hidden % SL_MOE_DIRECT_SEG == 0 && aligned && a->force_span == 0;
}

/* The default copy of the quantized payloads (H200, session 23 call 7, bench rows "staged" / "direct" of
 * `sluice bench moe-local`, us by events, direct / staged): the direct copy's steady stream is the faster one
 * on FP4 (DeepSeek-V3 T=16384 mxfp4 221.86 / 225.76, nvfp4 234.24 / 238.59) but it starts worse after the
 * routing (two items per warp in flight against the staged copy's three prefetched: DeepSeek-V3 T=4096 61.70 /
 * 58.78, 64.83 / 62.11; Qwen3 T=16384 69.92 / 68.83, 73.41 / 72.48), and it loses on FP8 everywhere (Qwen3
 * T=16384 fp8-g128 107.97 / 102.40). So FP4 takes it where the stream is long: at least
 * SL_MOE_DIRECT_MIN_ITEMS items per resident warp (32 per SM: 4 blocks of 8 warps at its 64 registers) --
 * DeepSeek-V3 T=16384: 27; T=4096: 7; Qwen3 T=16384: 8. */
int sl_moe_split_copy(const sl_moe_dispatch_args_t *a, int arch, int num_sms) {
  int seg, stages;
  size_t smem;
  if (a->payload == SL_MOE_PAYLOAD_BF16) return SL_MOE_COPY_REGS;
  if (a->force_copy) return a->force_copy;
  const long items = (long)a->num_tokens * (a->hidden / SL_MOE_DIRECT_SEG);
  if (sl_moe_direct_applies(a) && items >= (long)SL_MOE_DIRECT_MIN_ITEMS * 32 * num_sms) return SL_MOE_COPY_DIRECT;
  if (a->force_span == 0 && sl_moe_staged_applies(a, arch, &seg, &stages, &smem)) return SL_MOE_COPY_STAGED;
  return SL_MOE_COPY_REGS;
}

sl_status_t sl_moe_dispatch_spec_variant(int hidden, int top_k, int num_local, sl_moe_payload_t payload,
                                         int quant_rule, int which, int variant, sl_jit_spec_t *spec) {
  if (which < 0 || which > 5) return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: kernel %d", which);
  if (which == ENTRY_DIRECT && (payload == SL_MOE_PAYLOAD_BF16 || hidden % SL_MOE_DIRECT_SEG))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: the direct copy of %s rows of %d needs a quantized payload and "
                  "H a multiple of %d", sl_moe_payload_name(payload), hidden, SL_MOE_DIRECT_SEG);
  int seg = 0, stages = 0;
  const bool scale_bulk = which == ENTRY_STAGED && (variant & SL_MOE_STAGED_SCALE_BULK);
  if (which == ENTRY_STAGED) {
    variant &= ~SL_MOE_STAGED_SCALE_BULK;
    seg = variant ? variant - variant % 512 : staged_default_seg(payload, hidden);
    stages = variant ? variant % 512 : staged_default_stages(payload, seg);
    if (payload == SL_MOE_PAYLOAD_BF16 || seg <= 0 || seg % 512 || hidden % seg || stages < 2 || stages > 4)
      return SL_ERR(SL_ERR_INVALID,
                    "moe dispatch spec: staged copy of %s rows of %d with variant %d (seg %d, %d stages): needs a "
                    "quantized payload, seg a multiple of 512 dividing H, 2..4 stages",
                    sl_moe_payload_name(payload), hidden, variant, seg, stages);
  }
  if (which == ENTRY_ROUTE && variant != 0 && variant != 1 && variant != 2 && variant != 4 && variant != 8)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: routing rounds %d (1, 2, 4 or 8)", variant);
  if (which == ENTRY_REPL && (variant < 0 || (variant & 0xf) > SL_MOE_REPL_RANK_SCAN || (variant >> 4) > 32))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: replicated variant %#x (ranking %d, warps %d)", variant,
                  variant & 0xf, variant >> 4);
  if (which == ENTRY_REPL && (variant & 0xf) == SL_MOE_REPL_RANK_SCAN && (variant >> 4) != 0 && (variant >> 4) != 8)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: the scan ranking runs at 8 warps per block, not %d",
                  variant >> 4);
  sl_jit_spec_init(spec, "kernels/moe_dispatch.cu", entries[which]);
  /* The routing kernel does not touch rows: one compiled point per (K, E_local). */
  const bool route = which == ENTRY_ROUTE;
  SL_CHECK(sl_jit_spec_define(spec, "MOE_HIDDEN", "%d", route ? 8 : hidden));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_TOPK", "%d", top_k));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_LOCAL", "%d", num_local));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_UNROLL", "%d",
                              which == ENTRY_FUSED || which == ENTRY_REPL ? DECODE_UNROLL
                              : route                                    ? 1
                                                                         : PREFILL_UNROLL));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_KERNEL", "%d", which));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_PAYLOAD", "%d", route ? -1 : payload_qfmt(payload)));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_QRULE", "%d",
                              route || payload == SL_MOE_PAYLOAD_BF16 || payload == SL_MOE_PAYLOAD_NVFP4 ? 0
                                                                                                        : quant_rule));
  /* Variant 0 of the routing kernel: 2 rounds, the host's choice at T*K <= 1024 x SMs. */
  if (route) SL_CHECK(sl_jit_spec_define(spec, "MOE_ROUTE_ROUNDS", "%d", variant ? variant : 2));
  if (which == ENTRY_STAGED) {
    SL_CHECK(sl_jit_spec_define(spec, "MOE_SEG", "%d", seg));
    SL_CHECK(sl_jit_spec_define(spec, "MOE_STAGES", "%d", stages));
    SL_CHECK(sl_jit_spec_define(spec, "MOE_STAGED_SCALE_ST", "%d", scale_bulk ? 0 : 1));
  }
  if (which == ENTRY_REPL) {
    SL_CHECK(sl_jit_spec_define(spec, "MOE_REPL_RANK", "%d", (variant & 0xf) == SL_MOE_REPL_RANK_SCAN ? 0 : 1));
    SL_CHECK(sl_jit_spec_define(spec, "MOE_REPL_WARPS", "%d", variant_warps(hidden, variant)));
  }
  return SL_OK;
}

sl_status_t sl_moe_dispatch_route_spec(int hidden, int top_k, int num_local, int repl_rank,
                                       const sl_router_args_t *route, sl_jit_spec_t *spec) {
  if (route->top_k != top_k)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch route spec: router top_k %d != dispatch top_k %d", route->top_k,
                  top_k);
  SL_CHECK(sl_moe_dispatch_spec_variant(hidden, top_k, num_local, SL_MOE_PAYLOAD_BF16, 0, ENTRY_REPL, repl_rank,
                                        spec));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_ROUTE", "1"));
  return sl_router_define_constants(route, spec);
}

bool sl_moe_repl_bal_shape(int balance, int *threads, int *blocks_per_sm) {
  static const int shapes[][2] = {{256, 2}, {256, 3}, {512, 1}, {512, 2}};
  if (balance < 1 || balance > SL_MOE_REPL_BAL_LAST) return false;
  *threads = shapes[balance - 1][0];
  *blocks_per_sm = shapes[balance - 1][1];
  return true;
}

const char *sl_moe_repl_bal_name(int balance) {
  static const char *const names[] = {"bal 2x256", "bal 3x256", "bal 1x512", "bal 2x512"};
  return balance >= 1 && balance <= SL_MOE_REPL_BAL_LAST ? names[balance - 1] : "?";
}

sl_status_t sl_moe_dispatch_bal_spec(int hidden, int top_k, int num_local, sl_moe_payload_t payload, int quant_rule,
                                     int balance, sl_jit_spec_t *spec) {
  int threads, per_sm;
  if (!sl_moe_repl_bal_shape(balance, &threads, &per_sm))
    return SL_ERR(SL_ERR_INVALID, "moe dispatch spec: balance %d is not an SL_MOE_REPL_BAL_* (1..%d)", balance,
                  SL_MOE_REPL_BAL_LAST);
  SL_CHECK(sl_moe_dispatch_spec_variant(hidden, top_k, num_local, payload, quant_rule, ENTRY_REPL,
                                        SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(8), spec)); /* warps: unused */
  return sl_jit_spec_define(spec, "MOE_REPL_BAL", "%d", threads);
}

bool sl_moe_dispatch_route_fusable(const sl_moe_dispatch_args_t *a, int num_sms) {
  if (!a->route || a->force_repl_balance || a->payload != SL_MOE_PAYLOAD_BF16 || a->num_tokens < 1 ||
      a->num_tokens > SL_MOE_TOPK_FUSED_MAX_TOKENS)
    return false;
  sl_moe_path_t path = sl_moe_dispatch_choose_path(a, num_sms);
  if (a->force_path == SL_MOE_PATH_FUSED || a->force_path == SL_MOE_PATH_SPLIT ||
      a->force_path == SL_MOE_PATH_REPLICATED)
    path = (sl_moe_path_t)a->force_path;
  return path == SL_MOE_PATH_REPLICATED; /* the router's own checks run at the launch */
}

sl_status_t sl_moe_dispatch_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user),
                                       void *user) {
  /* Qwen3-30B-A3B (E=128, K=8, H=2048) and DeepSeek-V3 (E=256, K=8, H=7168), at TP=1 and
   * with an eighth of the experts (TP/EP=8), bf16 payload; the quantized payloads at
   * Qwen3-30B-A3B TP=1 (the payload code does not depend on E or H beyond constants), and the
   * staged and direct copies' at DeepSeek-V3 TP=1 as well (their items depend on H). */
  static const int shapes[][3] = {{2048, 8, 128}, {2048, 8, 16}, {7168, 8, 256}, {7168, 8, 32}};
  static const int quant[][2] = {{SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_IEEE}, {SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_CEIL},
                                 {SL_MOE_PAYLOAD_MXFP8, SL_QRULE_CEIL},     {SL_MOE_PAYLOAD_MXFP8, SL_QRULE_FLOOR},
                                 {SL_MOE_PAYLOAD_MXFP4, SL_QRULE_CEIL},     {SL_MOE_PAYLOAD_NVFP4, SL_QRULE_IEEE}};
  (void)arch;
  sl_jit_spec_t spec;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    /* Every kernel; the routing kernel at each round count the host may pick (1, 2, 4, 8);
     * the replicated kernel with both rankings (the scan: the benchmark's comparison) and at
     * 8 and 4 warps per block (the benchmark's comparison rows; one of them the default). */
    static const int variants[][2] = {{ENTRY_FUSED, 0},
                                      {ENTRY_ROUTE, 1},
                                      {ENTRY_ROUTE, 2},
                                      {ENTRY_ROUTE, 4},
                                      {ENTRY_ROUTE, 8},
                                      {ENTRY_COPY, 0},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_HIST},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_SCAN},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(8)},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(4)},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(14)},
                                      {ENTRY_REPL, SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(28)}};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
      SL_CHECK(sl_moe_dispatch_spec_variant(shapes[i][0], shapes[i][1], shapes[i][2], SL_MOE_PAYLOAD_BF16, 0,
                                            variants[v][0], variants[v][1], &spec));
      SL_CHECK(fn(&spec, user));
    }
    /* The balanced replicated kernel (opt-in comparison), both block sizes (the kernel does not
     * depend on the blocks per SM). */
    static const int bals[] = {SL_MOE_REPL_BAL_256X2, SL_MOE_REPL_BAL_512X1};
    for (size_t v = 0; v < sizeof bals / sizeof bals[0]; v++) {
      SL_CHECK(sl_moe_dispatch_bal_spec(shapes[i][0], shapes[i][1], shapes[i][2], SL_MOE_PAYLOAD_BF16, 0, bals[v],
                                        &spec));
      SL_CHECK(fn(&spec, user));
    }
    /* The replicated kernel computing the top-k itself (the small-T layer): Qwen3-MoE softmax
     * 128/8 and DeepSeek-V3 grouped sigmoid 256/8 (8 groups, top 4), fp32 logits. */
    const bool ds = shapes[i][0] == 7168;
    const sl_router_args_t r = {.kind = ds ? SL_ROUTER_SIGMOID_GROUPED : SL_ROUTER_SOFTMAX_TOPK,
                                .num_experts = ds ? 256 : 128, .top_k = shapes[i][1], .num_groups = ds ? 8 : 1,
                                .topk_groups = ds ? 4 : 1, .logits_dtype = SL_DTYPE_F32};
    SL_CHECK(sl_moe_dispatch_route_spec(shapes[i][0], shapes[i][1], shapes[i][2], 0, &r, &spec));
    SL_CHECK(fn(&spec, user));
    /* The staged and direct copies' items depend on H: at DeepSeek-V3 TP=1 too. */
    if (shapes[i][0] == 7168 && shapes[i][2] == 256)
      for (size_t q = 0; q < sizeof quant / sizeof quant[0]; q++)
        for (int which = ENTRY_STAGED; which <= ENTRY_DIRECT; which++) {
          SL_CHECK(sl_moe_dispatch_spec(shapes[i][0], shapes[i][1], shapes[i][2], (sl_moe_payload_t)quant[q][0],
                                        quant[q][1], which, &spec));
          SL_CHECK(fn(&spec, user));
        }
    if (shapes[i][2] != 128) continue; /* the quantized payloads: one shape */
    static const int qentries[] = {ENTRY_FUSED, ENTRY_COPY, ENTRY_REPL, ENTRY_STAGED, ENTRY_DIRECT};
    for (size_t q = 0; q < sizeof quant / sizeof quant[0]; q++)
      for (int j = 0; j < 5; j++) {
        const int which = qentries[j];
        SL_CHECK(sl_moe_dispatch_spec(shapes[i][0], shapes[i][1], shapes[i][2], (sl_moe_payload_t)quant[q][0],
                                      quant[q][1], which, &spec));
        SL_CHECK(fn(&spec, user));
        if (which != ENTRY_STAGED) continue; /* and with the scales by bulk copies (comparison) */
        SL_CHECK(sl_moe_dispatch_spec_variant(shapes[i][0], shapes[i][1], shapes[i][2],
                                              (sl_moe_payload_t)quant[q][0], quant[q][1], ENTRY_STAGED,
                                              SL_MOE_STAGED_SCALE_BULK, &spec));
        SL_CHECK(fn(&spec, user));
      }
    for (size_t q = 0; q < sizeof quant / sizeof quant[0]; q++) { /* balanced, 256 threads */
      SL_CHECK(sl_moe_dispatch_bal_spec(shapes[i][0], shapes[i][1], shapes[i][2], (sl_moe_payload_t)quant[q][0],
                                        quant[q][1], SL_MOE_REPL_BAL_256X2, &spec));
      SL_CHECK(fn(&spec, user));
    }
  }
  return SL_OK;
}

/* ---- CPU reference -------------------------------------------------------------------- */

/* Quantize one token row with the quantizer's CPU reference (no format math here). */
static sl_status_t quantize_row(const sl_moe_dispatch_args_t *a, const uint16_t *row, uint8_t *codes, void *scales) {
  sl_quant_args_t q = {.format = (sl_quant_format_t)payload_qfmt(a->payload), .rule = (sl_quant_rule_t)a->quant_rule,
                       .layout = SL_QUANT_LAYOUT_LINEAR, .num_tokens = 1, .hidden = a->hidden,
                       .in_dtype = SL_DTYPE_BF16, .in = row, .codes = codes, .scales = scales,
                       .global_scale = a->global_scale};
  return sl_quant_ref(&q);
}

/* First block of the row holding NaN/Inf, or -1. */
static int first_nonfinite_block(const uint16_t *row, int hidden, int block) {
  for (int h = 0; h < hidden; h++)
    if ((row[h] & 0x7f80u) == 0x7f80u) return h / block;
  return -1;
}

sl_status_t sl_moe_dispatch_ref(const sl_moe_dispatch_args_t *a) {
  SL_CHECK(validate(a));
  const int T = a->num_tokens, K = a->top_k, H = a->hidden, local = a->expert_end - a->expert_begin;
  const bool quant = a->payload != SL_MOE_PAYLOAD_BF16;
  const size_t row_bytes = sl_moe_payload_row_bytes(a->payload, H);
  const int spr = sl_moe_payload_scales_per_row(a->payload, H);
  const size_t scale_bytes = sl_moe_payload_scale_bytes(a->payload);
  sl_dev_error_t *err = &((sl_grid_barrier_state_t *)a->workspace)->error;
  sl_dev_error_t numeric = {SL_DEV_ERR_NONE, 0, 0, 0};
  sl_status_t s = SL_OK;
  int *counts = calloc((size_t)local, sizeof *counts);
  uint8_t *codes = quant ? malloc(row_bytes) : NULL, *scales = quant ? malloc((size_t)spr * scale_bytes) : NULL;
  if (!counts || (quant && (!codes || !scales))) {
    s = SL_ERR(SL_ERR_NOMEM, "moe dispatch: %d counts", local);
    goto out;
  }
  const uint16_t *x = a->x;
  uint8_t *ex = a->expert_x, *es = a->expert_scales;
  int quantized_token = -1;
  for (long p = 0; p < (long)T * K; p++) {
    const int id = a->topk_ids[p], t = (int)(p / K);
    int row = -1;
    if (id < 0 || id >= a->num_experts) {
      if (err->code == SL_DEV_ERR_NONE) *err = (sl_dev_error_t){SL_DEV_ERR_RANGE, t, id, a->num_experts};
    } else {
      const int e = sl_moe_local_expert(id, a->expert_begin, a->expert_end);
      if (e >= 0) {
        const int rank = counts[e]++;
        if (rank < a->capacity) {
          row = (int)sl_moe_row(e, rank, a->capacity);
          const uint16_t *xt = x + (size_t)t * H;
          if (!quant) {
            memcpy(ex + (size_t)row * row_bytes, xt, row_bytes);
          } else {
            if (quantized_token != t) {
              SL_CHECK_GOTO(quantize_row(a, xt, codes, scales), s, out);
              quantized_token = t;
              const int block = sl_qfmt_block(payload_qfmt(a->payload)), bad = first_nonfinite_block(xt, H, block);
              if (bad >= 0 && numeric.code == SL_DEV_ERR_NONE)
                numeric = (sl_dev_error_t){SL_DEV_ERR_NUMERIC, t, bad, block};
            }
            memcpy(ex + (size_t)row * row_bytes, codes, row_bytes);
            memcpy(es + (size_t)row * spr * scale_bytes, scales, (size_t)spr * scale_bytes);
          }
        }
      }
    }
    a->slots[p] = row;
  }
  for (int e = 0; e < local; e++) {
    a->expert_counts[e] = counts[e] < a->capacity ? counts[e] : a->capacity;
    if (counts[e] > a->capacity && err->code == SL_DEV_ERR_NONE)
      *err = (sl_dev_error_t){SL_DEV_ERR_CAPACITY, a->expert_begin + e, counts[e], a->capacity};
  }
  /* Same precedence as the kernels: routing errors, then capacity, then numeric. */
  if (numeric.code != SL_DEV_ERR_NONE && err->code == SL_DEV_ERR_NONE) *err = numeric;
  if (a->path_taken) *a->path_taken = SL_MOE_PATH_CPU;
out:
  free(counts);
  free(codes);
  free(scales);
  return s;
}

/* ---- GPU launches --------------------------------------------------------------------- */

static sl_status_t dispatch_cuda(sl_device_t *dev, const sl_moe_dispatch_args_t *a, sl_stream_t *stream) {
  const int local = a->expert_end - a->expert_begin, sms = sl_device_info(dev)->sm_count;
  sl_moe_path_t path = sl_moe_dispatch_choose_path(a, sms);
  if (a->force_path == SL_MOE_PATH_FUSED || a->force_path == SL_MOE_PATH_SPLIT ||
      a->force_path == SL_MOE_PATH_REPLICATED)
    path = (sl_moe_path_t)a->force_path;
  if (path == SL_MOE_PATH_REPLICATED && (long)a->num_tokens * a->top_k > SL_MOE_REPL_MAX_PAIRS)
    return SL_ERR(SL_ERR_INVALID, "moe dispatch: replicated path takes at most %d pairs, not %d tokens x %d",
                  SL_MOE_REPL_MAX_PAIRS, a->num_tokens, a->top_k);
  if (a->path_taken) *a->path_taken = a->num_tokens ? path : SL_MOE_PATH_NONE;
  const bool route_fused = sl_moe_dispatch_route_fusable(a, sms);
  if (a->route_fused) *a->route_fused = route_fused;
  if (a->route && !route_fused) SL_CHECK(sl_router(dev, a->route, stream)); /* then the ids as usual */
  if (a->num_tokens == 0) return sl_memset(dev, a->expert_counts, 0, (size_t)local * 4, stream);

  const sl_moe_ws_layout_t ws = sl_moe_ws_layout(a->num_tokens, a->top_k, local);
  char *base = a->workspace;
  sl_grid_barrier_state_t *state = (sl_grid_barrier_state_t *)base;
  unsigned *done = (unsigned *)(base + SL_MOE_WS_DONE_OFFSET);
  unsigned *claims = (unsigned *)(base + SL_MOE_WS_CLAIMS_OFFSET);
  int *counts = (int *)(base + ws.counts), *offsets = (int *)(base + ws.offsets),
      *pair_rank = (int *)(base + ws.pair_rank);
  const void *x = a->x, *ids = a->topk_ids;
  void *ex = a->expert_x, *es = a->expert_scales, *ec = a->expert_counts, *slots = a->slots;
  float gscale = a->global_scale;
  unsigned long long timeout_ns = (unsigned long long)sl_config()->timeout_ms * 1000000ull; /* bounded waits */
  int T = a->num_tokens, E = a->num_experts, begin = a->expert_begin, end = a->expert_end, cap = a->capacity;
  sl_jit_spec_t spec;
  sl_kernel_t *k;

  if (route_fused) {
    /* The replicated kernel with the router's warp routine in front (MOE_ROUTE = 1): every
     * block computes the top-k of all T <= 16 tokens from the logits (block 0 stores ids and
     * weights), then ranks and copies as below. Saves the router launch and its dependent
     * round trip (logits -> ids -> dispatch) at decode. */
    const sl_router_args_t *r = a->route;
    SL_CHECK(sl_router_check_gpu(r));
    SL_CHECK(sl_moe_dispatch_route_spec(a->hidden, a->top_k, local, repl_variant(a), r, &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    const void *logits = r->logits;
    const float *bias = r->kind == SL_ROUTER_SIGMOID_GROUPED ? r->correction_bias : NULL;
    int32_t *ids_out = r->topk_ids;
    float *w_out = r->topk_weights, sc = sl_router_scaling(r);
    int renorm = r->renormalize;
    void *args[] = {&x,     &ids,   &T,     &E,    &begin,   &end,  &cap,   &ex,   &es,
                    &gscale, &ec,   &slots, &state, &logits, &bias, &ids_out, &w_out, &renorm, &sc};
    const int warps = variant_warps(a->hidden, repl_variant(a));
    sl_launch_t l = {.grid = {(unsigned)repl_blocks(a, warps)}, .block = {(unsigned)warps * 32},
                     .stream = stream, .pdl = a->route_pdl && sl_device_info(dev)->arch >= SL_ARCH_HOPPER};
    return sl_kernel_launch(k, &l, args);
  }

  if (path == SL_MOE_PATH_REPLICATED && a->force_repl_balance) {
    /* Balanced (opt-in): G = blocks-per-SM x SMs blocks (fewer if the plain grid is smaller),
     * each a contiguous range of items whose sizes differ by at most one, so every SM stores
     * the same bytes; blocks per SM capped at what is resident (else the ranges would run in
     * an uneven second wave). */
    int threads = 0, per_sm = 0, resident = 1;
    (void)sl_moe_repl_bal_shape(a->force_repl_balance, &threads, &per_sm); /* validated */
    SL_CHECK(sl_moe_dispatch_bal_spec(a->hidden, a->top_k, local, a->payload, a->quant_rule, a->force_repl_balance,
                                      &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    SL_CHECK(sl_kernel_occupancy(k, threads, 0, &resident));
    if (per_sm > resident) per_sm = resident > 0 ? resident : 1;
    const int chunks = sl_moe_chunks_per_row(a->hidden, DECODE_UNROLL);
    const int grid = sl_moe_bal_grid((long)T * chunks, chunks, threads / 32, per_sm, sms);
    void *args[] = {&x, &ids, &T, &E, &begin, &end, &cap, &ex, &es, &gscale, &ec, &slots, &state};
    sl_launch_t l = {.grid = {(unsigned)grid}, .block = {(unsigned)threads}, .stream = stream};
    return sl_kernel_launch(k, &l, args);
  }

  if (path == SL_MOE_PATH_REPLICATED) {
    /* No co-residency needed: one warp per item, every block routes all pairs itself. */
    SL_CHECK(sl_moe_dispatch_spec_variant(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_REPL,
                                          repl_variant(a), &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    void *args[] = {&x, &ids, &T, &E, &begin, &end, &cap, &ex, &es, &gscale, &ec, &slots, &state};
    const int warps = variant_warps(a->hidden, repl_variant(a));
    sl_launch_t l = {.grid = {(unsigned)repl_blocks(a, warps)}, .block = {(unsigned)warps * 32}, .stream = stream};
    return sl_kernel_launch(k, &l, args);
  }

  if (path == SL_MOE_PATH_FUSED) {
    const int route_blocks = sl_moe_cdiv((long)T * a->top_k, SL_MOE_FUSED_THREADS);
    SL_CHECK(sl_moe_dispatch_spec(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_FUSED, &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    /* Up to 2 blocks per SM where they fit (16 warps' loads in flight per SM for the
     * grid-stride copy; more blocks would lengthen the barrier's arrival chain). */
    int per_sm = 1;
    SL_CHECK(sl_kernel_occupancy(k, SL_MOE_FUSED_THREADS, 0, &per_sm));
    if (per_sm > 2) per_sm = 2;
    if (per_sm < 1) per_sm = 1;
    const int resident = sms * per_sm;
    int grid = copy_blocks(a, DECODE_UNROLL);
    if (grid > resident) grid = resident; /* items are grid-strided */
    if (grid < route_blocks) grid = route_blocks;
    if (grid > resident)
      return SL_ERR(SL_ERR_INVALID,
                    "moe dispatch: fused path needs %d routing blocks for %d tokens but only %d blocks are resident: "
                    "use the split path",
                    route_blocks, T, resident);
    void *args[] = {&x,  &ids,   &T,     &E,     &begin,  &end,      &cap,      &ex,
                    &es, &gscale, &ec,   &slots, &state,  &counts,   &pair_rank, &timeout_ns};
    sl_launch_t l = {.grid = {(unsigned)grid}, .block = {SL_MOE_FUSED_THREADS}, .stream = stream, .cooperative = true};
    return sl_kernel_launch(k, &l, args);
  }

  const int arch = sl_device_info(dev)->arch, copy = sl_moe_split_copy(a, arch, sms);
  const bool resident_copy = copy == SL_MOE_COPY_STAGED || copy == SL_MOE_COPY_DIRECT;
  const int rounds = a->force_route_rounds ? a->force_route_rounds
                                           : sl_moe_route_rounds((long)T * a->top_k, sms, local, resident_copy);
  int route_shift = 0; /* log2(512 x rounds): pairs per routing block */
  while ((1 << route_shift) < SL_MOE_ROUTE_THREADS * rounds) route_shift++;
  const int route_blocks = sl_moe_cdiv((long)T * a->top_k, 1L << route_shift);
  SL_CHECK(sl_moe_dispatch_spec_variant(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_ROUTE, rounds,
                                        &spec));
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  void *rargs[] = {&ids, &T, &E, &begin, &end, &cap, &ec, &state, &done, &claims, &counts, &offsets, &pair_rank};
  sl_launch_t rl = {.grid = {(unsigned)route_blocks}, .block = {SL_MOE_ROUTE_THREADS}, .stream = stream};
  const bool pdl = !a->split_no_pdl && sl_device_info(dev)->arch >= SL_ARCH_HOPPER;
  SL_CHECK(sl_kernel_launch(k, &rl, rargs));
  int seg = 0, stages = 0;
  size_t smem = 0;
  const bool staged = copy == SL_MOE_COPY_STAGED && a->force_span == 0 &&
                      sl_moe_staged_applies(a, arch, &seg, &stages, &smem);
  if (copy == SL_MOE_COPY_STAGED && !staged)
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: the staged copy needs sm_90+, a quantized payload, H (%d) a multiple of 512, no "
                  "force_span, 16-byte aligned x / expert_x / expert_scales and valid force_staged_seg (%d) / "
                  "_stages (%d)",
                  a->hidden, a->force_staged_seg, a->force_staged_stages);
  if (copy == SL_MOE_COPY_DIRECT) {
    if (!sl_moe_direct_applies(a))
      return SL_ERR(SL_ERR_INVALID,
                    "moe dispatch: the direct copy needs a quantized payload, H (%d) a multiple of %d, no force_span "
                    "and 16-byte aligned x / expert_x / expert_scales",
                    a->hidden, SL_MOE_DIRECT_SEG);
    SL_CHECK(sl_moe_dispatch_spec(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_DIRECT, &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    int per_sm = 0;
    SL_CHECK(sl_kernel_occupancy(k, SL_MOE_DIRECT_THREADS, 0, &per_sm));
    if (per_sm < 1) per_sm = 1;
    const long items = (long)T * (a->hidden / SL_MOE_DIRECT_SEG);
    long grid = sl_moe_cdiv(items, SL_MOE_DIRECT_THREADS / 32);
    if (grid > (long)per_sm * sms) grid = (long)per_sm * sms; /* resident; items are grid-strided */
    void *dargs[] = {&x,  &ids,    &T,     &E,       &begin,     &end,   &cap,         &ex,
                     &es, &gscale, &slots, &offsets, &pair_rank, &state, &route_shift, &claims};
    sl_launch_t dl = {.grid = {(unsigned)grid}, .block = {SL_MOE_DIRECT_THREADS}, .stream = stream, .pdl = pdl};
    return sl_kernel_launch(k, &dl, dargs);
  }
  if (staged) {
    SL_CHECK(sl_moe_dispatch_spec_variant(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_STAGED,
                                          seg + stages + (a->staged_scale_bulk ? SL_MOE_STAGED_SCALE_BULK : 0),
                                          &spec));
    SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
    SL_CHECK(sl_kernel_set_max_shared(k, smem));
    int per_sm = 0;
    SL_CHECK(sl_kernel_occupancy(k, SL_MOE_STAGED_THREADS, smem, &per_sm));
    if (per_sm < 1)
      return SL_ERR(SL_ERR_INVALID, "moe dispatch: the staged copy's %zu bytes of shared memory per block do not fit",
                    smem);
    const long items = (long)T * (a->hidden / seg);
    long grid = sl_moe_cdiv(items, SL_MOE_STAGED_THREADS / 32);
    if (grid > (long)per_sm * sms) grid = (long)per_sm * sms; /* resident; items are grid-strided */
    void *sargs[] = {&x,  &ids,    &T,     &E,       &begin,     &end,   &cap,         &ex,
                     &es, &gscale, &slots, &offsets, &pair_rank, &state, &route_shift, &timeout_ns};
    sl_launch_t sl = {.grid = {(unsigned)grid}, .block = {SL_MOE_STAGED_THREADS}, .shared_bytes = (unsigned)smem,
                      .stream = stream, .pdl = pdl};
    return sl_kernel_launch(k, &sl, sargs);
  }
  SL_CHECK(sl_moe_dispatch_spec(a->hidden, a->top_k, local, a->payload, a->quant_rule, ENTRY_COPY, &spec));
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  int span = a->force_span > 0 ? a->force_span : SPLIT_DEFAULT_SPAN;
  if (span > sl_moe_chunks_per_row(a->hidden, PREFILL_UNROLL)) span = sl_moe_chunks_per_row(a->hidden, PREFILL_UNROLL);
  const long spans = sl_moe_cdiv(sl_moe_chunks_per_row(a->hidden, PREFILL_UNROLL), span);
  void *cargs[] = {&x,     &ids,   &T,       &E,         &begin, &end,  &cap,        &ex,
                   &es,    &gscale, &slots,  &offsets,   &pair_rank, &state, &span, &route_shift};
  sl_launch_t cl = {.grid = {(unsigned)sl_moe_cdiv((long)T * spans, SL_MOE_COPY_THREADS / 32)},
                    .block = {SL_MOE_COPY_THREADS}, .stream = stream, .pdl = pdl};
  return sl_kernel_launch(k, &cl, cargs);
}

sl_status_t sl_moe_dispatch(sl_device_t *dev, const sl_moe_dispatch_args_t *a, sl_stream_t *stream) {
  SL_CHECK(validate(a));
  const sl_router_args_t *r = a->route;
  if (r && (r->num_tokens != a->num_tokens || r->top_k != a->top_k || r->num_experts != a->num_experts ||
            r->topk_ids != a->topk_ids || !r->topk_weights))
    return SL_ERR(SL_ERR_INVALID,
                  "moe dispatch: route (T %d, K %d, E %d) must match the dispatch (T %d, K %d, E %d), write the ids "
                  "the dispatch reads (topk_ids) and have topk_weights",
                  r->num_tokens, r->top_k, r->num_experts, a->num_tokens, a->top_k, a->num_experts);
  if (sl_device_backend(dev) == SL_BACKEND_CUDA) return dispatch_cuda(dev, a, stream);
  if (a->route_fused) *a->route_fused = false;
  if (r) SL_CHECK(sl_router_ref(r));
  return sl_moe_dispatch_ref(a);
}

sl_status_t sl_moe_dispatch_check(sl_device_t *dev, void *workspace, sl_stream_t *stream) {
  sl_dev_error_t err;
  sl_dev_error_t *rec = &((sl_grid_barrier_state_t *)workspace)->error;
  SL_CHECK(sl_memcpy(dev, &err, rec, sizeof err, stream));
  SL_CHECK(sl_stream_sync(dev, stream));
  SL_CHECK(sl_device_check(dev, "moe dispatch"));
  if (err.code == SL_DEV_ERR_NONE) return SL_OK;
  /* Nothing runs now: zero the record, and the barrier word and the done and claim counters,
   * which a timed-out launch leaves inconsistent. */
  SL_CHECK(sl_memset(dev, workspace, 0, SL_MOE_WS_HEADER_BYTES, stream));
  SL_CHECK(sl_stream_sync(dev, stream));
  return sl_dev_error_status(&err, "moe dispatch");
}
