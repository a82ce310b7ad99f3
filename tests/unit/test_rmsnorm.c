/* Unit tests of the RMSNorm CPU reference against the definition in double precision. */
#include "kernels/rmsnorm.h"
#include "sl_test_kernels.h"

typedef struct {
  int rows, hidden;
  sl_dtype_t in, out, w, res;
  float bias;
  int residual;
} case_t;

/* Run the CPU reference (through the entry point on the CPU device) and check every output
 * against y = x / sqrt(mean(x^2) + eps) * (bias + w) computed in double from the same inputs. */
static void check_case(sl_device_t *dev, uint64_t *rng, const case_t *c) {
  const size_t n = (size_t)c->rows * (size_t)c->hidden;
  const float eps = 1e-6f;
  void *x = sl_test_alloc(sl_dtype_bytes(c->in, n)), *y = sl_test_alloc(sl_dtype_bytes(c->out, n));
  void *w = sl_test_alloc(sl_dtype_bytes(c->w, (size_t)c->hidden));
  void *res = c->residual ? sl_test_alloc(sl_dtype_bytes(c->res, n)) : NULL;
  void *res_in = c->residual ? sl_test_alloc(sl_dtype_bytes(c->res, n)) : NULL;
  sl_test_fill(rng, x, c->in, n, 2.0f, 1);
  sl_test_fill(rng, w, c->w, (size_t)c->hidden, 1.5f, 0);
  if (res) {
    sl_test_fill(rng, res, c->res, n, 3.0f, 1);
    memcpy(res_in, res, sl_dtype_bytes(c->res, n));
  }
  memset(y, 0xff, sl_dtype_bytes(c->out, n));
  sl_rmsnorm_args_t a = {.x = x,
                         .y = y,
                         .residual = res,
                         .weight = w,
                         .rows = c->rows,
                         .hidden = c->hidden,
                         .in_dtype = c->in,
                         .out_dtype = c->out,
                         .w_dtype = c->w,
                         .res_dtype = c->res,
                         .eps = eps,
                         .weight_bias = c->bias};
  SL_ASSERT_OK(sl_rmsnorm(dev, &a, NULL));
  size_t bad = 0;
  const double atol = c->out == SL_DTYPE_F16 ? 6e-8 : 1e-30;
  /* fp32 outputs carry the fp32 arithmetic's own error (sum of up to 16384 squares). */
  const double k = c->out == SL_DTYPE_F32 ? 128.0 : 1.05;
  for (int r = 0; r < c->rows; r++) {
    size_t base = (size_t)r * (size_t)c->hidden;
    double ss = 0;
    for (int i = 0; i < c->hidden; i++) {
      double v = sl_load_f32(x, c->in, base + (size_t)i);
      if (res) {
        double want_res = v + (double)sl_load_f32(res_in, c->res, base + (size_t)i);
        double got_res = sl_load_f32(res, c->res, base + (size_t)i);
        if (!sl_test_close_to(got_res, want_res, c->res, 1.0, c->res == SL_DTYPE_F16 ? 6e-8 : 0.0)) {
          if (bad++ < 5) fprintf(stderr, "  residual[%d,%d]: got %.9g want %.9g\n", r, i, got_res, want_res);
        }
        v = got_res; /* the norm is of the stored residual */
      }
      ss += v * v;
    }
    double inv = 1.0 / sqrt(ss / c->hidden + (double)eps);
    for (int i = 0; i < c->hidden; i++) {
      double v = res ? sl_load_f32(res, c->res, base + (size_t)i) : sl_load_f32(x, c->in, base + (size_t)i);
      double want = v * inv * ((double)c->bias + (double)sl_load_f32(w, c->w, (size_t)i));
      double got = sl_load_f32(y, c->out, base + (size_t)i);
      if (!sl_test_close_to(got, want, c->out, k, atol)) {
        if (bad++ < 5) fprintf(stderr, "  y[%d,%d]: got %.9g want %.9g\n", r, i, got, want);
      }
    }
  }
  if (bad)
    fail_msg("rmsnorm rows %d hidden %d in %s out %s w %s res %s bias %g residual %d: %zu mismatches", c->rows,
             c->hidden, sl_dtype_name(c->in), sl_dtype_name(c->out), sl_dtype_name(c->w), sl_dtype_name(c->res),
             (double)c->bias, c->residual, bad);
  free(x);
  free(y);
  free(w);
  free(res);
  free(res_in);
}

static void test_every_dtype_size_and_variant(void **state) {
  uint64_t rng = sl_test_seed();
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  static const int hiddens[] = {512, 520, 4096, 16384}; /* edges, non-power-of-two multiple of 8 */
  static const int rows[] = {1, 3};
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 3; o++)
      for (int h = 0; h < 4; h++)
        for (int r = 0; r < 2; r++)
          for (int bias = 0; bias < 2; bias++)
            for (int residual = 0; residual < 2; residual++) {
              sl_dtype_t in = sl_test_float_dtypes[i];
              case_t c = {.rows = rows[r],
                          .hidden = hiddens[h],
                          .in = in,
                          .out = sl_test_float_dtypes[o],
                          .w = in,
                          .res = in,
                          .bias = bias ? 1.0f : 0.0f,
                          .residual = residual};
              check_case(dev, &rng, &c);
            }
  sl_device_close(dev);
}

static void test_mixed_dtypes(void **state) {
  uint64_t rng = sl_test_seed() ^ 0x1234;
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  /* bf16 activations with an fp32 residual stream and fp32 weights; fp16 in, bf16 weights. */
  case_t c1 = {.rows = 5,
               .hidden = 2048,
               .in = SL_DTYPE_BF16,
               .out = SL_DTYPE_BF16,
               .w = SL_DTYPE_F32,
               .res = SL_DTYPE_F32,
               .bias = 0.0f,
               .residual = 1};
  check_case(dev, &rng, &c1);
  case_t c2 = {.rows = 2,
               .hidden = 7168,
               .in = SL_DTYPE_F16,
               .out = SL_DTYPE_F32,
               .w = SL_DTYPE_BF16,
               .res = SL_DTYPE_BF16,
               .bias = 1.0f,
               .residual = 1};
  check_case(dev, &rng, &c2);
  sl_device_close(dev);
}

static void test_rejects_bad_arguments(void **state) {
  float *buf = sl_test_alloc(4 * 20000 * 4);
  sl_rmsnorm_args_t ok = {.x = buf,
                          .y = buf + 20000,
                          .weight = buf + 40000,
                          .rows = 2,
                          .hidden = 512,
                          .in_dtype = SL_DTYPE_F32,
                          .out_dtype = SL_DTYPE_F32,
                          .w_dtype = SL_DTYPE_F32,
                          .res_dtype = SL_DTYPE_F32,
                          .eps = 1e-6f};
  SL_ASSERT_OK(sl_rmsnorm_validate(&ok));
  sl_rmsnorm_args_t a = ok;
  a.hidden = 516; /* not a multiple of 8 */
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "hidden 516"));
  a = ok;
  a.hidden = 16392;
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  a = ok;
  a.x = buf + 1; /* 4-byte aligned only */
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "16-byte aligned"));
  a = ok;
  a.in_dtype = SL_DTYPE_FP8_E4M3;
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  a = ok;
  a.eps = 0.0f;
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  a = ok;
  a.hidden = 7168;
  a.warps = 8; /* a 7168 row takes 7 warps: 8 is not a multiple */
  assert_int_equal(sl_rmsnorm_validate(&a), SL_ERR_INVALID);
  a.warps = 14;
  SL_ASSERT_OK(sl_rmsnorm_validate(&a));
  free(buf);
}

/* The value of the point's RSQ constant in its JIT spec ("" if it has none). */
static const char *rsq_define(const sl_rmsnorm_point_t *pt) {
  static sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_rmsnorm_spec(&spec, pt));
  for (int i = 0; i < spec.num_defines; i++)
    if (strcmp(spec.defines[i].name, "RSQ") == 0) return spec.defines[i].value;
  return "";
}

static void test_configuration_choice(void **state) {
  sl_rmsnorm_args_t a = {.rows = 4,
                         .hidden = 4096,
                         .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_BF16,
                         .w_dtype = SL_DTYPE_BF16,
                         .res_dtype = SL_DTYPE_BF16,
                         .eps = 1e-6f};
  sl_rmsnorm_point_t pt;
  /* Decode: one row per block (the row's warps at the measured 16 elements per thread: 8), the
   * weight in registers (session 11's tune: loaded with x, it wins at every decode shape), the
   * one-row kernel (a block per row). */
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.elts, 16);
  assert_int_equal(pt.warps, SL_RMSNORM_ROW_WARPS_E(4096, 16));
  assert_int_equal(pt.warps, 8);
  assert_true(pt.wreg);
  assert_true(pt.one_row);
  a.warps = 16; /* two rows per block: the strided kernel */
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.one_row);
  a.warps = 0;
  /* Prefill: the table, a multiple of the row's warps; the one-row kernel exactly where the
   * launch is a block per row (a full grid of one row per block) of the plain norm at hidden <=
   * 4096 (where it measured faster), unless the loop is asked for. */
  a.rows = 8192;
  for (int h = 64; h <= 16384; h += 8) {
    a.hidden = h;
    SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
    assert_int_equal(pt.one_row, pt.full_grid && h <= 4096 && pt.warps == SL_RMSNORM_ROW_WARPS_E(h, pt.elts));
    a.row_loop = SL_RMSNORM_LOOP_ON;
    SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
    assert_false(pt.one_row);
    /* OFF: the one-row kernel wherever the launch is a block per row, fused and any hidden too */
    a.row_loop = SL_RMSNORM_LOOP_OFF;
    for (int fused = 0; fused < 2; fused++) {
      a.residual = fused ? (void *)&pt : NULL; /* choose reads only whether it is set */
      SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
      assert_int_equal(pt.one_row, pt.full_grid && pt.warps == SL_RMSNORM_ROW_WARPS_E(h, pt.elts));
    }
    a.residual = NULL;
    a.row_loop = SL_RMSNORM_LOOP_AUTO;
    assert_true(pt.elts == 8 || pt.elts == 16 || pt.elts == 32);
    int rw = SL_RMSNORM_ROW_WARPS_E(h, pt.elts);
    assert_true(pt.warps % rw == 0 && pt.warps <= 32 && pt.warps >= rw);
    assert_true((h + 32 * rw - 1) / (32 * rw) <= pt.elts); /* row fits in registers */
    SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_BLACKWELL, 148, &pt));
    rw = SL_RMSNORM_ROW_WARPS_E(h, pt.elts);
    assert_true(pt.warps % rw == 0 && pt.warps <= 32);
  }
  int cand[8];
  int n = sl_rmsnorm_warp_candidates(7168, cand);
  assert_int_equal(n, 3);
  assert_int_equal(cand[0], 7);
  assert_int_equal(cand[2], 28);
  n = sl_rmsnorm_warp_candidates_e(2048, 16, cand);
  assert_int_equal(n, 4); /* 4, 8, 16, 32 */
  assert_int_equal(cand[0], 4);
  assert_int_equal(cand[3], 32);
  assert_int_equal(sl_rmsnorm_warp_candidates_e(16384, 8, cand), 0); /* 64 warps per row */
  assert_int_equal(sl_rmsnorm_warp_candidates_e(7168, 8, cand), 1);  /* 28 */
  /* An explicit warps value wins (what --tune uses); without elts it is the 32-element layout. */
  a.hidden = 2048;
  a.warps = 16;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.warps, 16);
  assert_int_equal(pt.elts, 32);
  a.elts = 8;
  a.warps = 8; /* one row of 8 warps */
  a.grid_policy = SL_RMSNORM_GRID_RESIDENT;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.elts, 8);
  assert_int_equal(pt.warps, 8);
  assert_false(pt.full_grid);
  a.grid_policy = SL_RMSNORM_GRID_FULL;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.full_grid);
  /* Bad knobs: elts not 8/16/32, warps not a multiple of the row's at that elts, a row wider
   * than 32 warps. */
  a.weight_regs = SL_RMSNORM_WEIGHT_RELOAD;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.wreg);
  a.weight_regs = SL_RMSNORM_WEIGHT_REGS;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.wreg);
  a.weight_regs = 3;
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.weight_regs = SL_RMSNORM_WEIGHT_AUTO;
  a.elts = 12;
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.elts = 16;
  a.warps = 6; /* h=2048 at 16 elements: rows of 4 warps */
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.hidden = 16384;
  a.elts = 8;
  a.warps = 0;
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  /* Decode keeps one row per block whatever the table's prefill layout. */
  a = (sl_rmsnorm_args_t){.rows = 16, .hidden = 2048, .in_dtype = SL_DTYPE_BF16, .out_dtype = SL_DTYPE_BF16,
                          .w_dtype = SL_DTYPE_BF16, .res_dtype = SL_DTYPE_BF16, .eps = 1e-6f};
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.warps, SL_RMSNORM_ROW_WARPS_E(2048, pt.elts));
  /* The row factor: rsqrt at decode (rows < SMs) and on the entries marked rsq (T=1024's: from
   * SMs rows up to the next entry), IEEE at larger prefill, either when asked; the JIT constant
   * follows the point. */
  assert_true(pt.rsq);
  assert_string_equal(rsq_define(&pt), "1");
  a.rows = 132;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.rsq);
  a.rows = 8192;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.rsq);
  assert_string_equal(rsq_define(&pt), "0");
  /* The fused T=1024 h=2048 entry: the one-row kernel (onerow) on a full grid, 8 elements per
   * thread, rsqrt; at T=8192 the fused entry keeps the loop. */
  a.rows = 1024;
  a.residual = &pt; /* choose reads only whether it is set */
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.one_row && pt.full_grid && pt.rsq && pt.residual);
  assert_int_equal(pt.elts, 8);
  assert_int_equal(pt.warps, 8);
  a.row_loop = SL_RMSNORM_LOOP_ON;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.one_row);
  a.row_loop = SL_RMSNORM_LOOP_AUTO;
  a.rows = 8192;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.one_row || pt.rsq);
  a.residual = NULL;
  a.rows = 132;
  a.fast_rsqrt = SL_RMSNORM_RSQ_ON;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.rsq);
  a.rows = 1;
  a.fast_rsqrt = SL_RMSNORM_RSQ_OFF;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.rsq);
  a.fast_rsqrt = 3;
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.fast_rsqrt = SL_RMSNORM_RSQ_AUTO;
  a.row_loop = 3;
  assert_int_equal(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.row_loop = SL_RMSNORM_LOOP_AUTO;
  /* The T=8192 h=2048 entry (full grid, one row of 4 warps per block): the one-row kernel; the
   * fused variant's keeps the loop. */
  a = (sl_rmsnorm_args_t){.rows = 8192, .hidden = 2048, .in_dtype = SL_DTYPE_BF16, .out_dtype = SL_DTYPE_BF16,
                          .w_dtype = SL_DTYPE_BF16, .res_dtype = SL_DTYPE_BF16, .eps = 1e-6f};
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.full_grid && pt.one_row && !pt.rsq);
  a.residual = (void *)16;
  SL_ASSERT_OK(sl_rmsnorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.full_grid && !pt.one_row);
}

static void test_zero_rows_is_a_no_op(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_rmsnorm_args_t a = {.rows = 0,
                         .hidden = 512,
                         .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_BF16,
                         .w_dtype = SL_DTYPE_BF16,
                         .res_dtype = SL_DTYPE_BF16,
                         .eps = 1e-6f};
  SL_ASSERT_OK(sl_rmsnorm(dev, &a, NULL));
  sl_device_close(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_dtype_size_and_variant), cmocka_unit_test(test_mixed_dtypes),
      cmocka_unit_test(test_rejects_bad_arguments),        cmocka_unit_test(test_configuration_choice),
      cmocka_unit_test(test_zero_rows_is_a_no_op),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
