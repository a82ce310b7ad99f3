/* The peer FFI (bench/peer_ffi.c, libsluice_peer_ffi.so) as a Python harness uses it: the
 * library dlopen()ed, its sl_peer_ffi_* symbols looked up by name, run on the CPU backend (SL_DEVICE=cpu,
 * host pointers) and checked against definitions computed here in double precision (RMSNorm,
 * SiLU-and-mul) and against sl_quant_ref (FP8 group-128, bit for bit); its errors are codes
 * with a message. argv[1]: the library's path. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
  void (*kq_overrides)(int, int, int, int);
  int (*silu)(void *, const void *, int, int);
  int (*quant)(void *, float *, const void *, int, int);
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
  f.kq_overrides = (void (*)(int, int, int, int))sym(f.h, "sl_peer_ffi_kq_overrides");
  f.silu = (int (*)(void *, const void *, int, int))sym(f.h, "sl_peer_ffi_silu_mul_bf16");
  f.quant = (int (*)(void *, float *, const void *, int, int))sym(f.h, "sl_peer_ffi_quant_fp8_g128_bf16");
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
  free(y2);
  /* SiLU-and-mul: [rows, 2 inter] -> [rows, inter], under launch overrides (the CPU backend has
   * no launch; the symbol is there and the result unchanged), then the table's again */
  f.kq_overrides(4, 1, 0, 1);
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
  f.kq_overrides(0, 0, -1, 0);
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
