/* QK-norm (Qwen3 attention): in-place per-head RMSNorm of Q and K with separate q/k weights,
 * optionally followed by neox-style RoPE. Q and K are separate tensors or slices of a packed
 * QKV row (strided). One entry for both backends and the CPU reference.
 *
 *   head h of token t:  v = x / sqrt(mean(x^2) + eps) * (bias + w)          (fp32)
 *   RoPE (neox), i < rot_dim/2, c = cos[pos[t], i], s = sin[pos[t], i]:
 *     out[i]             = v[i] * c - v[i + rot_dim/2] * s
 *     out[i + rot_dim/2] = v[i + rot_dim/2] * c + v[i] * s
 *   elements >= rot_dim pass through; one rounding at the store.
 * A position outside [0, max_pos) is not looked up: that head is normalized but not rotated
 * (both backends), so nothing is read out of bounds. */
#ifndef SL_QKNORM_H
#define SL_QKNORM_H

#include "kernels/sl_dtype.h"

/* Each lane holds 8 consecutive elements of a head (one 16-byte packet of bf16/fp16, two of
 * fp32), so a head spans HEAD_DIM/8 lanes: 8 (64), 16 (128) or 32 (256), and a warp holds
 * 32/(HEAD_DIM/8) heads. */
#define SL_QKNORM_ELTS_PER_LANE 8
#define SL_QKNORM_LANES_PER_HEAD(head_dim) ((head_dim) / SL_QKNORM_ELTS_PER_LANE)

/* Division by the head count without a divide instruction sequence (both sides): for n < 2^31
 * and d >= 1, n / d == (n * m) >> s with s = 31 + ceil(log2 d), m = ceil(2^s / d) < 2^32
 * (Granlund & Montgomery 1994, Thm 4.2: 2^s <= m*d <= 2^s + 2^(s-31)). The kernel locates
 * every head it touches with it (2 instructions instead of a ~20-instruction division or a
 * branchy wrap-around). The host computes m and s once per call (sl_qknorm_magic). */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define SL_QKNORM_HD __host__ __device__
#else
#define SL_QKNORM_HD
#endif
SL_QKNORM_HD static inline unsigned sl_qknorm_div(unsigned n, unsigned m, int s) {
  return (unsigned)(((unsigned long long)n * m) >> s);
}
SL_QKNORM_HD static inline void sl_qknorm_magic(unsigned d, unsigned *m, int *s) {
  int l = 0;
  while ((1ull << l) < d) l++;
  *s = 31 + l;
  *m = (unsigned)(((1ull << *s) + d - 1) / d);
}

#ifndef __CUDACC_RTC__
#include <stdbool.h>
#include <stdint.h>

#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"

typedef struct {
  void *q;                                 /* head 0 of token 0 of Q; token t starts at q + t*q_row_stride */
  void *k;                                 /* head 0 of token 0 of K */
  long q_row_stride;                       /* elements between tokens: q_heads*head_dim for a separate Q, */
  long k_row_stride;                       /*   (q_heads + 2*kv_heads)*head_dim for a packed QKV row */
  int tokens, q_heads, kv_heads, head_dim; /* head_dim 64, 128 or 256 */
  const void *q_weight, *k_weight;         /* [head_dim] w_dtype each */
  sl_dtype_t dtype, w_dtype;               /* dtype of Q/K (in place); of the weights */
  float eps, weight_bias;                  /* compile-time constants */
  /* RoPE (neox) when rope is true: */
  bool rope;
  int rot_dim;                        /* 16, 32, 64, 128 or 256, <= head_dim */
  const int32_t *positions;           /* [tokens] */
  const float *cos_cache, *sin_cache; /* [max_pos, rot_dim/2] each */
  int max_pos;
  int warps;       /* warps per block; 0 = the table */
  int items;       /* head groups a warp loads before reducing: 0 = the choice (sl_qknorm_items
                      or the table), else 1, 2 or 4 (what --tune sweeps) */
  int grid_policy; /* SL_QKNORM_GRID_AUTO (0, the table's), _RESIDENT (1: a grid capped at the
                      resident blocks, striding) or _FULL (2: every warp one iteration) */
  /* Layout knobs (what --tune sweeps); 0 = the table's choice for each: */
  int cache;       /* Q/K cache hints: SL_QKNORM_CACHE_AUTO, _NONE, _STREAM_STORES (st.global.cs),
                      _STREAM (ld.global.cs + st.global.cs) */
  int fast_rsqrt;  /* SL_QKNORM_AUTO / _OFF / _ON: rsqrtf instead of 1/sqrtf (<= 2 fp32 ulp) */
  int weights_f32; /* AUTO / OFF / ON: weights unpacked and biased once (fp32 registers) instead of
                      per item */
  int pipeline;    /* AUTO / OFF / ON: next iteration's loads before this one's reductions (plain
                      norm only; ON with RoPE is rejected; it matters on a resident grid) */
  int rope_layout; /* RoPE: SL_QKNORM_ROPE_AUTO, _SHUFFLE (pairs across lanes, 8 + 8 cos/sin per
                      lane), _SPLIT (the same, each lane of a pair 4 + 4), _PAIRS (a lane holds
                      elements 4l.. and their partners: no shuffle; full rotary only) */
  bool pdl;        /* as sl_act_args_t's (kernels/act.h) */
} sl_qknorm_args_t;

enum { SL_QKNORM_GRID_AUTO = 0, SL_QKNORM_GRID_RESIDENT = 1, SL_QKNORM_GRID_FULL = 2 };
enum { SL_QKNORM_CACHE_AUTO = 0, SL_QKNORM_CACHE_NONE = 1, SL_QKNORM_CACHE_STREAM_STORES = 2, SL_QKNORM_CACHE_STREAM = 3 };
enum { SL_QKNORM_AUTO = 0, SL_QKNORM_OFF = 1, SL_QKNORM_ON = 2 };
enum { SL_QKNORM_ROPE_AUTO = 0, SL_QKNORM_ROPE_SHUFFLE = 1, SL_QKNORM_ROPE_SPLIT = 2, SL_QKNORM_ROPE_PAIRS = 3 };

typedef struct {
  int head_dim, rot_dim; /* rot_dim 0: no RoPE */
  sl_dtype_t dtype, w_dtype;
  float eps, weight_bias;
  int warps;
  int items;      /* head groups per warp per iteration (sl_qknorm_items) */
  bool full_grid; /* launch shape, not a JIT constant: one block per group of warps' heads */
  int cache;      /* JIT CACHE: 0 none, 1 streaming stores, 2 streaming loads and stores */
  bool rsq;       /* JIT RSQ: rsqrtf */
  bool wf32;      /* JIT WF32: weights in fp32 registers */
  bool pipe;      /* JIT PIPE: software-pipelined grid-stride loop (no RoPE) */
  int rlayout;    /* JIT RLAYOUT: 0 shuffle, 1 split, 2 pairs in a lane (RoPE only; 0 without) */
  bool pdl;       /* JIT PDL and the launch attribute (the args' pdl on sm_90+; set by the launcher) */
} sl_qknorm_point_t;

/* Head groups a warp loads before reducing: 1 for decode; for prefill as many as the register
 * budget of `warps` per block allows without spilling (measured with ptxas: 4 groups use ~80
 * registers, 2 groups with RoPE ~92; at 32 warps the budget is 64). */
int sl_qknorm_items(bool decode, bool rope, int warps);

sl_status_t sl_qknorm(sl_device_t *dev, const sl_qknorm_args_t *args, sl_stream_t *stream);
sl_status_t sl_qknorm_cpu(const sl_qknorm_args_t *args);
sl_status_t sl_qknorm_validate(const sl_qknorm_args_t *args);
sl_status_t sl_qknorm_choose(const sl_qknorm_args_t *args, int arch, int sm_count, sl_qknorm_point_t *pt);
sl_status_t sl_qknorm_spec(sl_jit_spec_t *spec, const sl_qknorm_point_t *pt);
sl_status_t sl_qknorm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);
#endif

#endif
