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
/* The streaming kernels' L2 prefetch distance in 4 KB chunks of a warp's tile (JIT constant
 * FFN_PF; 0: no prefetch). sl_moe_ffn_set_pf_override changes it for a benchmark sweep
 * (`SL_BENCH_FFN_PF=N sluice bench moe-local`). MEASURED (H200, session 7, bench/results/
 * 2026-11-29-s7-h200-ffn-pf/): the full Qwen3-30B-A3B layer at T = 8 / 32 / 128, graph us,
 * with the wide kernels: pf 0 134.5 / 273.2 / 328.3; 2 144.3 / 290.4 / 355.2; 4 (the old
 * default) 150.2 / 301.7 / 368.7; 8 160.5 / 320.6 / 394.6. ncu at T = 128 with pf 4: L2
 * throughput 92 % at 76 % of DRAM bandwidth -- the prefetch's extra L2 lookups, not the
 * bytes in flight, were the limit. Hence 0. */
#define SL_MOE_FFN_GEMV_PF 0

/* Two variants of the FFN streaming kernels (JIT constant FFN_SPLIT; the choice and its
 * reasoning: ffn_variant in kernels/moe_ffn.c). Wide: SL_MOE_FFN_GEMV_THREADS threads,
 * 8/16/32 token rows per weight pass (214 registers: 8 warps per SM). Split: this many
 * threads, 8 rows per pass (<= 128 registers: 16 warps per SM), a tile's K split over
 * several warps when a block has fewer tiles than warps. Automatic: split while every
 * expert holds at most SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS rows (min(capacity, T)), i.e. one
 * 8-row pass. */
#define SL_MOE_FFN_GEMV_SPLIT_THREADS 384
#define SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS 8
/* 1: the automatic choice takes the split variant up to SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS rows
 * when the call has at least SL_MOE_FFN_GEMV_SPLIT_MIN_PAIRS (token, expert) pairs (0: only
 * when forced, gemv_variant). MEASURED (H200, session 7, with the L2 prefetch off; bench/
 * results/2026-11-29-s7-h200-ffn-split/), graph us, split vs wide: T = 8 (64 pairs, 54
 * experts) layer 132.27 vs 135.77, FFN alone 122.79 vs 126.66; T = 1 (8 pairs, 8 experts) FFN
 * alone 26.99 vs 25.12, the chain of launches 34.84 vs 33.15 -- with 5-6 tiles per block the
 * split variant divides each tile's K over warps and loses. T = 2..7: not measured. */
#define SL_MOE_FFN_GEMV_SPLIT_AUTO 1
#define SL_MOE_FFN_GEMV_SPLIT_MIN_PAIRS 16
/* sl_moe_ffn_args_t.gemv_variant */
#define SL_MOE_FFN_GEMV_AUTO 0
#define SL_MOE_FFN_GEMV_WIDE 1
#define SL_MOE_FFN_GEMV_SPLIT 2
#define SL_MOE_FFN_GEMV_BULK 3

/* ---- Bulk variant (JIT constant FFN_BULK; sm_90+; kernels/moe_ffn_gemv.cu) ----------------
 * The weights move global -> shared memory by the bulk-copy engine (cp.async.bulk, one copy
 * per weight row and stage, completion counted in bytes on an mbarrier) into a ring of
 * `stages` stages; one producer warp issues the copies, SL_MOE_FFN_BULK_CONSUMERS warps
 * multiply each stage with the expert's token rows (mma m16n8k16 as the other variants,
 * up to SL_MOE_FFN_BULK_ROWS rows per weight pass) and release it by an mbarrier arrive.
 * A stage is one 16-row tile's K chunk (gate_up: gate rows j0..j0+7, up rows j0..j0+7;
 * down: output columns h0..h0+15); the consumer warps split the chunk's 32-element k-steps
 * (warp w: k-steps w, w + 8, ...) and add their partial tiles in warp order through shared
 * memory at the end of each tile pass. Geometry (sl_moe_ffn_bulk_geom) is shared by the
 * host (dynamic shared memory size) and the kernels (offsets) and checked off-GPU by the
 * unit tests (coverage, alignment, bank conflicts, an emulation of the fragment reads). */
#define SL_MOE_FFN_BULK_CONSUMERS 8
#define SL_MOE_FFN_BULK_THREADS ((SL_MOE_FFN_BULK_CONSUMERS + 1) * 32) /* + 1 producer warp */
#define SL_MOE_FFN_BULK_ROWS 16         /* token rows per weight pass (two n-tiles of 8) */
#define SL_MOE_FFN_BULK_CHUNK_MAX 2048  /* bytes of one weight row per stage */
#define SL_MOE_FFN_BULK_MAX_STAGES 8
/* Dynamic shared memory per block: at most this, so that a gate_up block and a down block
 * (programmatic dependent launch) fit on one SM together (228 KB per SM on sm_90/sm_100,
 * 1 KB reserved per block): down's producer fills its ring while gate_up drains. */
#define SL_MOE_FFN_BULK_SMEM_BUDGET (110 * 1024)
/* 1: the automatic choice takes the bulk variant while min(capacity, T) <=
 * SL_MOE_FFN_GEMV_BULK_MAX_ROWS on sm_90+. 0 until a GPU run shows it faster (written
 * 2026-11-29 without a GPU): used only when forced (gemv_variant = SL_MOE_FFN_GEMV_BULK). */
#define SL_MOE_FFN_GEMV_BULK_AUTO 0
#define SL_MOE_FFN_GEMV_BULK_MAX_ROWS 16

typedef struct {
  int row_bytes;    /* one weight row: 2 K bytes */
  int nch;          /* stages (chunks) per row and tile pass */
  int chunk_bytes;  /* bytes of every chunk but the last: a multiple of 64 (whole k-steps) */
  int pitch;        /* shared bytes between a stage's rows: == 64 (mod 128), >= chunk_bytes */
  int stage_bytes;  /* 16 rows x pitch */
  int stages;       /* ring depth */
  int bar_offset;   /* full[stages] then empty[stages] mbarriers (8 bytes each) */
  int part_offset;  /* partial tiles: [consumers][32 lanes][8 floats] */
  int table_offset; /* active[num_local], rows[num_local] (ints) */
  int smem_bytes;   /* dynamic shared memory of the launch */
} sl_moe_ffn_bulk_geom_t;

/* Stages of a K-element reduction (K = H for gate_up, I for down; a multiple of 8) for
 * num_local local experts. Chunks are balanced (2 K / nch rounded up to 64 bytes, the last
 * one shorter), the row pitch is padded to 64 mod 128 bytes: the LDS.128 of a quarter warp
 * (rows g and g + 1, 64 contiguous bytes each) then covers all 32 banks once. */
static inline sl_moe_ffn_bulk_geom_t sl_moe_ffn_bulk_geom(int k, int num_local) {
  sl_moe_ffn_bulk_geom_t g;
  g.row_bytes = 2 * k;
  g.nch = (g.row_bytes + SL_MOE_FFN_BULK_CHUNK_MAX - 1) / SL_MOE_FFN_BULK_CHUNK_MAX;
  g.chunk_bytes = ((g.row_bytes + g.nch - 1) / g.nch + 63) / 64 * 64;
  g.pitch = (g.chunk_bytes + 127) / 128 * 128 + 64;
  g.stage_bytes = 16 * g.pitch;
  const int fixed = SL_MOE_FFN_BULK_CONSUMERS * 32 * 8 * 4 + 2 * 4 * num_local;
  g.stages = (SL_MOE_FFN_BULK_SMEM_BUDGET - fixed - 16 * SL_MOE_FFN_BULK_MAX_STAGES) / g.stage_bytes;
  if (g.stages > SL_MOE_FFN_BULK_MAX_STAGES) g.stages = SL_MOE_FFN_BULK_MAX_STAGES;
  if (g.stages < 2) g.stages = 2;
  g.bar_offset = g.stages * g.stage_bytes;
  g.part_offset = g.bar_offset + 16 * g.stages;
  g.table_offset = g.part_offset + SL_MOE_FFN_BULK_CONSUMERS * 32 * 8 * 4;
  g.smem_bytes = g.table_offset + 2 * 4 * num_local;
  return g;
}

/* Bytes of chunk ch of a row (the last one holds the rest; > 0, a multiple of 16). */
static inline int sl_moe_ffn_bulk_chunk(const sl_moe_ffn_bulk_geom_t *g, int ch) {
  const int rest = g->row_bytes - ch * g->chunk_bytes;
  return rest < g->chunk_bytes ? rest : g->chunk_bytes;
}

/* Shared-memory byte offset (from the ring's start) of lane (gq = lane / 4, c = lane % 4)'s
 * 16 bytes of k-step ks of row `row` (0..15) in stage s: the copy of row `row` lands at
 * s x stage_bytes + row x pitch; k-step ks covers its bytes [64 ks, 64 ks + 64), lane c the
 * 16 at 64 ks + 16 c (elements 8c .. 8c + 7 of the k-step: the kernels' k permutation). */
static inline int sl_moe_ffn_bulk_offset(const sl_moe_ffn_bulk_geom_t *g, int s, int row, int ks, int c) {
  return s * g->stage_bytes + row * g->pitch + 64 * ks + 16 * c;
}

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
