/* The peer FFI (bench/peer_ffi.c, libsluice_peer_ffi.so) as a Python harness uses it: the
 * library dlopen()ed, its sl_peer_ffi_* symbols looked up by name, run on the CPU backend (SL_DEVICE=cpu,
 * host pointers) and checked against definitions computed here in double precision (RMSNorm,
 * SiLU-and-mul), against the CPU references bit for bit where an entry only forwards
 * (sl_rmsnorm_cpu with the residual, sl_act_ref for SiLU/GELU into bf16 and FP8, sl_quant_ref and
 * sl_dequant_ref for every format), and against the rules' definitions where a wrong argument
 * would still give plausible output (the fused residual's sum, the RCEIL exponent); its errors
 * are codes with a message. argv[1]: the library's path. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/act.h"
#include "kernels/quant.h"
#include "kernels/rmsnorm.h"
#include "kernels/sl_dtype.h"
#include "sl_test.h"

static const char *lib_path;

typedef struct {
  void *h;
  int (*open)(void);
  int (*is_gpu)(void);
  const char *(*error)(void);
  int (*rmsnorm)(void *, const void *, const void *, int, int, float);
  int (*rmsnorm_cfg)(void *, const void *, const void *, int, int, float, int, int, int, int, int);
  void (*kq_overrides)(int, int, int, int, int);
  void (*rms_row_loop)(int);
  void (*act16_pack)(int);
  int (*silu)(void *, const void *, int, int);
  int (*quant)(void *, float *, const void *, int, int);
  int (*rmsnorm_res)(void *, void *, const void *, const void *, int, int, float);
  int (*act)(void *, const void *, int, int, int);
  int (*act_fp8)(void *, float *, const void *, int, int, int);
  size_t (*codes_bytes)(int, int, int);
  size_t (*scales_bytes)(int, int, int, int);
  int (*quant_any)(void *, void *, const void *, int, int, int, int, int, float);
  int (*dequant)(void *, const void *, const void *, int, int, int, int, float);
  int (*sync)(void);
  int (*set_stream)(void *);
  void (*close)(void);
} ffi_t;

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) fail_msg("%s: no symbol %s", lib_path, name);
  return p;
}

static ffi_t load(void) {
  ffi_t f = {.h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL)};
  if (!f.h) fail_msg("dlopen %s: %s", lib_path, dlerror());
  f.open = (int (*)(void))sym(f.h, "sl_peer_ffi_open");
  f.is_gpu = (int (*)(void))sym(f.h, "sl_peer_ffi_is_gpu");
  f.error = (const char *(*)(void))sym(f.h, "sl_peer_ffi_error");
  f.rmsnorm = (int (*)(void *, const void *, const void *, int, int, float))sym(f.h, "sl_peer_ffi_rmsnorm_bf16");
  f.rmsnorm_cfg = (int (*)(void *, const void *, const void *, int, int, float, int, int, int, int, int))sym(
      f.h, "sl_peer_ffi_rmsnorm_bf16_cfg");
  f.kq_overrides = (void (*)(int, int, int, int, int))sym(f.h, "sl_peer_ffi_kq_overrides");
  f.rms_row_loop = (void (*)(int))sym(f.h, "sl_peer_ffi_rmsnorm_row_loop");
  f.act16_pack = (void (*)(int))sym(f.h, "sl_peer_ffi_act16_pack");
  f.silu = (int (*)(void *, const void *, int, int))sym(f.h, "sl_peer_ffi_silu_mul_bf16");
  f.quant = (int (*)(void *, float *, const void *, int, int))sym(f.h, "sl_peer_ffi_quant_fp8_g128_bf16");
  f.rmsnorm_res = (int (*)(void *, void *, const void *, const void *, int, int, float))sym(
      f.h, "sl_peer_ffi_rmsnorm_residual_bf16");
  f.act = (int (*)(void *, const void *, int, int, int))sym(f.h, "sl_peer_ffi_act_bf16");
  f.act_fp8 = (int (*)(void *, float *, const void *, int, int, int))sym(f.h, "sl_peer_ffi_act_fp8_bf16");
  f.codes_bytes = (size_t(*)(int, int, int))sym(f.h, "sl_peer_ffi_quant_codes_bytes");
  f.scales_bytes = (size_t(*)(int, int, int, int))sym(f.h, "sl_peer_ffi_quant_scales_bytes");
  f.quant_any =
      (int (*)(void *, void *, const void *, int, int, int, int, int, float))sym(f.h, "sl_peer_ffi_quant_bf16");
  f.dequant =
      (int (*)(void *, const void *, const void *, int, int, int, int, float))sym(f.h, "sl_peer_ffi_dequant_bf16");
  f.sync = (int (*)(void))sym(f.h, "sl_peer_ffi_sync");
  f.set_stream = (int (*)(void *))sym(f.h, "sl_peer_ffi_set_stream");
  f.close = (void (*)(void))sym(f.h, "sl_peer_ffi_close");
  return f;
}

static uint16_t *rand_bf16(uint64_t *rng, size_t n, float scale) {
  uint16_t *p = malloc(n * 2);
  assert_non_null(p);
  for (size_t i = 0; i < n; i++)
    p[i] = sl_f32_to_bf16(scale * sl_test_rand_normal(rng));
  return p;
}

/* |got - want| within 2 bf16 ulps of want (plus a tiny absolute floor); NaN fails. */
static int bf16_close(uint16_t got, double want) {
  const float g = sl_bf16_to_f32(got);
  return !isnan(g) && fabs((double)g - want) <= 2.0 * fabs(want) / 128.0 + 1e-6;
}

/* malloc of n bytes filled with 0xff (NaN in every float format but E2M1): what an entry must overwrite */
static void *poisoned(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  memset(p, 0xff, n);
  return p;
}

/* The fused residual add: the reference's y and residual bit for bit, and the residual is bf16(x + residual). */
static void check_rmsnorm_residual(ffi_t *f, uint64_t *rng, int rows, int hidden) {
  const size_t n = (size_t)rows * hidden;
  uint16_t *x = rand_bf16(rng, n, 2.0f), *w = rand_bf16(rng, hidden, 1.0f), *res0 = rand_bf16(rng, n, 2.0f);
  uint16_t *res = malloc(n * 2), *res_ref = malloc(n * 2), *y = poisoned(n * 2), *y_ref = poisoned(n * 2);
  assert_true(res && res_ref);
  memcpy(res, res0, n * 2);
  memcpy(res_ref, res0, n * 2);
  assert_int_equal(f->rmsnorm_res(y, res, x, w, rows, hidden, 1e-6f), 0);
  assert_int_equal(f->sync(), 0);
  const sl_rmsnorm_args_t a = {.x = x,
                               .y = y_ref,
                               .residual = res_ref,
                               .weight = w,
                               .rows = rows,
                               .hidden = hidden,
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .res_dtype = SL_DTYPE_BF16,
                               .eps = 1e-6f};
  SL_ASSERT_OK(sl_rmsnorm_cpu(&a));
  assert_memory_equal(res, res_ref, n * 2);
  assert_memory_equal(y, y_ref, n * 2);
  for (size_t i = 0; i < n; i++)
    if (res[i] != sl_f32_to_bf16(sl_bf16_to_f32(x[i]) + sl_bf16_to_f32(res0[i])))
      fail_msg("rmsnorm+residual: residual[%zu] is not bf16(x + residual)", i);
  free(x), free(w), free(res0), free(res), free(res_ref), free(y), free(y_ref);
}

/* SiLU and GELU(tanh)-and-mul into bf16 and into FP8 group-128: sl_act_ref's bytes (and scales) exactly. */
static void check_act(ffi_t *f, uint64_t *rng, int rows, int inter) {
  const size_t n = (size_t)rows * inter;
  uint16_t *x = rand_bf16(rng, 2 * n, 3.0f);
  for (int kind = SL_ACT_SILU_MUL; kind <= SL_ACT_GELU_TANH_MUL; kind++) {
    uint16_t *y = poisoned(n * 2), *y_ref = poisoned(n * 2);
    assert_int_equal(f->act(y, x, rows, inter, kind), 0);
    assert_int_equal(f->sync(), 0);
    sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                       .num_tokens = rows,
                       .inter = inter,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_BF16,
                       .in = x,
                       .out = y_ref};
    SL_ASSERT_OK(sl_act_ref(&a));
    assert_memory_equal(y, y_ref, n * 2);
    if (kind == SL_ACT_SILU_MUL) { /* the dedicated SiLU entry is the same call */
      memset(y_ref, 0xff, n * 2);
      assert_int_equal(f->silu(y_ref, x, rows, inter), 0);
      assert_int_equal(f->sync(), 0);
      assert_memory_equal(y, y_ref, n * 2);
    }
    uint8_t *codes = poisoned(n), *codes_ref = poisoned(n);
    float *scales = poisoned(n / 128 * 4), *scales_ref = poisoned(n / 128 * 4);
    assert_int_equal(f->act_fp8(codes, scales, x, rows, inter, kind), 0);
    assert_int_equal(f->sync(), 0);
    a.out_dtype = SL_DTYPE_FP8_E4M3, a.out = codes_ref, a.out_scales = scales_ref;
    SL_ASSERT_OK(sl_act_ref(&a));
    assert_memory_equal(codes, codes_ref, n);
    assert_memory_equal(scales, scales_ref, n / 128 * 4);
    free(y), free(y_ref), free(codes), free(codes_ref), free(scales), free(scales_ref);
  }
  uint16_t *y = poisoned(n * 2);
  assert_int_equal(f->act(y, x, rows, inter, 7), SL_ERR_INVALID);
  assert_non_null(strstr(f->error(), "kind 7"));
  assert_int_equal(f->act_fp8(y, (float *)y, x, rows, 100, SL_ACT_SILU_MUL), SL_ERR_INVALID); /* inter % 128 */
  free(y), free(x);
}

/* One quantizer configuration: the sizes the FFI reports are the library's, the codes and scales
 * sl_quant_ref's bit for bit, and the FFI's dequantization of them sl_dequant_ref's. Returns the
 * scales (the caller frees) for rule checks. */
static uint8_t *check_quant_one(ffi_t *f, const uint16_t *x, int rows, int hidden, sl_quant_format_t format,
                                sl_quant_rule_t rule, sl_quant_layout_t layout, float global_scale) {
  const size_t nc = sl_quant_codes_bytes(format, rows, hidden);
  const size_t ns = sl_quant_scales_bytes(format, layout, rows, hidden);
  assert_int_equal(f->codes_bytes((int)format, rows, hidden), nc);
  assert_int_equal(f->scales_bytes((int)format, (int)layout, rows, hidden), ns);
  uint8_t *codes = poisoned(nc), *codes_ref = poisoned(nc), *scales = poisoned(ns), *scales_ref = poisoned(ns);
  assert_int_equal(f->quant_any(codes, scales, x, rows, hidden, (int)format, (int)rule, (int)layout, global_scale), 0);
  assert_int_equal(f->sync(), 0);
  const sl_quant_args_t q = {.format = format,
                             .rule = rule,
                             .layout = layout,
                             .num_tokens = rows,
                             .hidden = hidden,
                             .in_dtype = SL_DTYPE_BF16,
                             .in = x,
                             .codes = codes_ref,
                             .scales = scales_ref,
                             .global_scale = global_scale};
  SL_ASSERT_OK(sl_quant_ref(&q));
  if (memcmp(codes, codes_ref, nc) || memcmp(scales, scales_ref, ns))
    fail_msg("quant format %d rule %d layout %d: not sl_quant_ref's bytes", (int)format, (int)rule, (int)layout);
  const size_t no = (size_t)rows * hidden * 2;
  uint16_t *y = poisoned(no), *y_ref = poisoned(no);
  assert_int_equal(f->dequant(y, codes, scales, rows, hidden, (int)format, (int)layout, global_scale), 0);
  assert_int_equal(f->sync(), 0);
  const sl_dequant_args_t d = {.format = format,
                               .layout = layout,
                               .num_tokens = rows,
                               .hidden = hidden,
                               .codes = codes,
                               .scales = scales,
                               .global_scale = global_scale,
                               .out_dtype = SL_DTYPE_BF16,
                               .out = y_ref};
  SL_ASSERT_OK(sl_dequant_ref(&d));
  if (memcmp(y, y_ref, no)) fail_msg("dequant format %d layout %d: not sl_dequant_ref's", (int)format, (int)layout);
  free(codes), free(codes_ref), free(scales_ref), free(y), free(y_ref);
  return scales;
}

static void check_quant(ffi_t *f, uint64_t *rng, int rows, int hidden) {
  uint16_t *x = rand_bf16(rng, (size_t)rows * hidden, 2.0f);
  float absmax = 0;
  for (size_t i = 0; i < (size_t)rows * hidden; i++)
    absmax = fmaxf(absmax, fabsf(sl_bf16_to_f32(x[i])));
  free(check_quant_one(f, x, rows, hidden, SL_QUANT_FP8_GROUP, SL_QUANT_RULE_IEEE, SL_QUANT_LAYOUT_LINEAR, 1.0f));
  /* what `sluice bench kernels` and the peers run: RCEIL, linear scales, NVFP4 with global scale 1 */
  for (sl_quant_format_t fmt = SL_QUANT_MXFP8; fmt <= SL_QUANT_NVFP4; fmt++) {
    uint8_t *sc = check_quant_one(f, x, rows, hidden, fmt, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_LINEAR, 1.0f);
    if (fmt != SL_QUANT_NVFP4) { /* the rule arrived: E8M0 e with 2^(e-1) < absmax / fmt_max <= 2^e per block */
      const int block = 32;
      const double fmt_max = fmt == SL_QUANT_MXFP8 ? 448.0 : 6.0;
      for (int b = 0; b < rows * hidden / block; b++) {
        double m = 0;
        for (int i = 0; i < block; i++)
          m = fmax(m, fabs(sl_bf16_to_f32(x[(size_t)b * block + i])));
        const double s = m / fmt_max, p = ldexp(1.0, (int)sc[b] - 127);
        if (m > 0 && !(p >= s && p / 2 < s))
          fail_msg("format %d block %d: E8M0 %d for absmax %g", (int)fmt, b, sc[b], m);
      }
    }
    free(sc);
  }
  /* the other rule and layout, and a tensor scale */
  free(check_quant_one(f, x, rows, hidden, SL_QUANT_MXFP4, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_SWIZZLED, 1.0f));
  free(check_quant_one(f, x, rows, hidden, SL_QUANT_NVFP4, SL_QUANT_RULE_CEIL, SL_QUANT_LAYOUT_SWIZZLED,
                       448.0f * 6.0f / absmax));
  /* what the library refuses is refused with its message; sizes of what it does not define are 0 */
  uint8_t *buf = poisoned((size_t)rows * hidden * 4);
  assert_int_equal(
      f->quant_any(buf, buf, x, rows, hidden, SL_QUANT_FP8_GROUP, SL_QUANT_RULE_FLOOR, SL_QUANT_LAYOUT_LINEAR, 1.0f),
      SL_ERR_INVALID);
  assert_non_null(strstr(f->error(), "scale rule"));
  assert_int_equal(f->quant_any(buf, buf, x, rows, hidden, 9, 0, 0, 1.0f), SL_ERR_INVALID);
  assert_non_null(strstr(f->error(), "unknown format 9"));
  assert_int_equal(f->dequant(buf, buf, buf, rows, hidden, SL_QUANT_NVFP4, SL_QUANT_LAYOUT_LINEAR, 0.0f),
                   SL_ERR_INVALID);
  assert_non_null(strstr(f->error(), "global_scale"));
  assert_int_equal(f->codes_bytes(9, rows, hidden), 0);
  assert_int_equal(f->scales_bytes(SL_QUANT_MXFP8, 5, rows, hidden), 0);
  assert_int_equal(f->scales_bytes(SL_QUANT_NVFP4, SL_QUANT_LAYOUT_LINEAR, rows, 100), 0);
  free(buf), free(x);
}

static void test_ops_on_the_cpu_backend(void **state) {
  (void)state;
  ffi_t f = load();
  assert_int_not_equal(f.rmsnorm(NULL, NULL, NULL, 1, 64, 1e-6f), 0); /* before sl_peer_ffi_open: an error */
  assert_non_null(strstr(f.error(), "sl_peer_ffi_open"));
  assert_int_equal(f.open(), 0);
  assert_int_equal(f.is_gpu(), 0);
  /* the default stream is the only one the CPU backend has: a native handle is refused */
  assert_int_equal(f.set_stream(NULL), 0);
  assert_int_equal(f.set_stream((void *)&f), SL_ERR_INVALID);
  assert_non_null(strstr(f.error(), "stream"));
  uint64_t rng = sl_test_seed();
  const int rows = 7, hidden = 256, inter = 384;
  /* RMSNorm */
  uint16_t *x = rand_bf16(&rng, (size_t)rows * hidden, 2.0f), *w = rand_bf16(&rng, hidden, 1.0f);
  uint16_t *y = malloc((size_t)rows * hidden * 2);
  assert_non_null(y);
  memset(y, 0xff, (size_t)rows * hidden * 2); /* NaN poison */
  assert_int_equal(f.rmsnorm(y, x, w, rows, hidden, 1e-6f), 0);
  assert_int_equal(f.sync(), 0);
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < hidden; i++)
      ss += pow(sl_bf16_to_f32(x[r * hidden + i]), 2);
    const double inv = 1.0 / sqrt(ss / hidden + 1e-6);
    for (int i = 0; i < hidden; i++)
      if (!bf16_close(y[r * hidden + i], sl_bf16_to_f32(x[r * hidden + i]) * inv * sl_bf16_to_f32(w[i])))
        fail_msg("rmsnorm row %d col %d: %g", r, i, sl_bf16_to_f32(y[r * hidden + i]));
  }
  /* The same with launch knobs given: checked (a bad one is refused), the same result. */
  uint16_t *y2 = malloc((size_t)rows * hidden * 2);
  assert_non_null(y2);
  memset(y2, 0xff, (size_t)rows * hidden * 2);
  assert_int_equal(f.rmsnorm_cfg(y2, x, w, rows, hidden, 1e-6f, 16, 2, SL_RMSNORM_WEIGHT_REGS, SL_RMSNORM_GRID_FULL,
                                 SL_RMSNORM_RSQ_ON),
                   0);
  assert_int_equal(f.sync(), 0);
  assert_memory_equal(y2, y, (size_t)rows * hidden * 2);
  assert_int_equal(f.rmsnorm_cfg(y2, x, w, rows, hidden, 1e-6f, 16, 33, 0, 0, 0), SL_ERR_INVALID);
  assert_non_null(strstr(f.error(), "warps 33"));
  assert_int_equal(f.rmsnorm_cfg(y2, x, w, rows, hidden, 1e-6f, 0, 0, 0, 0, 3), SL_ERR_INVALID);
  assert_non_null(strstr(f.error(), "fast_rsqrt 3"));
  /* The row_loop knob of the _cfg calls: the one-row kernel forced (the same result), an unknown
   * value refused, then AUTO again. */
  memset(y2, 0xff, (size_t)rows * hidden * 2);
  f.rms_row_loop(SL_RMSNORM_LOOP_OFF);
  assert_int_equal(f.rmsnorm_cfg(y2, x, w, rows, hidden, 1e-6f, 16, 2, SL_RMSNORM_WEIGHT_REGS, SL_RMSNORM_GRID_FULL,
                                 SL_RMSNORM_RSQ_ON),
                   0);
  assert_int_equal(f.sync(), 0);
  assert_memory_equal(y2, y, (size_t)rows * hidden * 2);
  f.rms_row_loop(3);
  assert_int_equal(f.rmsnorm_cfg(y2, x, w, rows, hidden, 1e-6f, 0, 0, 0, 0, 0), SL_ERR_INVALID);
  assert_non_null(strstr(f.error(), "row_loop 3"));
  assert_int_equal(f.rmsnorm(y2, x, w, rows, hidden, 1e-6f), 0); /* the table's launch: the knob does not apply */
  assert_int_equal(f.sync(), 0);
  assert_memory_equal(y2, y, (size_t)rows * hidden * 2);
  f.rms_row_loop(SL_RMSNORM_LOOP_AUTO);
  free(y2);
  /* SiLU-and-mul: [rows, 2 inter] -> [rows, inter], under launch overrides (the CPU backend has
   * no launch; the symbol is there and the result unchanged), then the table's again */
  f.kq_overrides(4, 1, 0, 1, 16);
  f.act16_pack(4);
  uint16_t *g = rand_bf16(&rng, (size_t)rows * 2 * inter, 3.0f), *a = malloc((size_t)rows * inter * 2);
  assert_non_null(a);
  memset(a, 0xff, (size_t)rows * inter * 2);
  assert_int_equal(f.silu(a, g, rows, inter), 0);
  assert_int_equal(f.sync(), 0);
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < inter; i++) {
      const double gv = sl_bf16_to_f32(g[(size_t)r * 2 * inter + i]),
                   uv = sl_bf16_to_f32(g[(size_t)r * 2 * inter + inter + i]);
      if (!bf16_close(a[r * inter + i], gv / (1.0 + exp(-gv)) * uv)) fail_msg("silu row %d col %d", r, i);
    }
  f.kq_overrides(0, 0, -1, 0, 0);
  f.act16_pack(0);
  /* FP8 group-128: the reference quantizer's bytes and scales exactly */
  uint8_t *codes = malloc((size_t)rows * hidden), *codes_ref = malloc((size_t)rows * hidden);
  float *scales = malloc((size_t)rows * (hidden / 128) * 4), *scales_ref = malloc((size_t)rows * (hidden / 128) * 4);
  assert_true(codes && codes_ref && scales && scales_ref);
  memset(codes, 0xff, (size_t)rows * hidden);
  memset(scales, 0xff, (size_t)rows * (hidden / 128) * 4);
  assert_int_equal(f.quant(codes, scales, x, rows, hidden), 0);
  assert_int_equal(f.sync(), 0);
  const sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                             .rule = SL_QUANT_RULE_IEEE,
                             .layout = SL_QUANT_LAYOUT_LINEAR,
                             .num_tokens = rows,
                             .hidden = hidden,
                             .in_dtype = SL_DTYPE_BF16,
                             .in = x,
                             .codes = codes_ref,
                             .scales = scales_ref};
  SL_ASSERT_OK(sl_quant_ref(&q));
  assert_memory_equal(codes, codes_ref, (size_t)rows * hidden);
  assert_memory_equal(scales, scales_ref, (size_t)rows * (hidden / 128) * 4);
  /* the entries over the fused residual norm, GELU, fused FP8 activations and every quantizer */
  check_rmsnorm_residual(&f, &rng, rows, hidden);
  check_act(&f, &rng, rows, inter);
  check_quant(&f, &rng, rows, hidden);
  /* a bad shape is refused with a message, nothing written */
  assert_int_equal(f.rmsnorm(y, x, w, rows, 100, 1e-6f), SL_ERR_INVALID);
  assert_non_null(strstr(f.error(), "hidden 100"));
  f.close();
  assert_int_equal(f.is_gpu(), -1);
  free(x), free(w), free(y), free(g), free(a), free(codes), free(codes_ref), free(scales), free(scales_ref);
  dlclose(f.h);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s libsluice_peer_ffi.so\n", argv[0]);
    return 2;
  }
  lib_path = argv[1];
  setenv("SL_DEVICE", "cpu", 1); /* host pointers below, also on a GPU machine */
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops_on_the_cpu_backend)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
