// MoE router kernel: one warp per token; softmax top-k or sigmoid + bias + group-limited
// top-k. Host side and the CPU reference (which follows the same order of operations) in
// kernels/router.c; the reproducible expf / sigmoid in kernels/quant_formats.h.
#include "kernels/quant_dev.cuh"

#ifndef KIND
#error "KIND (0 = softmax top-k, 1 = sigmoid grouped) must be defined by the JIT"
#endif
#ifndef NUM_EXPERTS
#error "NUM_EXPERTS must be defined by the JIT"
#endif
#ifndef TOPK
#error "TOPK must be defined by the JIT"
#endif
#ifndef NUM_GROUPS
#error "NUM_GROUPS (1 for softmax) must be defined by the JIT"
#endif
#ifndef TOPK_GROUPS
#error "TOPK_GROUPS must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (SL_DTYPE_* of the logits) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block; one token per warp) must be defined by the JIT"
#endif

// Lane l holds experts [l*NE, (l+1)*NE): contiguous, so a group of experts is a run of whole
// lanes and its top-2 is a sub-warp reduction over LPG lanes.
static constexpr int NE = (NUM_EXPERTS + 31) / 32;
static constexpr int GS = NUM_EXPERTS / NUM_GROUPS; // experts per group
static constexpr int LPG = GS / NE;                 // lanes per group
static_assert(NE <= 32, "at most 1024 experts");
static_assert(TOPK >= 1 && TOPK <= 32, "1..32 experts per token");
static_assert(KIND == 0 || (NUM_EXPERTS % NUM_GROUPS == 0 && GS % NE == 0 && (LPG & (LPG - 1)) == 0 && GS >= 2),
              "grouped routing needs groups of whole lanes (a power of two of them)");
#define MASKED_ID 0x7fffffff
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float load_logit(const void *p, long i) {
  if constexpr (DTYPE == SL_DTYPE_F32)
    return reinterpret_cast<const float *>(p)[i];
  else if constexpr (DTYPE == SL_DTYPE_BF16)
    return sl_kq_bf16_to_f32(reinterpret_cast<const unsigned short *>(p)[i]);
  else
    return sl_kq_f16_to_f32(reinterpret_cast<const unsigned short *>(p)[i]);
}

// (value, id) order: larger value first, then the lower id. Masked entries carry MASKED_ID
// and -inf, so a real -inf still beats them.
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
  return av > bv || (av == bv && ai < bi);
}

// Warp arg-max of (value, id); every lane gets the winner (a strict total order, so the
// butterfly is order-independent).
__device__ __forceinline__ void warp_argmax(float &v, int &id) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, m);
    int oi = __shfl_xor_sync(0xffffffffu, id, m);
    if (better(ov, oi, v, id)) v = ov, id = oi;
  }
}

// k rounds: each lane proposes its best unused entry, the warp picks one, its owner marks it.
__device__ __forceinline__ void select_topk(float (&key)[NE], int lane, int (&ids)[TOPK]) {
  bool used[NE];
#pragma unroll
  for (int j = 0; j < NE; j++)
    used[j] = false;
#pragma unroll 1
  for (int r = 0; r < TOPK; r++) {
    float bv = NEG_INF;
    int bi = MASKED_ID;
#pragma unroll
    for (int j = 0; j < NE; j++) {
      int e = lane * NE + j;
      if (!used[j] && e < NUM_EXPERTS && better(key[j], e, bv, bi)) bv = key[j], bi = e;
    }
    warp_argmax(bv, bi);
    ids[r] = bi;
#pragma unroll
    for (int j = 0; j < NE; j++)
      if (lane * NE + j == bi) used[j] = true;
  }
}

// Value of expert `e` from its owner lane.
__device__ __forceinline__ float fetch(const float (&v)[NE], int e) {
  float mine = 0.0f;
#pragma unroll
  for (int j = 0; j < NE; j++)
    if ((e % NE) == j) mine = v[j];
  return __shfl_sync(0xffffffffu, mine, (e / NE) & 31);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
    sl_router_kernel(const void *__restrict__ logits, const float *__restrict__ bias, int *__restrict__ topk_ids,
                     float *__restrict__ topk_weights, int num_tokens, int renormalize, float scaling) {
  const int lane = threadIdx.x & 31;
  for (long t = (long)blockIdx.x * WARPS + threadIdx.x / 32; t < num_tokens; t += (long)gridDim.x * WARPS) {
    float x[NE];
#pragma unroll
    for (int j = 0; j < NE; j++) {
      int e = lane * NE + j;
      x[j] = e < NUM_EXPERTS ? load_logit(logits, t * NUM_EXPERTS + e) : NEG_INF;
    }
    int ids[TOPK];
    float w[TOPK];
#if KIND == 0
    // softmax is monotone: select on the logits, so ids depend on comparisons only.
    float mx = NEG_INF;
#pragma unroll
    for (int j = 0; j < NE; j++)
      mx = sl_qf_max(mx, x[j]);
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
      mx = sl_qf_max(mx, __shfl_xor_sync(0xffffffffu, mx, m));
    float ex[NE], sum = 0.0f;
#pragma unroll
    for (int j = 0; j < NE; j++) {
      ex[j] = lane * NE + j < NUM_EXPERTS ? sl_qf_expf(x[j] - mx) : 0.0f;
      sum = SL_QF_ADD(sum, ex[j]);
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
      sum = SL_QF_ADD(sum, __shfl_xor_sync(0xffffffffu, sum, m));
    select_topk(x, lane, ids);
#pragma unroll
    for (int r = 0; r < TOPK; r++)
      w[r] = SL_QF_DIV(fetch(ex, ids[r]), sum);
#else
    float s[NE], b[NE];
#pragma unroll
    for (int j = 0; j < NE; j++) {
      int e = lane * NE + j;
      s[j] = sl_qf_sigmoidf(x[j]);
      b[j] = e < NUM_EXPERTS ? (bias ? SL_QF_ADD(s[j], bias[e]) : s[j]) : NEG_INF;
    }
    // group score = sum of the group's two largest biased scores
    float t1 = NEG_INF, t2 = NEG_INF;
#pragma unroll
    for (int j = 0; j < NE; j++) {
      if (b[j] > t1)
        t2 = t1, t1 = b[j];
      else if (b[j] > t2)
        t2 = b[j];
    }
#pragma unroll
    for (int m = 1; m < LPG; m <<= 1) {
      float o1 = __shfl_xor_sync(0xffffffffu, t1, m), o2 = __shfl_xor_sync(0xffffffffu, t2, m);
      float n1 = sl_qf_max(t1, o1), n2 = t1 >= o1 ? sl_qf_max(t2, o1) : sl_qf_max(t1, o2);
      t1 = n1, t2 = n2;
    }
    const int group = lane * NE / GS;
    const float gscore = SL_QF_ADD(t1, t2);
    bool keep = false;
#pragma unroll 1
    for (int r = 0; r < TOPK_GROUPS; r++) {
      float v = keep || lane * NE >= NUM_EXPERTS ? NEG_INF : gscore;
      int g = keep || lane * NE >= NUM_EXPERTS ? MASKED_ID : group;
      warp_argmax(v, g);
      if (g == group) keep = true;
    }
#pragma unroll
    for (int j = 0; j < NE; j++)
      if (!keep) b[j] = NEG_INF;
    select_topk(b, lane, ids);
#pragma unroll
    for (int r = 0; r < TOPK; r++)
      w[r] = fetch(s, ids[r]);
#endif
    // Weights: renormalized over the k chosen (summed in rank order), then scaled.
    float norm = 0.0f;
#pragma unroll
    for (int r = 0; r < TOPK; r++)
      norm = SL_QF_ADD(norm, w[r]);
#pragma unroll
    for (int r = 0; r < TOPK; r++) {
      float v = renormalize ? SL_QF_DIV(w[r], norm) : w[r];
      v = SL_QF_MUL(v, scaling);
      if (lane == r) {
        topk_ids[t * TOPK + r] = ids[r];
        topk_weights[t * TOPK + r] = v;
      }
    }
  }
}
