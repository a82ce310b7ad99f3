/* RMSNorm host side: configuration choice, JIT spec, launch, and the CPU reference/backend. */
#include "kernels/rmsnorm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/sl_log.h"

/* ---- configuration choice ------------------------------------------------------------
 * What is fixed by the data: a row of HIDDEN elements is held in registers by
 * SL_RMSNORM_ROW_WARPS(HIDDEN) warps (<= 32 elements per thread, 16-byte packets), so the
 * only free knob is how many rows share a block: warps per block = row_warps x rows/block.
 *
 * Decode (rows < SMs): one row per block (warps = row_warps, i.e. one warp up to hidden 1024).
 *   The kernel is latency bound; spreading rows over as many SMs as possible runs them all in
 *   parallel, each SM using its own load path. More rows per block would serialise them.
 * Prefill (rows >= SMs): the table below. More warps per block amortise block launch and let
 *   the tail of one row overlap the loads of the next; too many cost occupancy granularity
 *   (a 1024-thread block with ~60 registers per thread leaves one block per SM) and raise the
 *   cost of the grid's last wave. Raise warps (4, 8, 16, 32) only while the benchmark says so.
 *
 * NOT MEASURED YET: the entries were written without a GPU, from these reasons: 256 threads
 * (8 warps) is the usual sweet spot for streaming kernels on Hopper (8 blocks x 256 threads
 * fill the SM's 2048 threads at <= 32 registers, 4 blocks at <= 64); above hidden 4096 a row
 * already needs 5-16 warps, so the block is one or two rows. `sluice bench kernels --tune`
 * measures every candidate per shape and prints the best: copy its answer here.
 * Blackwell starts as a copy of Hopper (same 16-byte vector path here) until measured.
 *
 * Hopper, revisited for the pipelined kernel (kernels/rmsnorm.cu v2; H200 run 2 measured only
 * these defaults): at several rows per block the kernel is built for >= 32 resident warps.
 *
 * v3 (this table): three knobs per (hidden, variant, rows): elements per thread (8/16/32, so
 * h=2048 runs a row on 8, 4 or 2 warps), rows per block, and the grid policy. The kernel now
 * always asks __launch_bounds__ for as many resident warps as a row's registers allow (48 at 16
 * elements per thread: 40 registers; v2's one-row-per-block prefill used 95 registers, 20 warps
 * per SM, ncu: 0.5 issued warps per scheduler, stalled on L1TEX). Best guesses, NOT MEASURED
 * YET: prefill at h <= 4096 takes a Triton row kernel's layout (16 elements per thread, one row
 * per block, full grid: 4 warps at 2048, 8 at 4096; Triton measured 20.0 us at T=8192 h=2048
 * against our 20.6 with 2 warps at 95 registers); h=7168 the same from 4096 rows (14 warps;
 * v2's best there was full w=14 at 32 elements, 2 rows), below that v2's resident 2 rows of 7
 * warps; 8192-16384 v2's 32 elements, one row of 8-16 warps. Decode (rows < SMs; min_rows 0
 * entries; always one row per block): v2's 32 elements per thread, measured 1.4-2.4 us in a
 * graph. `sluice bench kernels --tune` sweeps elements x rows per block x grid per shape and
 * prints table lines to paste here. */
typedef struct {
  int max_hidden; /* entry applies to hidden <= max_hidden ... */
  int fused;      /* ... to this variant (0 plain, 1 fused residual) ... */
  int min_rows;   /* ... and rows >= min_rows (0: decode, rows < SMs); first match wins */
  int elts;       /* elements per thread: 8, 16 or 32 */
  int rows_per_block;
  int grid; /* SL_RMSNORM_GRID_FULL or _RESIDENT */
  int wreg; /* 1: weight in registers; 0: re-read per row */
  int rsq;  /* 1: the row's factor by rsqrtf at these rows too (AUTO takes it at decode always) */
  int onerow; /* 1: the one-row kernel on a full grid of a row per block, fused or h > 4096 too */
} rms_entry_t;

#define FULL SL_RMSNORM_GRID_FULL
#define RESIDENT SL_RMSNORM_GRID_RESIDENT
static const rms_entry_t hopper_table[] = {
    /* MEASURED on the H200 (2026-11-29, `sluice bench kernels --tune --only norm --tokens
     * 1,16,1024,4096,8192,32768`, bench/results/2026-11-29-s2-h200-tune/): each line is the best
     * candidate of the sweep for that hidden size, variant and row count (decode: graph time at
     * T <= 16; prefill min_rows 1 = the T=1024 pick, used up to 8191 rows). Differences between
     * the top candidates are often within 1-3 %. */
    /* Decode and T=8192 re-measured in session 11 (bench/results/2026-11-30-s11-h200-call5/, `--tune
     * --only rmsnorm --tokens 1,16,128,1024,8192`) once the weight's unpacking stayed in the row
     * loop (kernels/rmsnorm.cu): a weight in registers is now loaded with x, not one round trip
     * before it, and wins at every decode shape (graph us, was / now). The plain norm's T=1024
     * entries from bench/probes/peer_sweep.py --graph (call 8: every launch choice in a CUDA
     * graph; by events T=1024 is the host's launch gap, not the kernel); fused T=1024 and T=32768
     * keep the session 2 picks. Session 12 (bench/results/2026-11-30-s12-h200-call1/, rsqrt at
     * decode): the plain norm's decode entries at h=4096 and 7168 from peer_sweep.py --graph at
     * T=1/16/128 (16 elements per thread the best at every T there). Session 19
     * (bench/results/2026-11-30-s19-h200-call{8,9}/): the plain norm's T=32768 entries re-tuned
     * (`--tune --only rmsnorm --tokens 32768`; they were session 2's, from before the weight
     * loaded with x): the weight in registers wins at every hidden size; at h=2048 also in the
     * peers' harness (peer_sweep.py, 3 rounds: 68.19-68.54 vs 68.86-69.41 us re-reading it,
     * Triton's row kernel 68.59-68.98). The fused T=32768 picks stay (the tune's best within 0.6 %). */
    {2048, 0, 0, 16, 1, RESIDENT, 1, 0, 0}, /* decode 1.56 -> 1.39 us */
    {2048, 1, 0, 16, 1, RESIDENT, 1, 0, 0}, /* decode 1.57 -> 1.46 us */
    {4096, 0, 0, 16, 1, RESIDENT, 1, 0, 0}, /* decode 1.67 -> 1.54 us; s12 graph sweep: e=16 1.52 vs e=8 1.56 */
    {4096, 1, 0, 16, 1, RESIDENT, 1, 0, 0}, /* decode 1.77 -> 1.68 us */
    {7168, 0, 0, 16, 1, RESIDENT, 1, 0, 0}, /* decode 1.84 -> 1.81 us; s12 graph sweep: e=16 1.79 vs e=32 1.91 */
    {7168, 1, 0, 32, 1, RESIDENT, 1, 0, 0}, /* decode 2.05 -> 2.04 us; s28 peer_sweep.py --graph: e=32 w=7 T=1
                                             * 1.95, T=16 2.11 vs e=16 w=14 2.03, 2.14 (Triton's fused row 1.87,
                                             * 2.06) */
    {2048, 0, 32768, 16, 1, FULL, 1, 0, 0}, /* T=32768: 67.74 us (s19; re-reading the weight 68.61) */
    {2048, 0, 8192, 16, 1, FULL, 1, 0, 0},  /* T=8192: 20.06 us (kern 17.15) */
    {2048, 0, 1, 16, 1, FULL, 1, 1, 0},     /* T=1024: graph 3.24 -> 2.67 us (Triton 2.73); s31 rsqrt 2.61 -> 2.51 */
    {2048, 1, 32768, 8, 1, FULL, 0, 0, 0},  /* T=32768: 131.58 us */
    {2048, 1, 8192, 16, 1, FULL, 1, 0, 0},  /* T=8192: 36.35 -> 36.00 us */
    {2048, 1, 1, 8, 1, FULL, 1, 1, 1}, /* T=1024: s31 peer_sweep.py --graph (call 2): the one-row kernel, rsqrt 3.30
                                        * us; s28's e=16 resident loop 3.44, Triton's fused row 3.40 */
    {4096, 0, 32768, 16, 1, FULL, 1, 0, 0}, /* T=32768: 133.02 us (s19; e=32 w=4 134.21-134.40) */
    {4096, 0, 8192, 16, 1, FULL, 1, 0, 0},  /* T=8192: 36.42 -> 35.58 us */
    {4096, 0, 1, 16, 1, RESIDENT, 1, 0, 0}, /* T=1024: graph 4.72 -> 3.87 us (Triton 4.31) */
    {4096, 1, 32768, 16, 4, FULL, 0, 0, 0}, /* T=32768: 260.90 us */
    {4096, 1, 8192, 32, 1, FULL, 1, 0, 0},  /* T=8192: 70.21 -> 68.93 us */
    {4096, 1, 1, 16, 2, RESIDENT, 1, 1, 0}, /* T=1024: s30 peer_sweep.py --graph (call 8): 5.84 us, e=32 w=8
                                             * re-reading the weight (the s2 pick) 6.20, Triton's fused row 6.36;
                                             * s31 (call 2) 5.78 -> 5.67 with rsqrt */
    {7168, 0, 32768, 32, 1, FULL, 1, 0, 0}, /* T=32768: 226.05 us (s19; re-reading the weight 229.18-229.34) */
    {7168, 0, 8192, 32, 1, FULL, 1, 0, 0},  /* T=8192: 61.28 -> 60.35 us */
    {7168, 0, 1, 16, 1, RESIDENT, 1, 1, 0}, /* T=1024: graph 6.65 -> 6.04 us (Triton 6.14); s31 (call 2) e=32 w=7
                                             * full 6.16 -> e=16 w=14 resident, rsqrt 5.75 */
    {7168, 1, 32768, 16, 1, FULL, 1, 0, 0}, /* T=32768: 456.74 us */
    {7168, 1, 8192, 32, 1, FULL, 1, 0, 0},  /* T=8192: 117.50 -> 117.18 us */
    {7168, 1, 1, 16, 2, RESIDENT, 0, 1, 0}, /* T=1024: 19.04 us; s31 (call 2) graph 10.61 -> 10.30 with rsqrt */
    /* not measured: hidden above 7168 (v2's layout) */
    {SL_RMSNORM_MAX_HIDDEN, 0, 0, 32, 1, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 0, 32, 1, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 0, 4096, 32, 1, FULL, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 4096, 32, 1, FULL, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 0, 1, 32, 1, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 1, 32, 1, RESIDENT, 1, 0, 0},
};
/* Blackwell: a copy of Hopper (same 16-byte vector path) until measured. */
static const rms_entry_t blackwell_table[] = {
    {SL_RMSNORM_MAX_HIDDEN, 0, 0, 32, 1, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 0, 32, 1, RESIDENT, 1, 0, 0},
    {2048, 0, 1, 16, 1, FULL, 1, 0, 0},
    {2048, 1, 1, 16, 1, FULL, 1, 0, 0},
    {4096, 0, 1, 16, 1, FULL, 1, 0, 0},
    {4096, 1, 4096, 16, 1, FULL, 1, 0, 0},
    {4096, 1, 1, 32, 2, RESIDENT, 1, 0, 0},
    {7168, 0, 4096, 16, 1, FULL, 1, 0, 0},
    {7168, 1, 4096, 16, 1, FULL, 1, 0, 0},
    {7168, 0, 1, 32, 2, RESIDENT, 1, 0, 0},
    {7168, 1, 1, 32, 2, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 0, 4096, 32, 1, FULL, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 4096, 32, 1, FULL, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 0, 1, 32, 1, RESIDENT, 1, 0, 0},
    {SL_RMSNORM_MAX_HIDDEN, 1, 1, 32, 1, RESIDENT, 1, 0, 0},
};
#undef FULL
#undef RESIDENT

/* The entry for a shape; `decode` selects the min_rows 0 entries. Every table ends with
 * catch-alls at SL_RMSNORM_MAX_HIDDEN, so a match always exists. */
static rms_entry_t table_entry(int arch, int hidden, bool fused, int rows, bool decode) {
  const rms_entry_t *t = arch >= SL_ARCH_BLACKWELL ? blackwell_table : hopper_table;
  size_t n = arch >= SL_ARCH_BLACKWELL ? sizeof blackwell_table / sizeof *t : sizeof hopper_table / sizeof *t;
  for (size_t i = 0; i < n; i++) {
    if (hidden > t[i].max_hidden || t[i].fused != (int)fused) continue;
    if (decode ? t[i].min_rows == 0 : (t[i].min_rows > 0 && rows >= t[i].min_rows)) {
      rms_entry_t e = t[i];
      /* A row must fit 32 warps: 8 elements per thread serve hidden <= 8192 only. */
      while (SL_RMSNORM_ROW_WARPS_E(hidden, e.elts) > 32)
        e.elts *= 2;
      return e;
    }
  }
  return (rms_entry_t){SL_RMSNORM_MAX_HIDDEN, fused, 0, 32, 1, SL_RMSNORM_GRID_RESIDENT, 1, 0, 0};
}

int sl_rmsnorm_warp_candidates_e(int hidden, int elts, int out[8]) {
  int rw = SL_RMSNORM_ROW_WARPS_E(hidden, elts), n = 0;
  for (int w = rw; w <= 32 && w <= 8 * rw && n < 8; w *= 2)
    out[n++] = w;
  return n;
}

int sl_rmsnorm_warp_candidates(int hidden, int out[8]) {
  int rw = SL_RMSNORM_ROW_WARPS(hidden), n = 0;
  for (int w = rw; w <= 32 && n < 8; w *= 2)
    out[n++] = w;
  return n;
}

static bool float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}

/* Everything but the pointers (what the configuration choice depends on). */
static sl_status_t validate_shape(const sl_rmsnorm_args_t *a) {
  if (!a) return SL_ERR(SL_ERR_INVALID, "rmsnorm: NULL arguments");
  if (a->hidden < SL_RMSNORM_MIN_HIDDEN || a->hidden > SL_RMSNORM_MAX_HIDDEN || a->hidden % 8 != 0)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: hidden %d is not a multiple of 8 in [%d, %d]", a->hidden,
                  SL_RMSNORM_MIN_HIDDEN, SL_RMSNORM_MAX_HIDDEN);
  if (a->rows < 0) return SL_ERR(SL_ERR_INVALID, "rmsnorm: rows %d < 0", a->rows);
  if (!float_dtype(a->in_dtype) || !float_dtype(a->out_dtype) || !float_dtype(a->w_dtype) ||
      (a->residual && !float_dtype(a->res_dtype)))
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: dtypes in=%s out=%s w=%s res=%s: each must be f32, bf16 or f16",
                  sl_dtype_name(a->in_dtype), sl_dtype_name(a->out_dtype), sl_dtype_name(a->w_dtype),
                  sl_dtype_name(a->res_dtype));
  if (!(a->eps > 0.0f) || !isfinite(a->eps) || !isfinite(a->weight_bias))
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: eps %g must be > 0 and finite, weight_bias %g finite", (double)a->eps,
                  (double)a->weight_bias);
  if (a->weight_regs < SL_RMSNORM_WEIGHT_AUTO || a->weight_regs > SL_RMSNORM_WEIGHT_RELOAD)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: weight_regs %d is not AUTO (0), REGS (1) or RELOAD (2)", a->weight_regs);
  if (a->fast_rsqrt < SL_RMSNORM_RSQ_AUTO || a->fast_rsqrt > SL_RMSNORM_RSQ_ON)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: fast_rsqrt %d is not AUTO (0), OFF (1) or ON (2)", a->fast_rsqrt);
  if (a->row_loop < SL_RMSNORM_LOOP_AUTO || a->row_loop > SL_RMSNORM_LOOP_OFF)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: row_loop %d is not AUTO (0), ON (1) or OFF (2)", a->row_loop);
  if (a->elts != 0 && a->elts != 8 && a->elts != 16 && a->elts != 32)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: elts %d must be 0 (the table's), 8, 16 or 32 elements per thread",
                  a->elts);
  if (a->elts != 0 && SL_RMSNORM_ROW_WARPS_E(a->hidden, a->elts) > 32)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: hidden %d at elts %d needs %d warps per row (> 32); use more elements "
                  "per thread", a->hidden, a->elts, SL_RMSNORM_ROW_WARPS_E(a->hidden, a->elts));
  if (a->warps != 0) {
    int rw = SL_RMSNORM_ROW_WARPS_E(a->hidden, a->elts ? a->elts : SL_RMSNORM_ELTS_PER_THREAD);
    if (a->warps < rw || a->warps > 32 || a->warps % rw != 0)
      return SL_ERR(SL_ERR_INVALID, "rmsnorm: warps %d for hidden %d at %d elements per thread must be a multiple "
                    "of %d, <= 32", a->warps, a->hidden, a->elts ? a->elts : SL_RMSNORM_ELTS_PER_THREAD, rw);
  }
  return SL_OK;
}

sl_status_t sl_rmsnorm_validate(const sl_rmsnorm_args_t *a) {
  SL_CHECK(validate_shape(a));
  if (a->grid_policy < SL_RMSNORM_GRID_AUTO || a->grid_policy > SL_RMSNORM_GRID_FULL)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: grid_policy %d is not AUTO (0), RESIDENT (1) or FULL (2)", a->grid_policy);
  if (a->rows > 0 && (!a->x || !a->y || !a->weight))
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: x, y and weight must not be NULL");
  /* 16-byte packets: every row and the weight start on a 16-byte boundary (hidden % 8 == 0
   * keeps rows aligned once the base is). */
  if (((uintptr_t)a->x | (uintptr_t)a->y | (uintptr_t)a->weight | (uintptr_t)a->residual) % 16 != 0)
    return SL_ERR(SL_ERR_INVALID, "rmsnorm: x, y, residual and weight must be 16-byte aligned");
  return SL_OK;
}

sl_status_t sl_rmsnorm_choose(const sl_rmsnorm_args_t *a, int arch, int sm_count, sl_rmsnorm_point_t *pt) {
  SL_CHECK(validate_shape(a));
  const bool decode = a->rows < sm_count;
  rms_entry_t e = table_entry(arch, a->hidden, a->residual != NULL, a->rows, decode);
  if (decode) e.rows_per_block = 1; /* spread rows over as many SMs as possible */
  /* Explicit knobs win (what --tune and the tests use); warps without elts keeps the v2 layout. */
  int elts = a->elts ? a->elts : a->warps ? SL_RMSNORM_ELTS_PER_THREAD : e.elts;
  int rw = SL_RMSNORM_ROW_WARPS_E(a->hidden, elts);
  int warps = a->warps ? a->warps : rw * e.rows_per_block;
  if (warps > 32) warps = 32 / rw * rw;
  bool full = a->grid_policy == SL_RMSNORM_GRID_FULL ||
              (a->grid_policy == SL_RMSNORM_GRID_AUTO && e.grid == SL_RMSNORM_GRID_FULL);
  memset(pt, 0, sizeof *pt);
  pt->hidden = a->hidden;
  pt->in_dtype = a->in_dtype;
  pt->out_dtype = a->out_dtype;
  pt->w_dtype = a->w_dtype;
  pt->residual = a->residual != NULL;
  pt->res_dtype = pt->residual ? a->res_dtype : a->in_dtype;
  pt->eps = a->eps;
  pt->weight_bias = a->weight_bias;
  pt->elts = elts;
  pt->wreg = a->weight_regs == SL_RMSNORM_WEIGHT_REGS || (a->weight_regs == SL_RMSNORM_WEIGHT_AUTO && e.wreg);
  /* rsqrtf at decode, where a row's latency is the kernel's (kernels/rmsnorm.cu "The row's
   * factor"), and on entries marked rsq (the T=1024 ones: about one wave, the same reason; s31
   * call 2, graph: 0.1-0.4 us less); the other prefill entries keep the IEEE factor they were
   * measured with. */
  pt->rsq = a->fast_rsqrt == SL_RMSNORM_RSQ_ON || (a->fast_rsqrt == SL_RMSNORM_RSQ_AUTO && (decode || e.rsq));
  /* One row per block at decode (rows < SMs <= resident blocks) or on a full grid is a block per
   * row: the kernel's straight-line path (kernels/rmsnorm.cu "One row, one block"). At prefill
   * only where it measured faster than the row loop at the same launch (H200, kernel time, s12
   * call 3: plain h=2048/4096 T=8192 16.99/32.58 us vs 17.09/33.12, T=1024 h=2048 graph 3.63 vs
   * 3.75); the fused variant (T=8192 h=4096 67.68 vs 66.40) and h > 4096 (T=8192 h=7168 58.18
   * vs 57.60) keep the loop; T=32768 was within 0.1 % either way. Entries marked onerow take it
   * too (the fused T=1024 h=2048 one: s31 call 2, 3.30 vs 3.44 us in a graph). */
  const bool one_row_prefill =
      full && (a->row_loop == SL_RMSNORM_LOOP_OFF || e.onerow || (!pt->residual && a->hidden <= 4096));
  pt->one_row = a->row_loop != SL_RMSNORM_LOOP_ON && warps == rw && (decode || one_row_prefill);
  pt->warps = warps;
  pt->full_grid = full;
  return SL_OK;
}

sl_status_t sl_rmsnorm_spec(sl_jit_spec_t *spec, const sl_rmsnorm_point_t *pt) {
  sl_jit_spec_init(spec, "kernels/rmsnorm.cu", "sl_rmsnorm_fwd");
  SL_CHECK(sl_jit_spec_define(spec, "HIDDEN", "%d", pt->hidden));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE_IN", "%d", (int)pt->in_dtype));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE_OUT", "%d", (int)pt->out_dtype));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE_W", "%d", (int)pt->w_dtype));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE_RES", "%d", (int)pt->res_dtype));
  SL_CHECK(sl_jit_spec_define(spec, "EPS", "%.9ef", (double)pt->eps));
  SL_CHECK(sl_jit_spec_define(spec, "WEIGHT_BIAS", "%.9ef", (double)pt->weight_bias));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", pt->warps));
  SL_CHECK(sl_jit_spec_define(spec, "RESIDUAL", "%d", pt->residual ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "ELTS", "%d", pt->elts));
  SL_CHECK(sl_jit_spec_define(spec, "WREG", "%d", pt->wreg ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "RSQ", "%d", pt->rsq ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "ONEROW", "%d", pt->one_row ? 1 : 0));
  if (pt->pdl) SL_CHECK(sl_jit_spec_define(spec, "PDL", "1"));
  return SL_OK;
}

/* ---- CPU reference --------------------------------------------------------------------
 * Same arithmetic as the kernel: fp32 throughout, the residual sum rounded to its dtype
 * before it is squared (the kernel adds 16-bit pairs packed: the same bits), scale = (x * inv)
 * * (bias + w), one rounding at the store (the kernel does not add a bias of 0: only the sign of
 * a zero product differs where w is -0). The sum of squares uses 8 interleaved fp32 partial sums
 * (the kernel's order differs; the difference is far below one bf16 ulp). */
sl_status_t sl_rmsnorm_cpu(const sl_rmsnorm_args_t *a) {
  SL_CHECK(sl_rmsnorm_validate(a));
  const int h = a->hidden;
  for (int r = 0; r < a->rows; r++) {
    size_t base = (size_t)r * (size_t)h;
    float part[8] = {0};
    for (int i = 0; i < h; i++) {
      float v = sl_load_f32(a->x, a->in_dtype, base + (size_t)i);
      if (a->residual) {
        v += sl_load_f32(a->residual, a->res_dtype, base + (size_t)i);
        sl_store_f32(a->residual, a->res_dtype, base + (size_t)i, v);
        v = sl_load_f32(a->residual, a->res_dtype, base + (size_t)i); /* the stored value */
      }
      part[i & 7] += v * v;
    }
    float ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    float inv = 1.0f / sqrtf(ss / (float)h + a->eps);
    for (int i = 0; i < h; i++) {
      float v = a->residual ? sl_load_f32(a->residual, a->res_dtype, base + (size_t)i)
                            : sl_load_f32(a->x, a->in_dtype, base + (size_t)i);
      float w = sl_load_f32(a->weight, a->w_dtype, (size_t)i);
      sl_store_f32(a->y, a->out_dtype, base + (size_t)i, (v * inv) * (a->weight_bias + w));
    }
  }
  return SL_OK;
}

/* ---- launch ---------------------------------------------------------------------------- */
sl_status_t sl_rmsnorm(sl_device_t *dev, const sl_rmsnorm_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_rmsnorm_cpu(a);
  const sl_device_info_t *info = sl_device_info(dev);
  sl_rmsnorm_point_t pt;
  SL_CHECK(sl_rmsnorm_validate(a));
  SL_CHECK(sl_rmsnorm_choose(a, info->arch, info->sm_count, &pt));
  if (a->rows == 0) return SL_OK;
  pt.pdl = a->pdl && info->arch >= SL_ARCH_HOPPER;
  sl_jit_spec_t spec;
  SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  const int threads = pt.warps * 32, rows_per_block = pt.warps / SL_RMSNORM_ROW_WARPS_E(a->hidden, pt.elts);
  long grid = ((long)a->rows + rows_per_block - 1) / rows_per_block;
  if (!pt.full_grid) { /* no larger than the device keeps resident: the loop strides */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, threads, 0, &resident));
    if (grid > resident) grid = resident;
  }
  if (pt.one_row && (rows_per_block != 1 || grid != a->rows))
    return SL_ERR(SL_ERR_INTERNAL, "rmsnorm: the one-row kernel needs a block per row (%d rows, grid %ld, %d rows "
                  "per block)", a->rows, grid, rows_per_block);
  sl_launch_t l = {.grid = {(unsigned)grid}, .block = {(unsigned)threads}, .stream = stream, .pdl = pt.pdl};
  const void *x = a->x, *w = a->weight;
  void *y = a->y, *res = a->residual;
  int rows = a->rows;
  void *args[] = {&x, &y, &res, &w, &rows};
  SL_CHECK(sl_kernel_launch(k, &l, args));
  return SL_OK;
}

/* ---- JIT points ------------------------------------------------------------------------
 * What deployments use (every point sl_rmsnorm_choose picks for the model sizes at decode, small
 * and large prefill), plus every dtype pair and the size classes the tests cover, and one point
 * per elements-per-thread value at several rows per block (the --tune sweep's other corners). */
static sl_status_t rms_point(sl_rmsnorm_point_t pt, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user),
                             void *user) {
  sl_jit_spec_t spec;
  SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
  return fn(&spec, user);
}

sl_status_t sl_rmsnorm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const sl_dtype_t dts[] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};
  /* 128: per-head baseline of the QK-norm benchmark; 520: not a power of two; the rest model sizes. */
  static const int hiddens[] = {128, 512, 520, 2048, 4096, 7168, 8192, 16384};
  static const int rows[] = {1, 1024, 100000};
  sl_rmsnorm_point_t pt;
  /* Every dtype in/out pair, both variants, at one size: decode and the table's prefill layout. */
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 3; o++)
      for (int res = 0; res < 2; res++)
        for (int prefill = 0; prefill < 2; prefill++) {
          sl_rmsnorm_args_t a = {.rows = prefill ? 100000 : 1,
                                 .hidden = 4096,
                                 .residual = res ? (void *)16 : NULL,
                                 .in_dtype = dts[i],
                                 .out_dtype = dts[o],
                                 .w_dtype = dts[i],
                                 .res_dtype = dts[i],
                                 .eps = 1e-6f};
          SL_CHECK(sl_rmsnorm_choose(&a, arch, 132, &pt));
          SL_CHECK(rms_point(pt, fn, user));
          pt.pdl = !prefill && arch >= SL_ARCH_HOPPER; /* decode as a programmatic dependent (`pdl`) */
          if (pt.pdl) SL_CHECK(rms_point(pt, fn, user));
        }
  /* Every size class in bf16, both variants, decode and the table's prefill points. */
  for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
    for (int res = 0; res < 2; res++)
      for (int r = 0; r < 3; r++) {
        sl_rmsnorm_args_t a = {.rows = rows[r],
                               .hidden = hiddens[h],
                               .residual = res ? (void *)16 : NULL,
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .res_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f};
        SL_CHECK(sl_rmsnorm_choose(&a, arch, 132, &pt));
        SL_CHECK(rms_point(pt, fn, user));
      }
  /* Gemma (bias 1), fp32 residual stream with bf16 activations and fp32 weights. */
  pt = (sl_rmsnorm_point_t){.hidden = 2048,
                            .in_dtype = SL_DTYPE_BF16,
                            .out_dtype = SL_DTYPE_BF16,
                            .w_dtype = SL_DTYPE_BF16,
                            .res_dtype = SL_DTYPE_BF16,
                            .eps = 1e-6f,
                            .weight_bias = 1.0f,
                            .residual = true,
                            .elts = 32,
                            .wreg = true,
                            .warps = 2};
  SL_CHECK(rms_point(pt, fn, user));
  pt.weight_bias = 0.0f;
  pt.res_dtype = SL_DTYPE_F32;
  pt.w_dtype = SL_DTYPE_F32;
  SL_CHECK(rms_point(pt, fn, user));
  /* Each elements-per-thread value at its largest --tune block at hidden 4096 and 2048 (the
   * tightest register budgets: up to 1024 threads), both variants, both weight placements; the
   * others compile on demand. */
  static const int elts[] = {8, 16, 32};
  for (int hi = 0; hi < 2; hi++)
    for (int e = 0; e < 3; e++)
      for (int res = 0; res < 4; res++) { /* plain/fused x weight re-read/in registers */
        int h = hi ? 4096 : 2048, cand[8], n = sl_rmsnorm_warp_candidates_e(h, elts[e], cand);
        if (n == 0) continue;
        pt = (sl_rmsnorm_point_t){.hidden = h,
                                  .in_dtype = SL_DTYPE_BF16,
                                  .out_dtype = SL_DTYPE_BF16,
                                  .w_dtype = SL_DTYPE_BF16,
                                  .res_dtype = SL_DTYPE_BF16,
                                  .eps = 1e-6f,
                                  .residual = res & 1,
                                  .elts = elts[e],
                                  .wreg = res >> 1,
                                  .warps = cand[n - 1]};
        SL_CHECK(rms_point(pt, fn, user));
      }
  return SL_OK;
}
