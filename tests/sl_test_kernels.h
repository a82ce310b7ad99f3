/* Helpers for the kernel tests (norms, embedding): typed random buffers and ulp comparison. */
#ifndef SL_TEST_KERNELS_H
#define SL_TEST_KERNELS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/sl_dtype.h"
#include "sl_test.h"

static const sl_dtype_t sl_test_float_dtypes[3] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};

/* 256-byte aligned host buffer (never NULL: fails the test). */
static inline void *sl_test_alloc(size_t bytes) {
  void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) fail_msg("out of host memory (%zu bytes)", bytes);
  return p;
}

/* Fill n elements of `dt` with lo + (hi-lo)*u or, when normal, scale*N(0,1). */
static inline void sl_test_fill(uint64_t *rng, void *p, sl_dtype_t dt, size_t n, float scale, int normal) {
  for (size_t i = 0; i < n; i++) {
    float v = normal ? scale * sl_test_rand_normal(rng) : sl_test_rand_uniform(rng, -scale, scale);
    sl_store_f32(p, dt, i, v);
  }
}

/* Map a 16-bit float pattern to an integer that is monotonic in its value (ulp distance). */
static inline int sl_test_ord16(uint16_t b) {
  return (b & 0x8000u) ? -(int)(b & 0x7fffu) : (int)b;
}

/* Compare n elements of `dt`: 16-bit types within max_ulp ulps or atol (an absolute floor for
 * results of cancellation, 0 for none); fp32 within atol + rtol*|want|. NaN never passes. Prints the first few
 * mismatches; returns their count. */
static inline size_t sl_test_compare_dtype(const char *what, sl_dtype_t dt, const void *got, const void *want, size_t n,
                                           int max_ulp, float atol, float rtol) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float g = sl_load_f32(got, dt, i), w = sl_load_f32(want, dt, i);
    int ok;
    if (isnan(g) || isnan(w))
      ok = 0;
    else if (dt == SL_DTYPE_F32)
      ok = fabsf(g - w) <= atol + rtol * fabsf(w);
    else {
      int d = sl_test_ord16(((const uint16_t *)got)[i]) - sl_test_ord16(((const uint16_t *)want)[i]);
      ok = abs(d) <= max_ulp || fabsf(g - w) <= atol;
    }
    if (!ok) {
      if (bad < 8)
        fprintf(stderr, "  %s[%zu] (%s): got %.9g want %.9g\n", what, i, sl_dtype_name(dt), (double)g, (double)w);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "  %s: %zu of %zu mismatched\n", what, bad, n);
  return bad;
}

/* Relative accuracy of one rounding to `dt` (unit roundoff, 2^-p), for checks against a
 * double-precision definition. */
static inline double sl_test_unit_roundoff(sl_dtype_t dt) {
  return dt == SL_DTYPE_BF16 ? 1.0 / 256 : dt == SL_DTYPE_F16 ? 1.0 / 2048 : 1.0 / 16777216;
}

/* |got - want| <= k * u * |want| + atol, where u is the unit roundoff of dt. */
static inline int sl_test_close_to(double got, double want, sl_dtype_t dt, double k, double atol) {
  if (isnan(got) || isnan(want)) return 0;
  return fabs(got - want) <= k * sl_test_unit_roundoff(dt) * fabs(want) + atol;
}

#endif
