/* MoE expert FFN host side: weight-streaming tensor-core kernels or cuBLAS batched/grouped
 * GEMMs around sl_act on the GPU, OpenBLAS on the CPU backend.
 *
 * The trade-off (cuBLAS takes GEMM sizes from the host, the counts live on the device):
 *  - padded mode (decode; graph capturable): a tiny plan kernel writes the batched GEMMs'
 *    pointer arrays from the counts, the batch is min(E_local, T*K) (the experts that can
 *    be non-empty), every GEMM runs on `capacity` rows. Only touched experts' weights are
 *    streamed from memory; the padding rows cost compute, which is free while a GEMM is
 *    bandwidth bound (capacity <= SL_MOE_FFN_PADDED_MAX_ROWS).
 *  - exact mode (prefill): one stream synchronisation to read the counts, then grouped GEMMs
 *    (cublasGemmGroupedBatchedEx) over the non-empty experts on exactly their rows, with the
 *    intermediates packed (sum of counts rows), so the activation touches only real rows.
 *  - small rows (decode, padded mode; rule in sl_moe_ffn_uses_gemv): two weight-streaming
 *    kernels (kernels/moe_ffn_gemv.cu) instead of plan + GEMM + act + GEMM. At T=1 each
 *    touched expert holds one row and the layer is a GEMV over 8 experts' weights (76 MB at
 *    Qwen3 size); at T=128 ~8 rows per expert over all 128 experts (1.2 GB). Each warp
 *    streams a 16-row weight tile (gate_up: 8 gate + 8 up rows of the same intermediate
 *    indices, so SiLU-and-mul is fused in the thread holding both; down: 16 output columns)
 *    with 16-byte loads (two 4 KB chunks in registers; the L2 prefetch ahead is off by
 *    default, SL_MOE_FFN_GEMV_PF: it made L2 the limit), and multiplies it with all of the expert's
 *    rows on tensor cores (mma m16n8k16, fp32 accumulation; 8/16/32 rows per pass; three
 *    compiled variants, wide, split and bulk (weights staged in shared memory by the
 *    bulk-copy engine, ffn_bulk), chosen by sl_moe_ffn_gemv_variant below). H200
 *    runs before this measured the previous CUDA-core GEMV at ~60% of copy bandwidth
 *    (per-item latency bubbles, 4 KB in flight per warp) and cuBLAS's batched GEMMs at
 *    2.3-2.5x the weight-streaming time at T=1 (few CTAs along m, no split along k).
 * The dispatch itself never synchronises; only exact mode here does, by the caller's choice. */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/act.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_ffn_gemv.h"
#include "kernels/sl_dtype.h"
#include "runtime/sl_config.h"

#define PTR_ARRAYS 6

typedef struct {
  size_t ptrs, gate_up, act, total;
  long rows;
} ffn_layout_t;

static long padded_slots(int local, int num_tokens, int top_k) {
  long pairs = (long)num_tokens * top_k;
  return pairs < local ? pairs : local;
}

static ffn_layout_t ffn_layout(int local, int capacity, int num_tokens, int top_k, int hidden, int inter) {
  ffn_layout_t l;
  long padded = padded_slots(local, num_tokens, top_k) * capacity, exact = (long)num_tokens * top_k;
  l.rows = padded > exact ? padded : exact;
  if (l.rows < 1) l.rows = 1;
  l.ptrs = 0;
  l.gate_up = ((size_t)PTR_ARRAYS * local * sizeof(void *) + 255u) & ~(size_t)255u;
  l.act = l.gate_up + (((size_t)l.rows * 2 * inter * 2 + 255u) & ~(size_t)255u);
  l.total = l.act + (((size_t)l.rows * inter * 2 + 255u) & ~(size_t)255u);
  (void)hidden;
  return l;
}

size_t sl_moe_ffn_workspace_bytes(int num_local_experts, int capacity, int max_tokens, int top_k, int hidden,
                                  int inter) {
  return ffn_layout(num_local_experts, capacity, max_tokens, top_k, hidden, inter).total;
}

static sl_status_t validate(const sl_moe_ffn_args_t *a) {
  if (a->gemv_variant < SL_MOE_FFN_GEMV_AUTO || a->gemv_variant > SL_MOE_FFN_GEMV_BULK)
    return SL_ERR(SL_ERR_INVALID, "moe ffn: gemv_variant %d (0 automatic, 1 wide, 2 split, 3 bulk)",
                  a->gemv_variant);
  if (a->num_local_experts < 1 || a->num_local_experts > 1024 || a->capacity < 1 || a->hidden < 8 ||
      a->hidden % 8 || a->inter < 8 || a->inter % 8 || a->num_tokens < 0 || a->top_k < 1)
    return SL_ERR(SL_ERR_INVALID,
                  "moe ffn: bad shape (E_local %d, capacity %d, H %d, I %d, T %d, K %d): H and I must be multiples "
                  "of 8",
                  a->num_local_experts, a->capacity, a->hidden, a->inter, a->num_tokens, a->top_k);
  if (!a->x || !a->expert_counts || !a->w_gate_up || !a->w_down || !a->y || !a->workspace)
    return SL_ERR(SL_ERR_INVALID, "moe ffn: NULL buffer");
  size_t need = ffn_layout(a->num_local_experts, a->capacity, a->num_tokens, a->top_k, a->hidden, a->inter).total;
  if (a->workspace_bytes < need)
    return SL_ERR(SL_ERR_INVALID, "moe ffn: workspace %zu bytes < %zu needed (sl_moe_ffn_workspace_bytes)",
                  a->workspace_bytes, need);
  return SL_OK;
}

sl_status_t sl_moe_ffn_plan_spec(int num_local_experts, sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "kernels/moe_ffn.cu", "sl_moe_ffn_plan");
  return sl_jit_spec_define(spec, "FFN_LOCAL", "%d", num_local_experts);
}

static int pf_override = -1;
void sl_moe_ffn_set_pf_override(int chunks) { pf_override = chunks >= 0 && chunks <= 16 ? chunks : -1; }

sl_status_t sl_moe_ffn_gemv_variant_spec(int which, int variant, sl_jit_spec_t *spec) {
  static const char *const names[] = {"sl_moe_ffn_gemv_gate_up", "sl_moe_ffn_gemv_down", "sl_moe_gate_gemv"};
  if (which < 0 || which > 2)
    return SL_ERR(SL_ERR_INVALID, "moe ffn gemv spec: kernel %d (0 gate_up, 1 down, 2 router logits)", which);
  if (variant != SL_MOE_FFN_GEMV_WIDE && variant != SL_MOE_FFN_GEMV_SPLIT && variant != SL_MOE_FFN_GEMV_BULK)
    return SL_ERR(SL_ERR_INVALID,
                  "moe ffn gemv spec: variant %d (SL_MOE_FFN_GEMV_WIDE %d, _SPLIT %d or _BULK %d)", variant,
                  SL_MOE_FFN_GEMV_WIDE, SL_MOE_FFN_GEMV_SPLIT, SL_MOE_FFN_GEMV_BULK);
  sl_jit_spec_init(spec, "kernels/moe_ffn_gemv.cu", names[which]);
  /* The router-logits kernel ignores FFN_SPLIT / FFN_BULK / FFN_PF: always compiled with the
   * defaults (one cubin). */
  SL_CHECK(sl_jit_spec_define(spec, "FFN_PF", "%d", which < 2 && pf_override >= 0 ? pf_override : SL_MOE_FFN_GEMV_PF));
  SL_CHECK(sl_jit_spec_define(spec, "FFN_SPLIT", "%d", which < 2 && variant == SL_MOE_FFN_GEMV_SPLIT ? 1 : 0));
  return sl_jit_spec_define(spec, "FFN_BULK", "%d", which < 2 && variant == SL_MOE_FFN_GEMV_BULK ? 1 : 0);
}

sl_status_t sl_moe_ffn_gemv_spec(int which, sl_jit_spec_t *spec) {
  return sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_WIDE, spec);
}

/* Which streaming variant (kernels/moe_ffn_gemv.cu, FFN_SPLIT) serves a call that takes the
 * streaming kernels. Split while an expert can hold at most SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS
 * (8) rows, min(capacity, T) <= 8 (decode T <= 8), and the call has at least
 * SL_MOE_FFN_GEMV_SPLIT_MIN_PAIRS (16) pairs (T >= 2 at K = 8; at T = 1 the split kernel's
 * K division over warps measured slower), else wide. Why:
 *  - At 1-8 rows an expert is one 8-row n-tile, one weight pass. The wide kernel carries
 *    the 16- and 32-row code (NT = 2, 4: up to 16 accumulators and 16 token vectors live
 *    per lane), which sets its 214 registers for every call: 8 warps per SM. H200 ncu at
 *    T=1: 5-6 busy warps per SM (768 gate_up tiles of 64 KB over 132 SMs), 57 % of DRAM,
 *    stalled on L1TEX scoreboard: too few bytes in flight (HBM wants ~32-40 KB per SM).
 *  - The split variant is compiled with 8 rows per pass only: 158-166 registers (sm_90 /
 *    sm_100, no spills) at SL_MOE_FFN_GEMV_SPLIT_THREADS = 384, i.e. 12 warps per SM; and a
 *    block with fewer tiles than warps splits each tile's K over S warps (sl_moe_ffn_work:
 *    T=1 gate_up 5-6 tiles per block -> 2 warps per tile, 10-12 streaming warps per SM with
 *    8 KB each in registers plus the L2 prefetch: ~2x the bytes in flight; down 7-8 tiles
 *    -> 3 warps per tile in 2 rounds). The partial tiles are
 *    added in part order in shared memory (deterministic). 512 threads (16 warps, 128
 *    registers) spilled 64-168 bytes on sm_90, so 384.
 *  - Above 8 rows the split variant would take one weight pass per 8 rows: the wide one
 *    (16/32 rows per pass) stays. Between, T*K <= 16 x E_local with skew > 8 rows: wide.
 *    Measured comparison: `sluice bench moe-local --only moe_layer` prints both at T <= 16
 *    (the row of the variant AUTO did not take); T = 9..256 are unchanged (wide).
 *  - Measured (kernels/moe_ffn_gemv.h, SL_MOE_FFN_GEMV_SPLIT_AUTO): with the L2 prefetch on
 *    the H200 measured split slower (layer T=1 41.9 vs 36.0 us); with it off (session 7)
 *    split is 3 % faster at T = 8 and 7 % slower at T = 1 (FFN alone), hence the pair bound.
 *  - Bulk (sm_90+; ffn_bulk above): the weights go global -> shared memory by cp.async.bulk
 *    into an mbarrier ring (bytes in flight bounded by shared memory, not registers: ~96 KB
 *    per SM, one instruction per 2 KB row chunk), a producer warp and 8 consumer warps.
 *    AUTO takes it while min(capacity, T) <= SL_MOE_FFN_GEMV_BULK_MAX_ROWS only when
 *    SL_MOE_FFN_GEMV_BULK_AUTO is 1 (0: NOT MEASURED; the bench's "gemv-bulk" rows decide);
 *    below sm_90 the launcher then takes wide. */
int sl_moe_ffn_gemv_variant(const sl_moe_ffn_args_t *a) {
  if (a->gemv_variant == SL_MOE_FFN_GEMV_WIDE || a->gemv_variant == SL_MOE_FFN_GEMV_SPLIT ||
      a->gemv_variant == SL_MOE_FFN_GEMV_BULK)
    return a->gemv_variant;
  const int m = a->capacity < a->num_tokens ? a->capacity : a->num_tokens;
  if (SL_MOE_FFN_GEMV_BULK_AUTO && m <= SL_MOE_FFN_GEMV_BULK_MAX_ROWS) return SL_MOE_FFN_GEMV_BULK;
  const long pairs = (long)a->num_tokens * a->top_k;
  return SL_MOE_FFN_GEMV_SPLIT_AUTO && m <= SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS && pairs >= SL_MOE_FFN_GEMV_SPLIT_MIN_PAIRS
             ? SL_MOE_FFN_GEMV_SPLIT
             : SL_MOE_FFN_GEMV_WIDE;
}

/* The rule (documented in kernels/moe_ffn.h and NOTES.md): the streaming kernels while an
 * expert can hold at most SL_MOE_FFN_GEMV_MAX_ROWS rows (min(capacity, T)), or while the
 * average over the local experts, T*K / E_local, is at most that: then the weights are
 * read once per call at (near) full bandwidth and the tensor-core work per weight byte
 * (<= 16 tokens: 16 FLOP/B) stays far below the mma rate. Experts holding more rows than
 * that (skew) are still exact, with one more weight pass per 32 rows. */
bool sl_moe_ffn_uses_gemv(const sl_moe_ffn_args_t *a) {
  if (a->exact_rows || a->small_rows < 0) return false;
  if (a->small_rows > 0) return true;
  const int m = a->capacity < a->num_tokens ? a->capacity : a->num_tokens;
  if (m <= SL_MOE_FFN_GEMV_MAX_ROWS) return true;
  return a->num_local_experts > 0 &&
         (long)a->num_tokens * a->top_k <= (long)SL_MOE_FFN_GEMV_MAX_ROWS * a->num_local_experts;
}

sl_status_t sl_moe_ffn_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const int locals[] = {128, 16, 256, 32}; /* Qwen3-30B-A3B / DeepSeek-V3 at TP 1 and 8 */
  for (int i = 0; i < 4; i++) {
    sl_jit_spec_t spec;
    SL_CHECK(sl_moe_ffn_plan_spec(locals[i], &spec));
    SL_CHECK(fn(&spec, user));
  }
  for (int which = 0; which < 3; which++) {
    sl_jit_spec_t spec;
    SL_CHECK(sl_moe_ffn_gemv_spec(which, &spec));
    SL_CHECK(fn(&spec, user));
  }
  for (int which = 0; which < 2; which++) {
    sl_jit_spec_t spec;
    SL_CHECK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_SPLIT, &spec));
    SL_CHECK(fn(&spec, user));
  }
  /* The bulk variant uses sm_90 instructions (cp.async.bulk, mbarrier expect_tx). */
  for (int which = 0; which < 2 && arch >= SL_ARCH_HOPPER; which++) {
    sl_jit_spec_t spec;
    SL_CHECK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_BULK, &spec));
    SL_CHECK(fn(&spec, user));
  }
  return SL_OK;
}

/* ---- CPU reference -------------------------------------------------------------------- */

static void bf16_to_f32_n(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = sl_bf16_to_f32(in[i]);
}

sl_status_t sl_moe_ffn_ref(const sl_moe_ffn_args_t *a) {
  SL_CHECK(validate(a));
  const int H = a->hidden, In = a->inter, cap = a->capacity;
  sl_status_t s = SL_OK;
  float *xf = malloc((size_t)cap * H * 4), *wf = malloc((size_t)2 * In * H * 4), *hf = malloc((size_t)cap * 2 * In * 4);
  uint16_t *hb = malloc((size_t)cap * 2 * In * 2), *ab = malloc((size_t)cap * In * 2);
  float *af = malloc((size_t)cap * In * 4), *yf = malloc((size_t)cap * H * 4);
  if (!xf || !wf || !hf || !hb || !ab || !af || !yf) {
    s = SL_ERR(SL_ERR_NOMEM, "moe ffn: CPU buffers for %d rows", cap);
    goto out;
  }
  for (int e = 0; e < a->num_local_experts; e++) {
    const int n = a->expert_counts[e] < cap ? a->expert_counts[e] : cap;
    if (n <= 0) continue;
    const uint16_t *x = (const uint16_t *)a->x + (size_t)e * cap * H;
    const uint16_t *wgu = (const uint16_t *)a->w_gate_up + (size_t)e * 2 * In * H;
    const uint16_t *wd = (const uint16_t *)a->w_down + (size_t)e * H * In;
    uint16_t *y = (uint16_t *)a->y + (size_t)e * cap * H;
    bf16_to_f32_n(x, xf, (size_t)n * H);
    bf16_to_f32_n(wgu, wf, (size_t)2 * In * H);
    /* h[n, 2I] = x[n, H] . Wgu[2I, H]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, 2 * In, H, 1.0f, xf, H, wf, H, 0.0f, hf, 2 * In);
    for (size_t i = 0; i < (size_t)n * 2 * In; i++) hb[i] = sl_f32_to_bf16(hf[i]);
    sl_act_args_t act = {.kind = SL_ACT_SILU_MUL, .num_tokens = n, .inter = In, .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_BF16, .in = hb, .out = ab};
    SL_CHECK_GOTO(sl_act_ref(&act), s, out);
    bf16_to_f32_n(ab, af, (size_t)n * In);
    bf16_to_f32_n(wd, wf, (size_t)H * In);
    /* y[n, H] = a[n, In] . Wd[H, In]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, H, In, 1.0f, af, In, wf, In, 0.0f, yf, H);
    for (size_t i = 0; i < (size_t)n * H; i++) y[i] = sl_f32_to_bf16(yf[i]);
  }
out:
  free(xf);
  free(wf);
  free(hf);
  free(hb);
  free(ab);
  free(af);
  free(yf);
  return s;
}

/* ---- GPU ------------------------------------------------------------------------------ */


static sl_status_t gate_logits_ref(int T, int E, int H, const void *x, const void *w_router, float *logits) {
  float *xf = malloc((size_t)T * H * 4), *wf = malloc((size_t)E * H * 4);
  if (!xf || !wf) {
    free(xf);
    free(wf);
    return SL_ERR(SL_ERR_NOMEM, "moe gate: %d x %d", T, H);
  }
  bf16_to_f32_n(x, xf, (size_t)T * H);
  bf16_to_f32_n(w_router, wf, (size_t)E * H);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, E, H, 1.0f, xf, H, wf, H, 0.0f, logits, E);
  free(xf);
  free(wf);
  return SL_OK;
}

#ifndef SLUICE_HAVE_CUDA
static sl_status_t gate_cuda(sl_device_t *dev, int T, int E, int H, const void *x, const void *w, float *logits,
                             sl_stream_t *stream) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "moe gate: no CUDA backend in this build");
}
static sl_status_t ffn_cuda(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "moe ffn: no CUDA backend in this build");
}
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>

/* The weight-streaming kernels (kernels/moe_ffn_gemv.cu): gate_up + act into the workspace's
 * act buffer ([slot, capacity, I]), then down into y. `tiles` is a kernel's work: gate_up a
 * warp per 8 intermediate indices of a slot (I/8 per slot), down a warp per 16 output
 * columns (ceil(H/16) per slot), router logits a block per 16 experts. The kernels give each
 * block a contiguous range of tiles, so the grid is min(one resident wave, tiles) blocks: a
 * small tile count (T=1: 8 slots x 96 = 768 gate_up tiles) still spreads over every SM (~6
 * streaming warps per SM) instead of filling 96 SMs with 8 warps each. Tiles are counted
 * over `slots` (the most experts that can be non-empty); the kernels split the real ones.
 * pdl: programmatic dependent launch (sm_90+): gate_up waits (griddepcontrol.wait) before
 * its first read and then lets down launch; down reads the counts and issues its first
 * weight loads while gate_up drains, and waits before it reads the activations; gate_up's
 * warps prefetch the start of their down tiles into L2 (it is given down's grid). */
static int gemv_threads(int variant) {
  return variant == SL_MOE_FFN_GEMV_SPLIT  ? SL_MOE_FFN_GEMV_SPLIT_THREADS
         : variant == SL_MOE_FFN_GEMV_BULK ? SL_MOE_FFN_BULK_THREADS
                                           : SL_MOE_FFN_GEMV_THREADS;
}

static sl_status_t gemv_grid(sl_device_t *dev, int which, int variant, long tiles, sl_kernel_t **k, long *grid) {
  sl_jit_spec_t spec;
  SL_CHECK(sl_moe_ffn_gemv_variant_spec(which, variant, &spec));
  SL_CHECK(sl_jit_get_kernel(dev, &spec, k));
  SL_CHECK(sl_kernel_resident_blocks(*k, gemv_threads(variant), 0, grid));
  if (tiles < *grid) *grid = tiles;
  if (*grid < 1) *grid = 1;
  return SL_OK;
}

static sl_status_t gemv_launch(sl_device_t *dev, sl_kernel_t *k, int variant, long grid, bool pdl, void **args,
                               sl_stream_t *stream) {
  sl_launch_t l = {.grid = {(unsigned)grid},
                   .block = {(unsigned)gemv_threads(variant)},
                   .stream = stream,
                   .pdl = pdl && sl_device_info(dev)->arch >= SL_ARCH_HOPPER};
  return sl_kernel_launch(k, &l, args);
}

/* The bulk variant (kernels/moe_ffn_gemv.cu, FFN_BULK; sm_90+): one block per SM for each
 * kernel, 288 threads (8 consumer warps + 1 producer warp), dynamic shared memory from
 * sl_moe_ffn_bulk_geom (<= SL_MOE_FFN_BULK_SMEM_BUDGET: gate_up 3 stages of 16 x 2 KB rows
 * and down 4 stages of 16 x 1.5 KB at Qwen3 size, ~110 KB each), so a gate_up block and a
 * down block share an SM: with programmatic dependent launch down's producer streams its
 * weights while gate_up drains (no L2 hand-over prefetch needed). Why one block per SM:
 * the ring already keeps ~96 KB of copies in flight per SM (12.7 MB over 132 SMs, above
 * the ~8 MB that HBM latency x bandwidth asks for), and a second block of the same kernel
 * would halve each block's tile range without adding bytes in flight. */
static sl_status_t bulk_kernel(sl_device_t *dev, int which, int k, int local, long tiles, sl_kernel_t **kern,
                               long *grid, unsigned *smem) {
  sl_jit_spec_t spec;
  SL_CHECK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_BULK, &spec));
  SL_CHECK(sl_jit_get_kernel(dev, &spec, kern));
  const sl_moe_ffn_bulk_geom_t g = sl_moe_ffn_bulk_geom(k, local);
  *smem = (unsigned)g.smem_bytes;
  SL_CHECK(sl_kernel_set_max_shared(*kern, *smem)); /* opt-in above 48 KB; remembered per kernel */
  int per_sm = 0;
  SL_CHECK(sl_kernel_occupancy(*kern, SL_MOE_FFN_BULK_THREADS, *smem, &per_sm));
  if (per_sm < 1)
    return SL_ERR(SL_ERR_UNSUPPORTED,
                  "moe ffn bulk: kernel %s does not fit an SM with %u bytes of dynamic shared memory (K %d, %d local "
                  "experts); use gemv_variant SL_MOE_FFN_GEMV_WIDE",
                  sl_kernel_name(*kern), *smem, k, local);
  const long sms = sl_device_info(dev)->sm_count;
  *grid = tiles < sms ? tiles : sms;
  if (*grid < 1) *grid = 1;
  return SL_OK;
}

static sl_status_t ffn_bulk(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream) {
  ffn_layout_t l = ffn_layout(a->num_local_experts, a->capacity, a->num_tokens, a->top_k, a->hidden, a->inter);
  int local = a->num_local_experts, slots = (int)padded_slots(local, a->num_tokens, a->top_k), cap = a->capacity,
      H = a->hidden, In = a->inter;
  const void *counts = a->expert_counts, *x = a->x, *wgu = a->w_gate_up, *wd = a->w_down;
  void *act = (char *)a->workspace + l.act, *y = a->y, *err = a->error;
  const void *cact = act;
  unsigned long long timeout_ns = (unsigned long long)sl_config()->timeout_ms * 1000000ull;
  sl_kernel_t *k_gu, *k_dn;
  long g_gu, g_dn;
  unsigned s_gu, s_dn;
  SL_CHECK(bulk_kernel(dev, 0, H, local, (long)slots * (In / 8), &k_gu, &g_gu, &s_gu));
  SL_CHECK(bulk_kernel(dev, 1, In, local, (long)slots * ((H + 15) / 16), &k_dn, &g_dn, &s_dn));
  void *gu_args[] = {&counts, &local, &slots, &cap, &H, &In, &x, &wgu, &act, &err, &timeout_ns};
  sl_launch_t lg = {.grid = {(unsigned)g_gu}, .block = {SL_MOE_FFN_BULK_THREADS}, .shared_bytes = s_gu,
                    .stream = stream, .pdl = true};
  SL_CHECK(sl_kernel_launch(k_gu, &lg, gu_args));
  void *dn_args[] = {&counts, &local, &slots, &cap, &H, &In, &cact, &wd, &y, &err, &timeout_ns};
  sl_launch_t ld = {.grid = {(unsigned)g_dn}, .block = {SL_MOE_FFN_BULK_THREADS}, .shared_bytes = s_dn,
                    .stream = stream, .pdl = true};
  return sl_kernel_launch(k_dn, &ld, dn_args);
}

static sl_status_t ffn_gemv(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream) {
  if (a->num_local_experts > SL_MOE_FFN_GEMV_MAX_LOCAL)
    return SL_ERR(SL_ERR_INVALID, "moe ffn gemv: %d local experts > %d", a->num_local_experts,
                  SL_MOE_FFN_GEMV_MAX_LOCAL);
  ffn_layout_t l = ffn_layout(a->num_local_experts, a->capacity, a->num_tokens, a->top_k, a->hidden, a->inter);
  int local = a->num_local_experts, slots = (int)padded_slots(local, a->num_tokens, a->top_k), cap = a->capacity,
      H = a->hidden, In = a->inter;
  const void *counts = a->expert_counts, *x = a->x, *wgu = a->w_gate_up, *wd = a->w_down;
  void *act = (char *)a->workspace + l.act, *y = a->y;
  const void *cact = act;
  sl_kernel_t *k_gu, *k_dn;
  long g_gu, g_dn;
  int variant = sl_moe_ffn_gemv_variant(a); /* both kernels: gate_up computes down's split */
  if (variant == SL_MOE_FFN_GEMV_BULK) {
    if (sl_device_info(dev)->arch >= SL_ARCH_HOPPER) return ffn_bulk(dev, a, stream);
    if (a->gemv_variant == SL_MOE_FFN_GEMV_BULK)
      return SL_ERR(SL_ERR_UNSUPPORTED, "moe ffn: the bulk streaming variant needs sm_90 or newer (device sm_%d); "
                                        "use SL_MOE_FFN_GEMV_WIDE or automatic",
                    sl_device_info(dev)->arch);
    variant = SL_MOE_FFN_GEMV_WIDE;
  }
  SL_CHECK(gemv_grid(dev, 0, variant, (long)slots * (In / 8), &k_gu, &g_gu));
  SL_CHECK(gemv_grid(dev, 1, variant, (long)slots * ((H + 15) / 16), &k_dn, &g_dn));
  int down_grid = (int)g_dn; /* gate_up prefetches the first down tiles of this split */
  void *gu_args[] = {&counts, &local, &slots, &cap, &H, &In, &x, &wgu, &act, &wd, &down_grid};
  SL_CHECK(gemv_launch(dev, k_gu, variant, g_gu, true, gu_args, stream));
  void *dn_args[] = {&counts, &local, &slots, &cap, &H, &In, &cact, &wd, &y};
  return gemv_launch(dev, k_dn, variant, g_dn, true, dn_args, stream);
}

/* One cuBLAS handle per GPU for the process, created on first use; calls are serialised
 * (a handle's stream is per handle). */
enum { MAX_GPUS = 64 };
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t blas_handles[MAX_GPUS];
static void *blas_workspace[MAX_GPUS];
/* A workspace owned by us rather than cuBLAS's pool, so GEMMs can be captured in a graph
 * (cuBLAS's advice); 32 MiB is its recommendation for Hopper. */
#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

static sl_status_t blas_status(cublasStatus_t st, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS) return SL_OK;
  return SL_ERR(SL_ERR_CUDA, "moe ffn: %s failed: %s (%d)", what, cublasGetStatusString(st), (int)st);
}

/* Called with blas_lock held. */
static sl_status_t blas_handle(sl_device_t *dev, sl_stream_t *stream, cublasHandle_t *out) {
  int ord = sl_device_info(dev)->ordinal;
  if (ord < 0 || ord >= MAX_GPUS) return SL_ERR(SL_ERR_INVALID, "moe ffn: device ordinal %d", ord);
  if (!blas_handles[ord]) {
    if (cudaSetDevice(ord) != cudaSuccess) return SL_ERR(SL_ERR_CUDA, "moe ffn: cudaSetDevice(%d)", ord);
    SL_CHECK(sl_device_malloc(dev, BLAS_WORKSPACE_BYTES, &blas_workspace[ord]));
    SL_CHECK(blas_status(cublasCreate(&blas_handles[ord]), "cublasCreate"));
  }
  SL_CHECK(blas_status(cublasSetStream(blas_handles[ord], (cudaStream_t)sl_stream_native(stream)), "cublasSetStream"));
  /* cublasSetStream resets the workspace to cuBLAS's pool: set ours again. */
  SL_CHECK(blas_status(cublasSetWorkspace(blas_handles[ord], blas_workspace[ord], BLAS_WORKSPACE_BYTES),
                       "cublasSetWorkspace"));
  *out = blas_handles[ord];
  return SL_OK;
}

static sl_status_t ffn_padded(sl_device_t *dev, cublasHandle_t h, const sl_moe_ffn_args_t *a, const ffn_layout_t *l,
                              sl_stream_t *stream) {
  const int local = a->num_local_experts, H = a->hidden, In = a->inter, cap = a->capacity;
  /* An expert holds at most T rows (a token's K experts are distinct): the GEMMs run on
   * m = min(capacity, T) rows; the buffers keep their capacity stride. */
  const int m = cap < a->num_tokens ? cap : a->num_tokens;
  int slots = (int)padded_slots(local, a->num_tokens, a->top_k);
  char *ws = a->workspace;
  void **ptrs = (void **)(ws + l->ptrs);
  void **a_gu = ptrs, **b_gu = ptrs + local, **c_gu = ptrs + 2 * local, **a_dn = ptrs + 3 * local,
       **b_dn = ptrs + 4 * local, **c_dn = ptrs + 5 * local;
  void *gate_up = ws + l->gate_up, *act = ws + l->act;
  sl_jit_spec_t spec;
  sl_kernel_t *k;
  SL_CHECK(sl_moe_ffn_plan_spec(local, &spec));
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  long capl = cap, hl = H, il = In;
  const void *x = a->x, *wgu = a->w_gate_up, *wd = a->w_down, *counts = a->expert_counts;
  void *y = a->y;
  void *args[] = {&counts, &slots, &capl, &hl, &il, &x, &wgu, &wd, &y, &gate_up, &act,
                  &a_gu, &b_gu, &c_gu, &a_dn, &b_dn, &c_dn};
  sl_launch_t launch = {.grid = {1}, .block = {256}, .stream = stream};
  SL_CHECK(sl_kernel_launch(k, &launch, args));
  const float one = 1.0f, zero = 0.0f;
  /* Row-major Y[cap, 2I] = X[cap, H] W[2I, H]^T is column-major Y^T = W^T(op T) X^T. */
  SL_CHECK(blas_status(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2 * In, m, H, &one,
                                           (const void *const *)a_gu, CUDA_R_16BF, H, (const void *const *)b_gu,
                                           CUDA_R_16BF, H, &zero, c_gu, CUDA_R_16BF, 2 * In, slots,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmBatchedEx (gate_up)"));
  sl_act_args_t aa = {.kind = SL_ACT_SILU_MUL, .num_tokens = slots * cap, .inter = In, .in_dtype = SL_DTYPE_BF16,
                      .out_dtype = SL_DTYPE_BF16, .in = gate_up, .out = act};
  SL_CHECK(sl_act(dev, &aa, stream));
  SL_CHECK(blas_status(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, H, m, In, &one, (const void *const *)a_dn,
                                           CUDA_R_16BF, In, (const void *const *)b_dn, CUDA_R_16BF, In, &zero, c_dn,
                                           CUDA_R_16BF, H, slots, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmBatchedEx (down)"));
  return SL_OK;
}

static sl_status_t ffn_exact(sl_device_t *dev, cublasHandle_t h, const sl_moe_ffn_args_t *a, const ffn_layout_t *l,
                             sl_stream_t *stream) {
  const int local = a->num_local_experts, H = a->hidden, In = a->inter, cap = a->capacity;
  sl_status_t s = SL_OK;
  int32_t *counts = malloc((size_t)local * 4);
  void **host_ptrs = malloc((size_t)PTR_ARRAYS * local * sizeof(void *));
  int *m_gu = malloc((size_t)local * 4 * 6);
  float *alpha = malloc((size_t)local * 4 * 2);
  cublasOperation_t *ops = malloc((size_t)local * 2 * sizeof *ops);
  if (!counts || !host_ptrs || !m_gu || !alpha || !ops) {
    s = SL_ERR(SL_ERR_NOMEM, "moe ffn: host arrays");
    goto out;
  }
  int *n_rows = m_gu + local, *k_gu = m_gu + 2 * local, *m_dn = m_gu + 3 * local, *k_dn = m_gu + 4 * local,
      *group_size = m_gu + 5 * local;
  float *beta = alpha + local;
  cublasOperation_t *op_t = ops, *op_n = ops + local;
  SL_CHECK_GOTO(sl_memcpy(dev, counts, a->expert_counts, (size_t)local * 4, stream), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  char *ws = a->workspace;
  char *gate_up = ws + l->gate_up, *act = ws + l->act;
  const char *x = a->x, *wgu = a->w_gate_up, *wd = a->w_down;
  char *y = a->y;
  void **a_gu = host_ptrs, **b_gu = host_ptrs + local, **c_gu = host_ptrs + 2 * local, **a_dn = host_ptrs + 3 * local,
       **b_dn = host_ptrs + 4 * local, **c_dn = host_ptrs + 5 * local;
  int groups = 0;
  long rows = 0;
  for (int e = 0; e < local; e++) {
    int n = counts[e] < cap ? counts[e] : cap;
    if (n <= 0) continue;
    a_gu[groups] = (void *)(wgu + (size_t)e * 2 * In * H * 2);
    b_gu[groups] = (void *)(x + (size_t)e * cap * H * 2);
    c_gu[groups] = gate_up + (size_t)rows * 2 * In * 2;
    a_dn[groups] = (void *)(wd + (size_t)e * H * In * 2);
    b_dn[groups] = act + (size_t)rows * In * 2;
    c_dn[groups] = y + (size_t)e * cap * H * 2;
    m_gu[groups] = 2 * In;
    n_rows[groups] = n;
    k_gu[groups] = H;
    m_dn[groups] = H;
    k_dn[groups] = In;
    group_size[groups] = 1;
    alpha[groups] = 1.0f;
    beta[groups] = 0.0f;
    op_t[groups] = CUBLAS_OP_T;
    op_n[groups] = CUBLAS_OP_N;
    groups++;
    rows += n;
  }
  if (groups == 0) goto out;
  /* Pack the six arrays contiguously (groups entries each) for one copy. */
  void **dev_ptrs = (void **)(ws + l->ptrs);
  for (int i = 1; i < PTR_ARRAYS; i++) memmove(host_ptrs + (size_t)i * groups, host_ptrs + (size_t)i * local, (size_t)groups * sizeof(void *));
  SL_CHECK_GOTO(sl_memcpy(dev, dev_ptrs, host_ptrs, (size_t)PTR_ARRAYS * groups * sizeof(void *), stream), s, out);
  /* The copy reads pageable host memory: wait before the host arrays are reused. */
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  int *lda_gu = k_gu, *ldc_gu = m_gu, *lda_dn = k_dn, *ldc_dn = m_dn;
  SL_CHECK_GOTO(blas_status(cublasGemmGroupedBatchedEx(h, op_t, op_n, m_gu, n_rows, k_gu, alpha,
                                                       (const void *const *)dev_ptrs, CUDA_R_16BF, lda_gu,
                                                       (const void *const *)(dev_ptrs + groups), CUDA_R_16BF,
                                                       lda_gu, beta, dev_ptrs + 2 * groups, CUDA_R_16BF, ldc_gu,
                                                       groups, group_size, CUBLAS_COMPUTE_32F),
                            "cublasGemmGroupedBatchedEx (gate_up)"),
                s, out);
  sl_act_args_t aa = {.kind = SL_ACT_SILU_MUL, .num_tokens = (int)rows, .inter = In, .in_dtype = SL_DTYPE_BF16,
                      .out_dtype = SL_DTYPE_BF16, .in = gate_up, .out = act};
  SL_CHECK_GOTO(sl_act(dev, &aa, stream), s, out);
  SL_CHECK_GOTO(blas_status(cublasGemmGroupedBatchedEx(h, op_t, op_n, m_dn, n_rows, k_dn, alpha,
                                                       (const void *const *)(dev_ptrs + 3 * groups), CUDA_R_16BF,
                                                       lda_dn, (const void *const *)(dev_ptrs + 4 * groups),
                                                       CUDA_R_16BF, lda_dn, beta, dev_ptrs + 5 * groups,
                                                       CUDA_R_16BF, ldc_dn, groups, group_size, CUBLAS_COMPUTE_32F),
                            "cublasGemmGroupedBatchedEx (down)"),
                s, out);
out:
  free(counts);
  free(host_ptrs);
  free(m_gu);
  free(alpha);
  free(ops);
  return s;
}

static sl_status_t gate_cuda(sl_device_t *dev, int T, int E, int H, const void *x, const void *w, float *logits,
                             sl_stream_t *stream) {
  /* Few tokens: the router GEMM is a GEMV over E x H weights (0.5 MB at Qwen3 size): a block
   * per 16 experts, its warps splitting H, on tensor cores (kernels/moe_ffn_gemv.cu),
   * instead of a cuBLAS GEMM with n = T. */
  if (T <= SL_MOE_FFN_GEMV_MAX_ROWS && H % 8 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0) {
    void *args[] = {&x, &w, &logits, &T, &E, &H};
    sl_kernel_t *k;
    long grid;
    SL_CHECK(gemv_grid(dev, 2, SL_MOE_FFN_GEMV_WIDE, (E + 15) / 16, &k, &grid)); /* a block per 16 experts */
    return gemv_launch(dev, k, SL_MOE_FFN_GEMV_WIDE, grid, false, args, stream);
  }
  const float one = 1.0f, zero = 0.0f;
  pthread_mutex_lock(&blas_lock);
  cublasHandle_t h = NULL;
  sl_status_t s = blas_handle(dev, stream, &h);
  /* Row-major logits[T, E] = x[T, H] w[E, H]^T: column-major logits^T = w^T(op T) x^T. */
  if (s == SL_OK)
    s = blas_status(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, E, T, H, &one, w, CUDA_R_16BF, H, x, CUDA_R_16BF, H,
                                 &zero, logits, CUDA_R_32F, E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx (router logits)");
  pthread_mutex_unlock(&blas_lock);
  return s;
}

static sl_status_t ffn_cuda(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream) {
  if (a->num_tokens == 0) return SL_OK;
  if (sl_moe_ffn_uses_gemv(a)) {
    /* The streaming kernels read 16-byte vectors; cuBLAS takes any bf16 alignment. */
    const bool aligned = (((uintptr_t)a->x | (uintptr_t)a->w_gate_up | (uintptr_t)a->w_down |
                           (uintptr_t)a->workspace) % 16) == 0;
    if (aligned) return ffn_gemv(dev, a, stream);
    if (a->small_rows > 0)
      return SL_ERR(SL_ERR_INVALID, "moe ffn: streaming kernels forced (small_rows 1) but x, the weights or the "
                                    "workspace are not 16-byte aligned");
  }
  ffn_layout_t l = ffn_layout(a->num_local_experts, a->capacity, a->num_tokens, a->top_k, a->hidden, a->inter);
  pthread_mutex_lock(&blas_lock);
  cublasHandle_t h = NULL;
  sl_status_t s = blas_handle(dev, stream, &h);
  if (s == SL_OK) s = a->exact_rows ? ffn_exact(dev, h, a, &l, stream) : ffn_padded(dev, h, a, &l, stream);
  pthread_mutex_unlock(&blas_lock);
  return s;
}
#endif

sl_status_t sl_moe_ffn(sl_device_t *dev, const sl_moe_ffn_args_t *a, sl_stream_t *stream) {
  SL_CHECK(validate(a));
  if (sl_device_backend(dev) == SL_BACKEND_CUDA) return ffn_cuda(dev, a, stream);
  return sl_moe_ffn_ref(a);
}

sl_status_t sl_moe_gate_logits(sl_device_t *dev, int num_tokens, int num_experts, int hidden, const void *x,
                               const void *w_router, float *logits, sl_stream_t *stream) {
  if (num_tokens < 0 || num_experts < 1 || hidden < 1 || (num_tokens && (!x || !w_router || !logits)))
    return SL_ERR(SL_ERR_INVALID, "moe gate: bad arguments (T %d, E %d, H %d)", num_tokens, num_experts, hidden);
  if (num_tokens == 0) return SL_OK;
  if (sl_device_backend(dev) == SL_BACKEND_CUDA)
    return gate_cuda(dev, num_tokens, num_experts, hidden, x, w_router, logits, stream);
  return gate_logits_ref(num_tokens, num_experts, hidden, x, w_router, logits);
}
