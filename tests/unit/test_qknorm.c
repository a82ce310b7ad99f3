/* Unit tests of the QK-norm CPU reference: per-head RMSNorm of Q and K (separate tensors or
 * strided slices of a packed QKV row) and neox RoPE, against double-precision formulas. */
#include <string.h>

#include "kernels/qknorm.h"
#include "sl_test_kernels.h"

typedef struct {
  int tokens, q_heads, kv_heads, head_dim, rot_dim; /* rot_dim 0: no RoPE */
  sl_dtype_t dt, wdt;
  float bias;
  int packed; /* Q and K are slices of a [tokens, (q + 2 kv) * head_dim] QKV buffer */
} case_t;

enum { MAX_POS = 64 };
static const double ROPE_BASE = 10000.0;

/* theta(pos, i) = pos * base^(-2i/rot_dim), the neox frequencies. */
static double theta(int pos, int i, int rot_dim) {
  return pos * pow(ROPE_BASE, -2.0 * i / rot_dim);
}

static void check_case(sl_device_t *dev, uint64_t *rng, const case_t *c) {
  const int D = c->head_dim, heads = c->q_heads + c->kv_heads;
  const long q_stride = c->packed ? (long)(c->q_heads + 2 * c->kv_heads) * D : (long)c->q_heads * D;
  const long k_stride = c->packed ? q_stride : (long)c->kv_heads * D;
  const size_t q_elems = (size_t)c->tokens * (size_t)q_stride, k_elems = (size_t)c->tokens * (size_t)k_stride;
  void *q = sl_test_alloc(sl_dtype_bytes(c->dt, q_elems));
  void *k = c->packed ? NULL : sl_test_alloc(sl_dtype_bytes(c->dt, k_elems));
  sl_test_fill(rng, q, c->dt, q_elems, 1.5f, 1);
  if (k) sl_test_fill(rng, k, c->dt, k_elems, 1.5f, 1);
  void *q_in = sl_test_alloc(sl_dtype_bytes(c->dt, q_elems)),
       *k_in = k ? sl_test_alloc(sl_dtype_bytes(c->dt, k_elems)) : NULL;
  memcpy(q_in, q, sl_dtype_bytes(c->dt, q_elems));
  if (k) memcpy(k_in, k, sl_dtype_bytes(c->dt, k_elems));
  void *qw = sl_test_alloc(sl_dtype_bytes(c->wdt, (size_t)D)), *kw = sl_test_alloc(sl_dtype_bytes(c->wdt, (size_t)D));
  sl_test_fill(rng, qw, c->wdt, (size_t)D, 1.5f, 0);
  sl_test_fill(rng, kw, c->wdt, (size_t)D, 1.5f, 0);
  int32_t *pos = sl_test_alloc(sizeof(int32_t) * (size_t)c->tokens);
  const int half = c->rot_dim / 2;
  float *cs = sl_test_alloc(sizeof(float) * MAX_POS * (size_t)(half ? half : 1));
  float *sn = sl_test_alloc(sizeof(float) * MAX_POS * (size_t)(half ? half : 1));
  for (int p = 0; p < MAX_POS; p++)
    for (int i = 0; i < half; i++) {
      cs[p * half + i] = (float)cos(theta(p, i, c->rot_dim));
      sn[p * half + i] = (float)sin(theta(p, i, c->rot_dim));
    }
  for (int t = 0; t < c->tokens; t++)
    pos[t] = (int32_t)(sl_test_rand_u64(rng) % MAX_POS);
  /* With several tokens, one position is out of range: that token is normalized, not rotated. */
  if (c->tokens > 2) pos[1] = MAX_POS + 5;

  char *kbase = c->packed ? (char *)q + sl_dtype_bytes(c->dt, (size_t)c->q_heads * D) : (char *)k;
  sl_qknorm_args_t a = {.q = q,
                        .k = kbase,
                        .q_row_stride = q_stride,
                        .k_row_stride = k_stride,
                        .tokens = c->tokens,
                        .q_heads = c->q_heads,
                        .kv_heads = c->kv_heads,
                        .head_dim = D,
                        .q_weight = qw,
                        .k_weight = kw,
                        .dtype = c->dt,
                        .w_dtype = c->wdt,
                        .eps = 1e-6f,
                        .weight_bias = c->bias,
                        .rope = c->rot_dim > 0,
                        .rot_dim = c->rot_dim,
                        .positions = pos,
                        .cos_cache = cs,
                        .sin_cache = sn,
                        .max_pos = MAX_POS};
  SL_ASSERT_OK(sl_qknorm(dev, &a, NULL));

  /* Unit roundoff of the output plus the fp32 arithmetic (a rotation may cancel, so the
   * absolute part scales with the head's largest value, ~ a few units). */
  const double k_rel = c->dt == SL_DTYPE_F32 ? 64.0 : 1.05;
  const double atol = c->dt == SL_DTYPE_F32 ? 4e-6 : c->dt == SL_DTYPE_F16 ? 2e-6 : 2e-5;
  size_t bad = 0;
  for (int t = 0; t < c->tokens; t++)
    for (int h = 0; h < heads; h++) {
      const int is_q = h < c->q_heads;
      const void *src = is_q || c->packed ? q_in : k_in;
      const void *dst = is_q || c->packed ? q : k;
      const void *w = is_q ? qw : kw;
      size_t off = is_q ? (size_t)t * q_stride + (size_t)h * D
                        : (c->packed ? (size_t)t * q_stride + (size_t)c->q_heads * D : (size_t)t * k_stride) +
                              (size_t)(h - c->q_heads) * D;
      double v[256], ss = 0;
      for (int i = 0; i < D; i++) {
        v[i] = sl_load_f32(src, c->dt, off + (size_t)i);
        ss += v[i] * v[i];
      }
      double inv = 1.0 / sqrt(ss / D + 1e-6);
      for (int i = 0; i < D; i++)
        v[i] = v[i] * inv * ((double)c->bias + (double)sl_load_f32(w, c->wdt, (size_t)i));
      if (c->rot_dim && pos[t] < MAX_POS) {
        for (int i = 0; i < half; i++) {
          double th = theta(pos[t], i, c->rot_dim), x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cos(th) - x2 * sin(th);
          v[i + half] = x2 * cos(th) + x1 * sin(th);
        }
      }
      for (int i = 0; i < D; i++) {
        double got = sl_load_f32(dst, c->dt, off + (size_t)i);
        if (!sl_test_close_to(got, v[i], c->dt, k_rel, atol)) {
          if (bad++ < 5) fprintf(stderr, "  token %d head %d elt %d: got %.9g want %.9g\n", t, h, i, got, v[i]);
        }
      }
    }
  /* In a packed row the V slice (and nothing else) must be untouched. */
  if (c->packed)
    for (int t = 0; t < c->tokens; t++) {
      size_t v_off = (size_t)t * q_stride + (size_t)heads * D;
      size_t bytes = sl_dtype_bytes(c->dt, (size_t)c->kv_heads * D), at = sl_dtype_bytes(c->dt, v_off);
      if (memcmp((char *)q + at, (char *)q_in + at, bytes) != 0) {
        if (bad++ < 5) fprintf(stderr, "  token %d: V slice modified\n", t);
      }
    }
  if (bad)
    fail_msg("qknorm tokens %d heads %d+%d dim %d rot %d %s/%s bias %g packed %d: %zu mismatches", c->tokens,
             c->q_heads, c->kv_heads, D, c->rot_dim, sl_dtype_name(c->dt), sl_dtype_name(c->wdt), (double)c->bias,
             c->packed, bad);
  free(q);
  free(k);
  free(q_in);
  free(k_in);
  free(qw);
  free(kw);
  free(pos);
  free(cs);
  free(sn);
}

static void test_every_dtype_dim_layout_and_rope(void **state) {
  uint64_t rng = sl_test_seed();
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  static const int dims[] = {64, 128, 256};
  static const int tokens[] = {1, 5};
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 3; h++)
      for (int t = 0; t < 2; t++)
        for (int packed = 0; packed < 2; packed++)
          for (int rope = 0; rope < 3; rope++) { /* none, full, partial (half the head) */
            case_t c = {.tokens = tokens[t],
                        .q_heads = 4,
                        .kv_heads = 2,
                        .head_dim = dims[h],
                        .rot_dim = rope == 0   ? 0
                                   : rope == 1 ? dims[h]
                                               : dims[h] / 2,
                        .dt = sl_test_float_dtypes[d],
                        .wdt = sl_test_float_dtypes[d],
                        .bias = (float)((d + h + t) & 1),
                        .packed = packed};
            check_case(dev, &rng, &c);
          }
  /* Qwen3-like head counts, fp32 weights on bf16 activations. */
  case_t c = {.tokens = 3,
              .q_heads = 32,
              .kv_heads = 4,
              .head_dim = 128,
              .rot_dim = 128,
              .dt = SL_DTYPE_BF16,
              .wdt = SL_DTYPE_F32,
              .bias = 0.0f,
              .packed = 1};
  check_case(dev, &rng, &c);
  sl_device_close(dev);
}

static void test_rejects_bad_arguments(void **state) {
  uint16_t *buf = sl_test_alloc(2 * 8192);
  sl_qknorm_args_t ok = {.q = buf,
                         .k = buf + 1024,
                         .q_row_stride = 512,
                         .k_row_stride = 256,
                         .tokens = 1,
                         .q_heads = 4,
                         .kv_heads = 2,
                         .head_dim = 128,
                         .q_weight = buf + 4096,
                         .k_weight = buf + 4096,
                         .dtype = SL_DTYPE_BF16,
                         .w_dtype = SL_DTYPE_BF16,
                         .eps = 1e-6f};
  SL_ASSERT_OK(sl_qknorm_validate(&ok));
  sl_qknorm_args_t a = ok;
  a.head_dim = 96;
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "head_dim 96"));
  a = ok;
  a.q_row_stride = 500; /* holds fewer than 4 x 128 */
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID);
  a = ok;
  a.k = buf + 1; /* 2-byte aligned only */
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID);
  a = ok;
  a.rope = true;
  a.rot_dim = 48; /* not a power of two */
  a.max_pos = 8;
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID);
  a.rot_dim = 64;
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID); /* no positions / caches */
  assert_non_null(strstr(sl_last_error(), "RoPE"));
  free(buf);
}

static void test_configuration_choice(void **state) {
  sl_qknorm_args_t a = {.q_row_stride = 4096,
                        .k_row_stride = 512,
                        .tokens = 1,
                        .q_heads = 32,
                        .kv_heads = 4,
                        .head_dim = 128,
                        .dtype = SL_DTYPE_BF16,
                        .w_dtype = SL_DTYPE_BF16,
                        .eps = 1e-6f};
  sl_qknorm_point_t pt;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt)); /* 36 heads = 18 warps < 132 SMs */
  assert_int_equal(pt.warps, 1);
  assert_int_equal(pt.items, 1);
  assert_int_equal(pt.rot_dim, 0);
  a.tokens = 4096;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.warps > 1 && pt.warps <= 32);
  assert_true(pt.items > 1);
  a.rope = true;
  a.rot_dim = 128;
  a.max_pos = 100;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.items, sl_qknorm_items(false, true, pt.warps));
  assert_int_equal(sl_qknorm_items(false, false, 32), 2); /* 64-register budget at 1024 threads */
  assert_int_equal(SL_QKNORM_LANES_PER_HEAD(128), 16);    /* half a warp per 128-elt head */
  assert_int_equal(SL_QKNORM_LANES_PER_HEAD(64), 8);
  assert_int_equal(SL_QKNORM_LANES_PER_HEAD(256), 32);
  /* Large prefill: the table's grid (full) unless told; explicit items and grid win; decode
   * never takes the full grid from the table. */
  a.rope = false;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.full_grid);
  a.grid_policy = SL_QKNORM_GRID_RESIDENT;
  a.warps = 4;
  a.items = 1;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.full_grid);
  assert_int_equal(pt.warps, 4);
  assert_int_equal(pt.items, 1);
  a.grid_policy = SL_QKNORM_GRID_FULL;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_true(pt.full_grid);
  a.items = 3;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "items"));
  a.items = 0;
  a.grid_policy = 3;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.grid_policy = SL_QKNORM_GRID_AUTO;
  a.warps = 0;
  a.tokens = 1;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.full_grid);
  /* Layout knobs: the table's (head_dim 128 without RoPE: streaming stores + rsqrt, session 12)
   * unless told; the JIT constants follow; pipeline ON with RoPE and pairs-in-a-lane with
   * partial rotary are rejected. */
  a.tokens = 4096;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.cache, 1);
  assert_true(pt.rsq);
  assert_false(pt.wf32 || pt.pipe);
  assert_int_equal(pt.rlayout, 0);
  a.cache = SL_QKNORM_CACHE_STREAM;
  a.fast_rsqrt = a.weights_f32 = a.pipeline = SL_QKNORM_ON;
  a.rope_layout = SL_QKNORM_ROPE_PAIRS; /* ignored without RoPE */
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.cache, 2);
  assert_true(pt.rsq && pt.wf32 && pt.pipe);
  assert_int_equal(pt.rlayout, 0);
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_qknorm_spec(&spec, &pt));
  int seen = 0;
  for (int i = 0; i < spec.num_defines; i++) {
    const char *n = spec.defines[i].name, *v = spec.defines[i].value;
    if (!strcmp(n, "CACHE")) seen += !strcmp(v, "2");
    if (!strcmp(n, "RSQ") || !strcmp(n, "WF32") || !strcmp(n, "PIPE")) seen += !strcmp(v, "1");
    if (!strcmp(n, "RLAYOUT")) seen += !strcmp(v, "0");
  }
  assert_int_equal(seen, 5);
  a.rope = true;
  a.rot_dim = 128;
  a.max_pos = 100;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID); /* pipeline + RoPE */
  assert_non_null(strstr(sl_last_error(), "pipeline"));
  a.pipeline = SL_QKNORM_AUTO;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_false(pt.pipe);
  assert_int_equal(pt.rlayout, 2);
  a.rot_dim = 64;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID); /* pairs need full rotary */
  assert_non_null(strstr(sl_last_error(), "PAIRS"));
  a.rope_layout = SL_QKNORM_ROPE_SPLIT;
  SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.rlayout, 1);
  a.cache = 4;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
  a.cache = 0;
  a.weights_f32 = 3;
  assert_int_equal(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt), SL_ERR_INVALID);
}

/* Small prefill (one wave): the grid must cover every SM, with 1-2 head groups per warp; the
 * head count per call is limited to 2^30 (32-bit head indices in the kernel). */
static void test_small_prefill_covers_all_sms(void **state) {
  sl_qknorm_args_t a = {.q_row_stride = 4096,
                        .k_row_stride = 512,
                        .tokens = 16,
                        .q_heads = 32,
                        .kv_heads = 4,
                        .head_dim = 128,
                        .dtype = SL_DTYPE_BF16,
                        .w_dtype = SL_DTYPE_BF16,
                        .eps = 1e-6f};
  sl_qknorm_point_t pt;
  static const struct { int tokens, q_heads, warps, items; } want[] = {
      {16, 32, 2, 1},   /* 576 heads = 288 warps: 144 blocks of 2 */
      {128, 32, 8, 1},  /* 2304 warps: 288 blocks of 8 */
      {128, 64, 8, 2},  /* 8704 heads: 2 groups per warp, 272 blocks of 8 */
      {4096, 32, 2, 2}, /* large: the measured table (2 warps, 2 head groups per warp) */
  };
  for (int i = 0; i < 4; i++) {
    a.tokens = want[i].tokens;
    a.q_heads = want[i].q_heads;
    a.q_row_stride = (long)want[i].q_heads * 128;
    SL_ASSERT_OK(sl_qknorm_choose(&a, SL_ARCH_HOPPER, 132, &pt));
    assert_int_equal(pt.warps, want[i].warps);
    assert_int_equal(pt.items, want[i].items);
    long heads = (long)a.tokens * (a.q_heads + a.kv_heads), per_warp = 32 / 16 * pt.items;
    long blocks = (heads + per_warp * pt.warps - 1) / (per_warp * pt.warps);
    assert_true(blocks >= 132);
  }
  a.tokens = 1 << 26; /* x 36 heads > 2^30 */
  assert_int_equal(sl_qknorm_validate(&a), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "2^30"));
}

/* The kernel's division by the head count (kernels/qknorm.h): exact against '/' for every head
 * count up to 70000 and the largest ones a call allows, at indices 0..2^31-1 (every boundary
 * near a multiple of d and the top of the range, plus random ones). */
static void test_head_division_magic(void **state) {
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (unsigned d = 1; d <= 70000 + 64; d++) {
    const unsigned dd = d <= 70000 ? d : (1u << 30) - (d - 70001); /* then 2^30 - 63 .. 2^30 */
    unsigned m;
    int sh;
    sl_qknorm_magic(dd, &m, &sh);
    const unsigned top = 0x7fffffffu;
    unsigned ns[12] = {0, 1, dd - 1, dd, dd + 1, top, top - 1, top - top % dd, top - top % dd - 1};
    for (int i = 9; i < 12; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      ns[i] = (unsigned)(r >> 33); /* < 2^31 */
    }
    for (int i = 0; i < 12; i++) {
      if (ns[i] > top) continue;
      if (sl_qknorm_div(ns[i], m, sh) != ns[i] / dd) fail_msg("head division: %u / %u", ns[i], dd);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_division_magic),
      cmocka_unit_test(test_every_dtype_dim_layout_and_rope),
      cmocka_unit_test(test_rejects_bad_arguments),
      cmocka_unit_test(test_configuration_choice),
      cmocka_unit_test(test_small_prefill_covers_all_sms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
