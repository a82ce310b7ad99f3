/* QK-norm host side: configuration choice, JIT spec, launch, and the CPU reference/backend. */
#include "kernels/qknorm.h"

#include <math.h>
#include <string.h>

/* ---- configuration choice ------------------------------------------------------------
 * Fixed by the data: a head is HEAD_DIM/8 lanes (8 elements, one 16-byte bf16 packet, per
 * lane), a warp holds 32/(HEAD_DIM/8) heads, and the norm needs no shared memory, so the
 * block size only groups independent warps. One kernel serves Q and K: the head index
 * picks the tensor and weight, so Q and K cost one launch.
 *
 * Memory-level parallelism: one head group gives each lane a single 16-byte load in flight,
 * too little to saturate HBM (Little's law on H200: ~4.3 TB/s x ~0.7 us / 132 SMs ~ 23 KB in
 * flight per SM). Prefill therefore loads ITEMS groups per warp before reducing (4, or 2 with
 * RoPE's cos/sin loads; fewer at 32 warps where the budget is 64 registers): 32 warps/SM x
 * 32 lanes x 64 B ~ 64 KB in flight (v2: 60 registers at 8 warps, 4 blocks per SM).
 * Instruction budget: a 128-elt bf16 head is 512 bytes of traffic, so at copy speed an SM must
 * finish a head every ~32 cycles; per-head instructions (index math, sqrt, division, shuffles)
 * bound the kernel before memory does if they are not kept small (v1's 64-bit division per
 * head made it issue-bound at 62-71 % of copy). Decode keeps ITEMS = 1 to spread heads over
 * more SMs; small prefill (one wave) is sized in sl_qknorm_choose.
 *
 * Decode (warps needed < SMs): one warp per block, spread over as many SMs as possible.
 * Prefill: the table. NOT MEASURED YET (written without a GPU): 8 warps (256 threads) is
 * the reasoned default for a streaming kernel with ~40 registers per thread on Hopper
 * (8 blocks fill an SM's 2048 threads). `sluice bench kernels --tune` measures 1..32 and
 * prints the best per shape; copy its answer here. Blackwell: a copy of Hopper until measured.
 *
 * v3 (after ncu on the H200, T=4096 32+4: 528 resident blocks x 8 warps, 60 registers -> 50%
 * occupancy, 13.7 cycles per issued instruction, stalled on L1TEX): the resident grid strides
 * 147456 heads in 4.4 rounds of 4224 warps x 8 heads, so its last round runs at ~36% of the
 * SMs' warps (~13% of the time lost to the tail), and each warp alternates load / reduce /
 * store phases with no loads in flight during the last two. A full grid (every warp one
 * iteration, blocks retire and new ones start: what won for RMSNorm at T >= 8192) removes the
 * tail and overlaps phases across blocks; fewer items per warp raise occupancy (ptxas, bf16,
 * 8 warps, no RoPE, weights now kept packed: 1 item 40 registers -> 48 warps per SM; 2 items
 * 48 -> 40; 4 items 58 -> 32; v2 39/54/60). The kernel no longer waits for the weights before
 * its first Q/K load (kernels/qknorm.cu), which a full grid would pay per warp. Best guess, NOT MEASURED YET: full grid from the large-prefill rule on, 8 warps, items
 * as before (4; 2 with RoPE). `sluice bench kernels --tune` sweeps warps (1..32) x items (1, 2,
 * 4; 1, 2 with RoPE) x grid per shape and prints table lines.
 *
 * v4 (kernels/NOTES.md, QK-norm v4; NOT MEASURED): per-head instructions were the budget again
 * (ncu: 2.1 IPC per SM, L1TEX stalls, DRAM half busy): heads are located with a magic-number
 * division (kernels/qknorm.h) and bf16 unpacked by shift/mask in every configuration (-24 %
 * instructions plain, -22 % RoPE), and five layout knobs are JIT constants that the table
 * entries carry and `--tune` sweeps (part B): CACHE (streaming hints), RSQ (rsqrtf), WF32
 * (fp32 weights), PIPE (pipelined resident loop, plain only) and RLAYOUT (RoPE pairs across
 * lanes, split, or within a lane). The entries keep them off (v3's measured kernel) until a
 * GPU run picks. */
typedef struct {
  int head_dim, rope; /* entry applies to this head_dim and RoPE (0/1) */
  int warps, items, grid;
  int cache;                       /* JIT CACHE (0: no hints) */
  int rsq, wf32, pipe;             /* JIT RSQ, WF32, PIPE (0/1) */
  int rlayout;                     /* JIT RLAYOUT (0 shuffle, 1 split, 2 pairs in a lane) */
} qk_entry_t;
/* Fields: head_dim, RoPE, warps, items, grid, then the layout knobs CACHE, RSQ, WF32, PIPE,
 * RLAYOUT (all 0 = the v3 kernel).
 * head_dim 128: MEASURED on the H200 (`sluice bench kernels --tune --only qknorm --tokens
 * 1,1024,4096,8192,32768`, 2026-11-29 session 3, bench/results/2026-11-29-s3-h200-qknorm-tune/):
 * the configuration with the smallest mean slowdown against each shape's best over T =
 * 1024..32768, 32+4 and 64+4 heads. Without RoPE the knobs gained nothing beyond noise (the best
 * line, st.cs + rsqrt, 1.002, is within 0.3 % of v3's entry at every shape), so the entry keeps
 * v3's exact 1/sqrt. With RoPE: 2 warps x 2 items, resident grid, streaming stores, rsqrt
 * (<= 2 fp32 ulp; the GPU test's bf16 tolerance covers it) and each lane holding its own
 * rotation pairs (PAIRS; partial rotary falls back to SPLIT in choose): T=8192 64+4 93.98 ->
 * 78.18 us, T=32768 353.6 -> 300.1 us (1.001 mean slowdown).
 * 64 and 256 are not measured (the previous reasoned defaults).
 * Session 12 (bench/results/2026-11-30-s12-h200-call2/qk.txt): at the shape (32+4 heads, T
 * = 4096) by kernel time (CUPTI; the per-repetition events carry ~2.5 us of launch gap there) the
 * plain entry with streaming stores + rsqrt took 19.65 us against v3's 19.71 (90.3 / 90.0 % of
 * copy; graph 19.99 / 20.02): taken (fewer instructions per head; the in-place rows are not read
 * again by this kernel). */
static const qk_entry_t hopper_prefill[] = {
    {64, 0, 8, 4, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {128, 0, 2, 2, SL_QKNORM_GRID_FULL, 1, 1, 0, 0, 0},
    {256, 0, 8, 4, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {64, 1, 8, 2, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {128, 1, 2, 2, SL_QKNORM_GRID_RESIDENT, 2, 1, 0, 0, 2},
    {256, 1, 8, 2, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
};
static const qk_entry_t blackwell_prefill[] = {
    {64, 0, 8, 4, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {128, 0, 8, 4, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {256, 0, 8, 4, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {64, 1, 8, 2, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {128, 1, 8, 2, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
    {256, 1, 8, 2, SL_QKNORM_GRID_FULL, 0, 0, 0, 0, 0},
};

static qk_entry_t table_entry(int arch, int head_dim, bool rope) {
  const qk_entry_t *t = arch >= SL_ARCH_BLACKWELL ? blackwell_prefill : hopper_prefill;
  size_t n = arch >= SL_ARCH_BLACKWELL ? sizeof blackwell_prefill / sizeof *t : sizeof hopper_prefill / sizeof *t;
  for (size_t i = 0; i < n; i++)
    if (t[i].head_dim == head_dim && t[i].rope == (int)rope) return t[i];
  return (qk_entry_t){head_dim, rope, 8, rope ? 2 : 4, SL_QKNORM_GRID_RESIDENT, 0, 0, 0, 0, 0};
}

static int table_warps(int arch, int head_dim) {
  return table_entry(arch, head_dim, false).warps;
}

static bool float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}
static bool misaligned16(const void *p) {
  return ((uintptr_t)p & 15u) != 0;
}

/* Everything but the pointers (what the configuration choice depends on). */
static sl_status_t validate_shape(const sl_qknorm_args_t *a) {
  if (!a) return SL_ERR(SL_ERR_INVALID, "qknorm: NULL arguments");
  if (a->head_dim != 64 && a->head_dim != 128 && a->head_dim != 256)
    return SL_ERR(SL_ERR_INVALID, "qknorm: head_dim %d must be 64, 128 or 256", a->head_dim);
  if (a->tokens < 0 || a->q_heads < 0 || a->kv_heads < 0 || a->q_heads + a->kv_heads == 0)
    return SL_ERR(SL_ERR_INVALID, "qknorm: tokens %d, q_heads %d, kv_heads %d", a->tokens, a->q_heads, a->kv_heads);
  if (!float_dtype(a->dtype) || !float_dtype(a->w_dtype))
    return SL_ERR(SL_ERR_INVALID, "qknorm: dtype %s, w_dtype %s: each must be f32, bf16 or f16",
                  sl_dtype_name(a->dtype), sl_dtype_name(a->w_dtype));
  if (!(a->eps > 0.0f) || !isfinite(a->eps) || !isfinite(a->weight_bias))
    return SL_ERR(SL_ERR_INVALID, "qknorm: eps %g must be > 0 and finite, weight_bias %g finite", (double)a->eps,
                  (double)a->weight_bias);
  if (a->q_row_stride < (long)a->q_heads * a->head_dim || a->k_row_stride < (long)a->kv_heads * a->head_dim ||
      a->q_row_stride % 8 != 0 || a->k_row_stride % 8 != 0)
    return SL_ERR(SL_ERR_INVALID,
                  "qknorm: row strides q %ld, k %ld must be multiples of 8 and hold the heads (%d x %d, %d x %d)",
                  a->q_row_stride, a->k_row_stride, a->q_heads, a->head_dim, a->kv_heads, a->head_dim);
  if (a->warps < 0 || a->warps > 32) return SL_ERR(SL_ERR_INVALID, "qknorm: warps %d not in [0, 32]", a->warps);
  if (a->items != 0 && a->items != 1 && a->items != 2 && a->items != 4)
    return SL_ERR(SL_ERR_INVALID, "qknorm: items %d must be 0 (the choice), 1, 2 or 4 head groups per warp", a->items);
  if (a->grid_policy < SL_QKNORM_GRID_AUTO || a->grid_policy > SL_QKNORM_GRID_FULL)
    return SL_ERR(SL_ERR_INVALID, "qknorm: grid_policy %d is not AUTO (0), RESIDENT (1) or FULL (2)", a->grid_policy);
  if (a->cache < SL_QKNORM_CACHE_AUTO || a->cache > SL_QKNORM_CACHE_STREAM)
    return SL_ERR(SL_ERR_INVALID, "qknorm: cache %d is not AUTO (0), NONE (1), STREAM_STORES (2) or STREAM (3)",
                  a->cache);
  const int knobs[] = {a->fast_rsqrt, a->weights_f32, a->pipeline};
  static const char *knob_names[] = {"fast_rsqrt", "weights_f32", "pipeline"};
  for (int i = 0; i < 3; i++)
    if (knobs[i] < SL_QKNORM_AUTO || knobs[i] > SL_QKNORM_ON)
      return SL_ERR(SL_ERR_INVALID, "qknorm: %s %d is not AUTO (0), OFF (1) or ON (2)", knob_names[i], knobs[i]);
  if (a->rope_layout < SL_QKNORM_ROPE_AUTO || a->rope_layout > SL_QKNORM_ROPE_PAIRS)
    return SL_ERR(SL_ERR_INVALID, "qknorm: rope_layout %d is not AUTO (0), SHUFFLE (1), SPLIT (2) or PAIRS (3)",
                  a->rope_layout);
  if (a->rope && a->rope_layout == SL_QKNORM_ROPE_PAIRS && a->rot_dim != a->head_dim)
    return SL_ERR(SL_ERR_INVALID, "qknorm: rope_layout PAIRS needs full rotary (rot_dim %d != head_dim %d); use SPLIT",
                  a->rot_dim, a->head_dim);
  if (a->rope && a->pipeline == SL_QKNORM_ON)
    return SL_ERR(SL_ERR_INVALID, "qknorm: pipeline ON is for the plain norm, not with RoPE (leave it AUTO or OFF)");
  if ((long long)a->tokens * (a->q_heads + a->kv_heads) > (1ll << 30))
    return SL_ERR(SL_ERR_INVALID, "qknorm: tokens %d x heads %d exceeds 2^30 heads per call (the kernel indexes heads in "
                  "32 bits); split the call", a->tokens, a->q_heads + a->kv_heads);
  if (a->rope) {
    int r = a->rot_dim;
    if (r < 16 || r > a->head_dim || (r & (r - 1)) != 0)
      return SL_ERR(SL_ERR_INVALID, "qknorm: rot_dim %d must be a power of two in [16, head_dim %d]", r, a->head_dim);
    if (a->max_pos <= 0) return SL_ERR(SL_ERR_INVALID, "qknorm: RoPE needs max_pos > 0 (got %d)", a->max_pos);
  }
  return SL_OK;
}

sl_status_t sl_qknorm_validate(const sl_qknorm_args_t *a) {
  SL_CHECK(validate_shape(a));
  if (a->rope) {
    if (a->tokens > 0 && (!a->positions || !a->cos_cache || !a->sin_cache))
      return SL_ERR(SL_ERR_INVALID, "qknorm: RoPE needs positions and cos/sin caches");
    if (misaligned16(a->cos_cache) || misaligned16(a->sin_cache))
      return SL_ERR(SL_ERR_INVALID, "qknorm: cos/sin caches must be 16-byte aligned");
  }
  if (a->tokens > 0 && ((a->q_heads && (!a->q || !a->q_weight)) || (a->kv_heads && (!a->k || !a->k_weight))))
    return SL_ERR(SL_ERR_INVALID, "qknorm: q/k and their weights must not be NULL");
  if (misaligned16(a->q) || misaligned16(a->k) || misaligned16(a->q_weight) || misaligned16(a->k_weight))
    return SL_ERR(SL_ERR_INVALID, "qknorm: q, k and the weights must be 16-byte aligned");
  return SL_OK;
}

int sl_qknorm_items(bool decode, bool rope, int warps) {
  if (decode) return 1;
  if (rope) return warps >= 32 ? 1 : 2;
  return warps >= 32 ? 2 : 4;
}

/* Warps that cover every head once, at `items` head groups per warp. */
static long warps_needed(const sl_qknorm_args_t *a, int items) {
  long heads_per_warp = 32 / SL_QKNORM_LANES_PER_HEAD(a->head_dim) * items;
  return ((long)a->tokens * (a->q_heads + a->kv_heads) + heads_per_warp - 1) / heads_per_warp;
}

/* Largest power of two <= n (n >= 1). */
static int pow2_floor(long n) {
  int p = 1;
  while ((long)p * 2 <= n && p < 32) p *= 2;
  return p;
}

/* A tri-state knob: explicit, else the table's value. */
static bool knob(int v, int table) {
  return v == SL_QKNORM_AUTO ? table != 0 : v == SL_QKNORM_ON;
}

/* The layout knobs: explicit, else the table entry's. The per-head ones (cache hints, rsqrt,
 * fp32 weights, split rotation) apply to every shape; the pipelined loop only where the table
 * applies (large prefill) on a resident grid -- decode and one-wave prefill run one iteration
 * per warp, where it only costs registers. */
static void choose_knobs(const sl_qknorm_args_t *a, const qk_entry_t *e, bool large, sl_qknorm_point_t *pt) {
  pt->cache = a->cache == SL_QKNORM_CACHE_AUTO ? e->cache : a->cache - 1;
  pt->rsq = knob(a->fast_rsqrt, e->rsq);
  pt->wf32 = knob(a->weights_f32, e->wf32);
  pt->pipe = !a->rope && knob(a->pipeline, large && !pt->full_grid ? e->pipe : 0);
  /* RoPE layout: explicit, else the table's, where PAIRS (full rotary only) becomes SPLIT */
  pt->rlayout = 0;
  if (a->rope) {
    pt->rlayout = a->rope_layout != SL_QKNORM_ROPE_AUTO ? a->rope_layout - 1 : e->rlayout;
    if (pt->rlayout == 2 && a->rot_dim != a->head_dim) pt->rlayout = 1;
  }
}

sl_status_t sl_qknorm_choose(const sl_qknorm_args_t *a, int arch, int sm_count, sl_qknorm_point_t *pt) {
  SL_CHECK(validate_shape(a));
  memset(pt, 0, sizeof *pt);
  pt->head_dim = a->head_dim;
  pt->rot_dim = a->rope ? a->rot_dim : 0;
  pt->dtype = a->dtype;
  pt->w_dtype = a->w_dtype;
  pt->eps = a->eps;
  pt->weight_bias = a->weight_bias;
  const long need1 = warps_needed(a, 1);
  const bool decode = need1 < sm_count;
  const qk_entry_t e = table_entry(arch, a->head_dim, a->rope);
  /* Grid: explicit, else the table's for large prefill; decode and one-wave prefill launch no
   * more blocks than are resident, so there the policies coincide. */
  pt->full_grid = a->grid_policy == SL_QKNORM_GRID_FULL || (a->grid_policy == SL_QKNORM_GRID_AUTO && !decode &&
                                                            e.grid == SL_QKNORM_GRID_FULL);
  if (a->warps) {
    pt->warps = a->warps;
    pt->items = a->items ? a->items : sl_qknorm_items(decode, a->rope, pt->warps);
    choose_knobs(a, &e, !decode, pt);
    return SL_OK;
  }
  if (decode) { /* fewer head groups than SMs: one warp per block, spread */
    pt->warps = 1;
    pt->items = a->items ? a->items : 1;
    choose_knobs(a, &e, false, pt);
    return SL_OK;
  }
  /* Small prefill (T ~ 16-128): the whole job fits in one wave of <= 32 warps per SM with 1 or
   * 2 head groups per warp. Blocks are sized so the grid still covers every SM (warps per block
   * = the largest power of two <= warps / SMs, at most the table's): with the table's 8 warps
   * and 4 groups per warp, Qwen3 32+4 at T = 16 was 9 blocks on 9 SMs (3.2 us in a graph).
   * Beyond that, the table's warps, items and grid. */
  for (int items = 1; items <= 2; items *= 2) {
    long need = warps_needed(a, items);
    if (need <= 32L * sm_count) {
      /* capped at 8 warps (measured in a graph at T = 16 / 128 with the previous table's 8;
       * the measured large-prefill entry's 2 warps was not tuned for this one-wave case) */
      int w = pow2_floor(need / sm_count);
      pt->warps = w < 8 ? w : 8;
      pt->items = a->items ? a->items : items;
      choose_knobs(a, &e, false, pt);
      return SL_OK;
    }
  }
  pt->warps = e.warps;
  pt->items = a->items ? a->items : e.items;
  choose_knobs(a, &e, true, pt);
  return SL_OK;
}

sl_status_t sl_qknorm_spec(sl_jit_spec_t *spec, const sl_qknorm_point_t *pt) {
  sl_jit_spec_init(spec, "kernels/qknorm.cu", "sl_qknorm_fwd");
  SL_CHECK(sl_jit_spec_define(spec, "HEAD_DIM", "%d", pt->head_dim));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE", "%d", (int)pt->dtype));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE_W", "%d", (int)pt->w_dtype));
  SL_CHECK(sl_jit_spec_define(spec, "EPS", "%.9ef", (double)pt->eps));
  SL_CHECK(sl_jit_spec_define(spec, "WEIGHT_BIAS", "%.9ef", (double)pt->weight_bias));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", pt->warps));
  SL_CHECK(sl_jit_spec_define(spec, "ROT_DIM", "%d", pt->rot_dim));
  SL_CHECK(sl_jit_spec_define(spec, "ITEMS", "%d", pt->items));
  SL_CHECK(sl_jit_spec_define(spec, "CACHE", "%d", pt->cache));
  SL_CHECK(sl_jit_spec_define(spec, "RSQ", "%d", pt->rsq ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "WF32", "%d", pt->wf32 ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "PIPE", "%d", pt->pipe && pt->rot_dim == 0 ? 1 : 0));
  SL_CHECK(sl_jit_spec_define(spec, "RLAYOUT", "%d", pt->rot_dim > 0 ? pt->rlayout : 0));
  if (pt->pdl) SL_CHECK(sl_jit_spec_define(spec, "PDL", "1"));
  return SL_OK;
}

/* ---- CPU reference --------------------------------------------------------------------
 * The kernel's arithmetic in fp32: sum of squares, inv = 1/sqrt(ss/D + eps),
 * v = (x * inv) * (bias + w), then the rotation, one rounding at the store. */
static void norm_head(const sl_qknorm_args_t *a, void *base, size_t off, const void *weight, int pos) {
  const int d = a->head_dim;
  float v[256];
  float ss = 0.0f;
  for (int i = 0; i < d; i++) {
    v[i] = sl_load_f32(base, a->dtype, off + (size_t)i);
    ss += v[i] * v[i];
  }
  float inv = 1.0f / sqrtf(ss / (float)d + a->eps);
  for (int i = 0; i < d; i++)
    v[i] = (v[i] * inv) * (a->weight_bias + sl_load_f32(weight, a->w_dtype, (size_t)i));
  if (a->rope && pos >= 0 && pos < a->max_pos) {
    const int half = a->rot_dim / 2;
    const float *c = a->cos_cache + (size_t)pos * (size_t)half, *s = a->sin_cache + (size_t)pos * (size_t)half;
    for (int i = 0; i < half; i++) {
      float x1 = v[i], x2 = v[i + half];
      v[i] = x1 * c[i] - x2 * s[i];
      v[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
  for (int i = 0; i < d; i++)
    sl_store_f32(base, a->dtype, off + (size_t)i, v[i]);
}

sl_status_t sl_qknorm_cpu(const sl_qknorm_args_t *a) {
  SL_CHECK(sl_qknorm_validate(a));
  for (int t = 0; t < a->tokens; t++) {
    int pos = a->rope ? a->positions[t] : -1;
    for (int h = 0; h < a->q_heads; h++)
      norm_head(a, a->q, (size_t)t * (size_t)a->q_row_stride + (size_t)h * (size_t)a->head_dim, a->q_weight, pos);
    for (int h = 0; h < a->kv_heads; h++)
      norm_head(a, a->k, (size_t)t * (size_t)a->k_row_stride + (size_t)h * (size_t)a->head_dim, a->k_weight, pos);
  }
  return SL_OK;
}

/* ---- launch ---------------------------------------------------------------------------- */
sl_status_t sl_qknorm(sl_device_t *dev, const sl_qknorm_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_qknorm_cpu(a);
  const sl_device_info_t *info = sl_device_info(dev);
  sl_qknorm_point_t pt;
  SL_CHECK(sl_qknorm_validate(a));
  SL_CHECK(sl_qknorm_choose(a, info->arch, info->sm_count, &pt));
  if (a->tokens == 0) return SL_OK;
  pt.pdl = a->pdl && info->arch >= SL_ARCH_HOPPER;
  sl_jit_spec_t spec;
  SL_CHECK(sl_qknorm_spec(&spec, &pt));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  long grid = (warps_needed(a, pt.items) + pt.warps - 1) / pt.warps;
  if (!pt.full_grid) { /* no larger than the device keeps resident: the loop strides */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, pt.warps * 32, 0, &resident));
    if (grid > resident) grid = resident;
  }
  sl_launch_t l = {.grid = {(unsigned)grid}, .block = {(unsigned)(pt.warps * 32)}, .stream = stream, .pdl = pt.pdl};
  void *q = a->q, *kk = a->k;
  long qs = a->q_row_stride, ks = a->k_row_stride;
  int tokens = a->tokens, qh = a->q_heads, kh = a->kv_heads, max_pos = a->rope ? a->max_pos : 0;
  const void *qw = a->q_weight ? a->q_weight : a->k_weight, *kw = a->k_weight ? a->k_weight : a->q_weight;
  const int32_t *positions = a->rope ? a->positions : NULL;
  const float *cs = a->rope ? a->cos_cache : NULL, *sn = a->rope ? a->sin_cache : NULL;
  unsigned div_m;
  int div_s;
  sl_qknorm_magic((unsigned)(qh + kh), &div_m, &div_s);
  void *args[] = {&q, &kk, &qs, &ks, &tokens, &qh, &kh, &qw, &kw, &positions, &cs, &sn, &max_pos, &div_m, &div_s};
  SL_CHECK(sl_kernel_launch(k, &l, args));
  return SL_OK;
}

/* ---- JIT points: every dtype x head_dim x (no RoPE, full RoPE) x (decode, prefill warps),
 * plus partial rotary (64 of 128) and Gemma-style bias. */
sl_status_t sl_qknorm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const sl_dtype_t dts[] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};
  static const int dims[] = {64, 128, 256};
  sl_jit_spec_t spec;
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 3; h++)
      for (int rope = 0; rope < 2; rope++)
        for (int prefill = 0; prefill < 2; prefill++) {
          sl_qknorm_point_t pt = {.head_dim = dims[h],
                                  .rot_dim = rope ? dims[h] : 0,
                                  .dtype = dts[d],
                                  .w_dtype = dts[d],
                                  .eps = 1e-6f,
                                  .warps = prefill ? table_warps(arch, dims[h]) : 1};
          pt.items = sl_qknorm_items(!prefill, rope, pt.warps);
          SL_CHECK(sl_qknorm_spec(&spec, &pt));
          SL_CHECK(fn(&spec, user));
        }
  sl_qknorm_point_t pt = {.head_dim = 128,
                          .rot_dim = 64,
                          .dtype = SL_DTYPE_BF16,
                          .w_dtype = SL_DTYPE_BF16,
                          .eps = 1e-6f,
                          .warps = table_warps(arch, 128)};
  pt.items = sl_qknorm_items(false, true, pt.warps);
  SL_CHECK(sl_qknorm_spec(&spec, &pt));
  SL_CHECK(fn(&spec, user));
  pt.rot_dim = 0;
  pt.items = sl_qknorm_items(false, false, pt.warps);
  pt.weight_bias = 1.0f;
  pt.w_dtype = SL_DTYPE_F32;
  SL_CHECK(sl_qknorm_spec(&spec, &pt));
  SL_CHECK(fn(&spec, user));
  /* What sl_qknorm_choose picks for the benchmark's Qwen3 shapes (head_dim 128, 32+4 and 64+4
   * heads, T = 16..4096, with and without RoPE), small-prefill blocks included. */
  static const int bench_tokens[] = {16, 128, 1024, 4096};
  for (int qh = 32; qh <= 64; qh += 32)
    for (int ti = 0; ti < 4; ti++)
      for (int rope = 0; rope < 2; rope++) {
        sl_qknorm_args_t a = {.q_row_stride = (long)qh * 128,
                              .k_row_stride = 4 * 128,
                              .tokens = bench_tokens[ti],
                              .q_heads = qh,
                              .kv_heads = 4,
                              .head_dim = 128,
                              .dtype = SL_DTYPE_BF16,
                              .w_dtype = SL_DTYPE_BF16,
                              .eps = 1e-6f,
                              .rope = rope,
                              .rot_dim = 128,
                              .max_pos = 1};
        SL_CHECK(sl_qknorm_choose(&a, arch, 132, &pt));
        SL_CHECK(sl_qknorm_spec(&spec, &pt));
        SL_CHECK(fn(&spec, user));
      }
  /* The corners of the --tune sweep, with and without RoPE: the largest block (1024 threads: a
   * 64-register budget) at the most items, and the fewest items at the table's warps; the
   * others compile on demand. */
  for (int rot = 0; rot <= 128; rot += 128)
    for (int corner = 0; corner < 2; corner++) {
      pt = (sl_qknorm_point_t){.head_dim = 128,
                               .rot_dim = rot,
                               .dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f,
                               .warps = corner ? 32 : table_warps(arch, 128),
                               .items = corner ? (rot ? 2 : 4) : 1};
      SL_CHECK(sl_qknorm_spec(&spec, &pt));
      SL_CHECK(fn(&spec, user));
    }
  /* The layout knobs' corners: every knob on at one warp and at the largest block --tune gives
   * them (1024 threads: a 64-register budget) for the pipelined plain norm at 2 items; RoPE
   * split (one warp) and pairs-in-a-lane (8 warps: at 32 the RoPE kernels spill) at 2 items. */
  for (int rot = 0; rot <= 128; rot += 128)
    for (int corner = 0; corner < 2; corner++) {
      pt = (sl_qknorm_point_t){.head_dim = 128,
                               .rot_dim = rot,
                               .dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f,
                               .warps = corner ? (rot ? 8 : 32) : 1,
                               .items = 2,
                               .cache = corner ? 2 : 1,
                               .rsq = true,
                               .wf32 = true,
                               .pipe = rot == 0,
                               .rlayout = rot ? 1 + corner : 0};
      SL_CHECK(sl_qknorm_spec(&spec, &pt));
      SL_CHECK(fn(&spec, user));
    }
  /* As a programmatic dependent (`pdl`, sm_90+) at decode: Qwen3-30B-A3B's heads, with and without RoPE. */
  for (int rope = 0; rope < 2 && arch >= SL_ARCH_HOPPER; rope++) {
    const sl_qknorm_args_t a = {.tokens = 1,
                                .q_heads = 32,
                                .kv_heads = 4,
                                .head_dim = 128,
                                .q_row_stride = 32 * 128,
                                .k_row_stride = 4 * 128,
                                .dtype = SL_DTYPE_BF16,
                                .w_dtype = SL_DTYPE_BF16,
                                .eps = 1e-6f,
                                .rope = rope,
                                .rot_dim = rope ? 128 : 0,
                                .max_pos = rope ? 4096 : 0};
    sl_qknorm_point_t pt;
    SL_CHECK(sl_qknorm_choose(&a, arch, 132, &pt));
    pt.pdl = true;
    SL_CHECK(sl_qknorm_spec(&spec, &pt));
    SL_CHECK(fn(&spec, user));
  }
  return SL_OK;
}
