/* Element types and exact host-side conversions (fp32 <-> bf16/fp16, round to nearest
 * even), shared by every CPU reference. Plain C, also valid in device code. */
#ifndef SL_DTYPE_H
#define SL_DTYPE_H

#ifndef __CUDACC_RTC__
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#endif

typedef enum {
  SL_DTYPE_F32 = 0,
  SL_DTYPE_BF16 = 1,
  SL_DTYPE_F16 = 2,
  SL_DTYPE_FP8_E4M3 = 3,
  SL_DTYPE_FP4_E2M1 = 4, /* two per byte, element 2i in the low nibble */
  SL_DTYPE_I32 = 5,
} sl_dtype_t;

static inline size_t sl_dtype_bits(sl_dtype_t t) {
  switch (t) {
  case SL_DTYPE_F32: case SL_DTYPE_I32: return 32;
  case SL_DTYPE_BF16: case SL_DTYPE_F16: return 16;
  case SL_DTYPE_FP8_E4M3: return 8;
  case SL_DTYPE_FP4_E2M1: return 4;
  }
  return 0;
}
static inline size_t sl_dtype_bytes(sl_dtype_t t, size_t n) { return (n * sl_dtype_bits(t) + 7) / 8; }
static inline const char *sl_dtype_name(sl_dtype_t t) {
  switch (t) {
  case SL_DTYPE_F32: return "f32";
  case SL_DTYPE_BF16: return "bf16";
  case SL_DTYPE_F16: return "f16";
  case SL_DTYPE_FP8_E4M3: return "e4m3";
  case SL_DTYPE_FP4_E2M1: return "e2m1";
  case SL_DTYPE_I32: return "i32";
  }
  return "?";
}

#ifndef __CUDACC_RTC__
static inline uint32_t sl_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float sl_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* bf16: round to nearest even; NaN stays a (quiet) NaN. Same as __float2bfloat16_rn. */
static inline uint16_t sl_f32_to_bf16(float f) {
  uint32_t u = sl_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float sl_bf16_to_f32(uint16_t b) { return sl_bits_f32((uint32_t)b << 16); }

/* fp16 (IEEE binary16): round to nearest even, overflow to inf, subnormals kept.
 * Same as __float2half_rn. */
static inline uint16_t sl_f32_to_f16(float f) {
  uint32_t u = sl_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (absu < 0x38800000u) {                                  /* below 2^-14: subnormal half */
    if (absu < 0x33000000u) return (uint16_t)sign;            /* < 2^-25: rounds to 0 (ties to even 0) */
    uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(absu >> 23); /* 14 + (113 - exp) */
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}
static inline float sl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
    return sign ? -f : f;
  }
  if (e == 31) return sl_bits_f32(sign | 0x7f800000u | (m << 13));
  return sl_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Load/store one element of a float-like array as fp32. */
static inline float sl_load_f32(const void *p, sl_dtype_t t, size_t i) {
  switch (t) {
  case SL_DTYPE_F32: return ((const float *)p)[i];
  case SL_DTYPE_BF16: return sl_bf16_to_f32(((const uint16_t *)p)[i]);
  case SL_DTYPE_F16: return sl_f16_to_f32(((const uint16_t *)p)[i]);
  default: return 0.0f;
  }
}
static inline void sl_store_f32(void *p, sl_dtype_t t, size_t i, float v) {
  switch (t) {
  case SL_DTYPE_F32: ((float *)p)[i] = v; break;
  case SL_DTYPE_BF16: ((uint16_t *)p)[i] = sl_f32_to_bf16(v); break;
  case SL_DTYPE_F16: ((uint16_t *)p)[i] = sl_f32_to_f16(v); break;
  default: break;
  }
}
#endif

#endif
