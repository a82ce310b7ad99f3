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
 * these defaults): at several rows per block the kernel is built for >= 32 resident warps
 * (__launch_bounds__ minimum 32 / warps blocks: 64 registers), so 8 warps = 4 blocks per SM at
 * hidden <= 4096 (4 or 2 rows per block, each on its own barrier) keeps 32 warps x a row of
 * loads in flight (2 KB per warp at h=2048: 64 KB per SM, ~2x what HBM needs); 16 warps would
 * give the same residency with coarser blocks and a longer last round. 7168 takes 14 (2 rows
 * of 7 warps, 72 registers, 2 blocks = 28 warps); 8192 and 16384 16. Unchanged entries. */
typedef struct {
  int max_hidden; /* entry applies to hidden <= max_hidden (first match) */
  int warps;      /* warps per block; rounded down to a multiple of the row's warps */
} warps_entry_t;

static const warps_entry_t hopper_prefill[] = {
    {1024, 8},
    {4096, 8},
    {8192, 16},
    {SL_RMSNORM_MAX_HIDDEN, 16},
};
static const warps_entry_t blackwell_prefill[] = {
    {1024, 8},
    {4096, 8},
    {8192, 16},
    {SL_RMSNORM_MAX_HIDDEN, 16},
};

static int table_warps(int arch, int hidden) {
  const warps_entry_t *t = arch >= SL_ARCH_BLACKWELL ? blackwell_prefill : hopper_prefill;
  size_t n = arch >= SL_ARCH_BLACKWELL ? sizeof blackwell_prefill / sizeof *t : sizeof hopper_prefill / sizeof *t;
  for (size_t i = 0; i < n; i++)
    if (hidden <= t[i].max_hidden) return t[i].warps;
  return t[n - 1].warps;
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
  if (a->warps != 0) {
    int rw = SL_RMSNORM_ROW_WARPS(a->hidden);
    if (a->warps < rw || a->warps > 32 || a->warps % rw != 0)
      return SL_ERR(SL_ERR_INVALID, "rmsnorm: warps %d for hidden %d must be a multiple of %d, <= 32", a->warps,
                    a->hidden, rw);
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
  int rw = SL_RMSNORM_ROW_WARPS(a->hidden);
  bool full = a->grid_policy == SL_RMSNORM_GRID_FULL ||
              (a->grid_policy == SL_RMSNORM_GRID_AUTO && a->rows >= SL_RMSNORM_FULL_GRID_ROWS);
  int warps = a->warps;
  if (warps == 0) {
    if (a->rows < sm_count)
      warps = rw;
    else if (full && a->hidden <= 2048)
      warps = rw; /* measured: one row per block is best for short rows on a full grid (h=2048
                     T=8192: 76.9% vs 68.5% at 8 warps) */
    else {
      warps = table_warps(arch, a->hidden) / rw * rw;
      if (warps < rw) warps = rw;
    }
  }
  memset(pt, 0, sizeof *pt);
  pt->hidden = a->hidden;
  pt->in_dtype = a->in_dtype;
  pt->out_dtype = a->out_dtype;
  pt->w_dtype = a->w_dtype;
  pt->residual = a->residual != NULL;
  pt->res_dtype = pt->residual ? a->res_dtype : a->in_dtype;
  pt->eps = a->eps;
  pt->weight_bias = a->weight_bias;
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
  return SL_OK;
}

/* ---- CPU reference --------------------------------------------------------------------
 * Same arithmetic as the kernel: fp32 throughout, the residual sum rounded to its dtype
 * before it is squared, scale = (x * inv) * (bias + w), one rounding at the store. The sum
 * of squares uses 8 interleaved fp32 partial sums (the kernel's order differs; the
 * difference is far below one bf16 ulp). */
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
  sl_jit_spec_t spec;
  SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  const int threads = pt.warps * 32, rows_per_block = pt.warps / SL_RMSNORM_ROW_WARPS(a->hidden);
  long grid = ((long)a->rows + rows_per_block - 1) / rows_per_block;
  if (!pt.full_grid) { /* no larger than the device keeps resident: the loop strides */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, threads, 0, &resident));
    if (grid > resident) grid = resident;
  }
  sl_launch_t l = {.grid = {(unsigned)grid}, .block = {(unsigned)threads}, .stream = stream};
  const void *x = a->x, *w = a->weight;
  void *y = a->y, *res = a->residual;
  int rows = a->rows;
  void *args[] = {&x, &y, &res, &w, &rows};
  SL_CHECK(sl_kernel_launch(k, &l, args));
  return SL_OK;
}

/* ---- JIT points ------------------------------------------------------------------------
 * What deployments use, plus every dtype pair and the size classes the tests cover. */
sl_status_t sl_rmsnorm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const sl_dtype_t dts[] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};
  /* 128: per-head baseline of the QK-norm benchmark; 520: not a power of two; the rest model sizes. */
  static const int hiddens[] = {128, 512, 520, 2048, 4096, 7168, 8192, 16384};
  sl_jit_spec_t spec;
  sl_rmsnorm_point_t pt = {.eps = 1e-6f, .weight_bias = 0.0f};
  /* Every dtype in/out pair, both variants, at one size, decode and prefill warps. */
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 3; o++)
      for (int res = 0; res < 2; res++) {
        pt.hidden = 4096;
        pt.in_dtype = pt.w_dtype = pt.res_dtype = dts[i];
        pt.out_dtype = dts[o];
        pt.residual = res;
        pt.warps = SL_RMSNORM_ROW_WARPS(4096);
        SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
        SL_CHECK(fn(&spec, user));
      }
  /* Every size class in bf16, both variants, decode warps and the table's prefill warps. */
  for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
    for (int res = 0; res < 2; res++)
      for (int prefill = 0; prefill < 2; prefill++) {
        sl_rmsnorm_args_t a = {.rows = prefill ? 100000 : 1,
                               .hidden = hiddens[h],
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .res_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f};
        SL_CHECK(sl_rmsnorm_choose(&a, arch, 132, &pt));
        pt.residual = res;
        pt.res_dtype = SL_DTYPE_BF16;
        SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
        SL_CHECK(fn(&spec, user));
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
                            .warps = 2};
  SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
  SL_CHECK(fn(&spec, user));
  pt.weight_bias = 0.0f;
  pt.res_dtype = SL_DTYPE_F32;
  pt.w_dtype = SL_DTYPE_F32;
  SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
  SL_CHECK(fn(&spec, user));
  /* The largest warps-per-block candidate --tune launches (1024 threads: a 64-register budget,
   * the point most likely to stop compiling cleanly); the others compile on demand. */
  int cand[8], n = sl_rmsnorm_warp_candidates(4096, cand);
  for (int c = n - 1; c < n; c++) {
    pt = (sl_rmsnorm_point_t){.hidden = 4096,
                              .in_dtype = SL_DTYPE_BF16,
                              .out_dtype = SL_DTYPE_BF16,
                              .w_dtype = SL_DTYPE_BF16,
                              .res_dtype = SL_DTYPE_BF16,
                              .eps = 1e-6f,
                              .warps = cand[c]};
    SL_CHECK(sl_rmsnorm_spec(&spec, &pt));
    SL_CHECK(fn(&spec, user));
  }
  return SL_OK;
}
