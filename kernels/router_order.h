/* The router's order of scores, shared by the CPU reference (kernels/router.c) and the kernel
 * (kernels/router.cu): plain C, embedded for NVRTC.
 *
 * Scores are ranked by an order-preserving uint32 key of their fp32 value, so the GPU can
 * pick a maximum with one integer warp reduction (redux.sync.max.u32) and the CPU compares
 * exactly the same numbers:
 *   key(x) = 0x80000000 + |x|bits for x >= +0, 0x80000000 - |x|bits for x <= -0,
 * so x < y  <=>  key(x) < key(y) for every non-NaN x, y, and key(-0) == key(+0) (they tie,
 * as in fp32 comparison). -inf has key 0x00800000, +inf 0xff800000. Every NaN has key
 * SL_ROUTER_KEY_NAN = 1: below -inf, so a NaN score is chosen only when nothing else is left
 * (and then by the lower id, identically on both backends). Key 0 (SL_ROUTER_KEY_NONE) is
 * below every score: "no expert" (masked groups, experts already taken, padding lanes).
 * key_value inverts key exactly for non-NaN scores (zero comes back as +0; key 1 gives a NaN).
 *
 * Ties of equal keys go to the lower expert id. */
#ifndef SL_ROUTER_ORDER_H
#define SL_ROUTER_ORDER_H

#include "kernels/quant_formats.h"

#define SL_ROUTER_KEY_NONE 0u
#define SL_ROUTER_KEY_NAN 1u

SL_QF_FN uint32_t sl_router_key(float x) {
  uint32_t u = sl_qf_bits(x), mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return SL_ROUTER_KEY_NAN;
  return (u >> 31) ? 0x80000000u - mag : 0x80000000u + mag;
}

SL_QF_FN float sl_router_key_value(uint32_t k) {
  return k >= 0x80000000u ? sl_qf_float(k - 0x80000000u) : sl_qf_float(0x80000000u | (0x80000000u - k));
}

/* sl_qf_expf (kernels/quant_formats.h) bit for bit, without branches: the out-of-range and
 * NaN cases are selected at the end instead of returned early, and the 2^128 scaling of the
 * top binade is a select, so a lane's several exps form one basic block the GPU scheduler can
 * interleave (an early return splits it; the kernel's exps then run one after another).
 * tests/unit/test_router.c compares it with sl_qf_expf over a sweep of all fp32 patterns. */
SL_QF_FN float sl_router_expf(float x) {
  const float xc = (x >= -87.0f && x <= 88.72f) ? x : 0.0f; /* NaN and out of range: any finite */
  float n = fmaf(xc, 1.44269504f, 12582912.0f);
  n = n - 12582912.0f;
  float r = fmaf(n, -0.693145752f, xc);
  r = fmaf(n, -1.42860677e-6f, r);
  float p = 1.98756912e-4f;
  p = fmaf(p, r, 1.39819994e-3f);
  p = fmaf(p, r, 8.33345205e-3f);
  p = fmaf(p, r, 4.16657962e-2f);
  p = fmaf(p, r, 1.66666672e-1f);
  p = fmaf(p, r, 5.0e-1f);
  float r2 = SL_QF_MUL(r, r);
  p = fmaf(p, r2, r);
  p = SL_QF_ADD(p, 1.0f);
  const int ni = (int)n; /* -126..128 */
  const float e = SL_QF_MUL(ni > 127 ? SL_QF_MUL(p, 2.0f) : p, sl_qf_pow2(ni > 127 ? ni - 1 : ni));
  float y = x > 88.72f ? sl_qf_float(0x7f800000u) : e; /* three independent selects */
  y = x < -87.0f ? 0.0f : y;
  return x == x ? y : x;
}

/* Experts per lane in the kernel's lane-contiguous layout: lane l holds experts
 * [l*NE, (l+1)*NE). The CPU reference replays the kernel's per-lane softmax sums with it. */
#define SL_ROUTER_NE(num_experts) (((num_experts) + 31) / 32)

#endif
