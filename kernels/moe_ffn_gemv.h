/* Constants shared by the MoE FFN weight-streaming (GEMV) kernels (kernels/moe_ffn_gemv.cu)
 * and their host side (kernels/moe_ffn.c). Plain C, no includes: NVRTC embeds it. */
#ifndef SL_MOE_FFN_GEMV_H
#define SL_MOE_FFN_GEMV_H

#define SL_MOE_FFN_GEMV_THREADS 256     /* 8 warps per block, one 16-row weight tile per warp */
#define SL_MOE_FFN_GEMV_MAX_LOCAL 1024  /* shared table of non-empty experts per block */
/* Automatic choice (sl_moe_ffn_uses_gemv): the weight-streaming kernels serve padded mode
 * while an expert can hold at most this many rows (min(capacity, T)), or while the experts
 * hold at most this many on average (T*K <= this x E_local). They multiply each weight
 * tile with up to 32 of the expert's rows per pass on tensor cores (more rows: more
 * passes), so up to ~16 rows per expert the weights are streamed once at full bandwidth
 * with the mma units mostly idle. */
#define SL_MOE_FFN_GEMV_MAX_ROWS 16

/* Two variants of the FFN streaming kernels (JIT constant FFN_SPLIT; the choice and its
 * reasoning: ffn_variant in kernels/moe_ffn.c). Wide: SL_MOE_FFN_GEMV_THREADS threads,
 * 8/16/32 token rows per weight pass (214 registers: 8 warps per SM). Split: this many
 * threads, 8 rows per pass (<= 128 registers: 16 warps per SM), a tile's K split over
 * several warps when a block has fewer tiles than warps. Automatic: split while every
 * expert holds at most SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS rows (min(capacity, T)), i.e. one
 * 8-row pass. */
#define SL_MOE_FFN_GEMV_SPLIT_THREADS 384
#define SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS 8
/* 1: the automatic choice takes the split variant up to SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS rows.
 * 0 until it has run on a GPU (written 2026-11-29 without one): the split kernels are then
 * used only when forced (gemv_variant), which the GPU tests and the benchmark's
 * "<path>/gemv-split" comparison rows do. Set to 1 once those rows show it faster. */
#define SL_MOE_FFN_GEMV_SPLIT_AUTO 0
/* sl_moe_ffn_args_t.gemv_variant */
#define SL_MOE_FFN_GEMV_AUTO 0
#define SL_MOE_FFN_GEMV_WIDE 1
#define SL_MOE_FFN_GEMV_SPLIT 2

/* The FFN kernels' work split (device: kernels/moe_ffn_gemv.cu; host: the unit test that
 * checks every tile's K range is covered exactly once). `tiles` tiles of `nch` K-chunks
 * over `grid` blocks of `warps` warps: a contiguous balanced range [begin, end) per block.
 * S = 1: warp w takes tiles begin + w, + warps, ... whole. S > 1 (split only, when the
 * block has fewer tiles than warps): unit u is part u % S, chunks [nch p / S, nch (p + 1)
 * / S), of tile begin + u / S; the kernels take units u = warp, warp + warps, ... in rounds
 * (all warps run ceil(tb S / warps) rounds, tb = end - begin), and S divides warps, so a
 * tile's S parts are S neighbouring warps of one round (they add their partial tiles at a
 * barrier). S: the divisor of warps, <= nch / 2 (every part >= 2 chunks), that keeps the
 * most warps busy over the rounds, tb S / (rounds x warps); the smallest S on ties. At
 * 12 warps: tb = 5 or 6 -> S = 2 (83 / 100 %, one round; S = 1: 42 / 50 %); tb = 7 -> 3
 * (88 %); tb = 8 -> 3 (2 rounds, 100 %; S = 1: 67 %). tile = end: no unit. */
typedef struct {
  int begin, tile, end; /* tiles <= 1024 experts x I / 8 fit an int */
  int S, part, ch0, ch1;
} sl_moe_ffn_work_t;

static inline void sl_moe_ffn_work_unit(sl_moe_ffn_work_t *w, int u, int nch) {
  w->tile = w->begin + u / w->S < w->end ? w->begin + u / w->S : w->end;
  w->part = u % w->S;
  w->ch0 = nch * w->part / w->S;
  w->ch1 = nch * (w->part + 1) / w->S;
}

static inline sl_moe_ffn_work_t sl_moe_ffn_work(long tiles, int grid, int block, int warp, int nch, int warps,
                                                int split) {
  sl_moe_ffn_work_t w;
  w.begin = (int)(tiles * block / grid);
  w.end = (int)(tiles * (block + 1) / grid);
  const int tb = w.end - w.begin;
  w.S = 1;
  if (split && tb > 0 && tb < warps) {
    int best_units = tb, best_slots = warps; /* S = 1: tb of one round's warps */
    for (int S = 2; S <= warps && S <= nch / 2; S++) {
      if (warps % S) continue;
      const int units = tb * S, slots = (units + warps - 1) / warps * warps;
      if ((long)units * best_slots > (long)best_units * slots) {
        w.S = S;
        best_units = units;
        best_slots = slots;
      }
    }
  }
  sl_moe_ffn_work_unit(&w, warp, nch);
  return w;
}

#endif
