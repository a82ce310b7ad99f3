// The router's warp routine (one warp per token: softmax top-k, or sigmoid + bias +
// group-limited top-k), shared by the router kernel (kernels/router.cu) and the replicated
// MoE dispatch when it computes the top-k itself (kernels/moe_dispatch.cu, MOE_ROUTE = 1), so
// both give the same ids and weights bit for bit (the same operations in the same order; the
// CPU reference kernels/router.c replays them). Expects the JIT constants KIND (0 softmax
// top-k, 1 sigmoid grouped), NUM_EXPERTS, TOPK, NUM_GROUPS, TOPK_GROUPS and DTYPE (SL_DTYPE_*
// of the logits); the includer checks them.
#ifndef SL_ROUTER_TOPK_CUH
#define SL_ROUTER_TOPK_CUH

#include "kernels/quant_dev.cuh"
#include "kernels/router_order.h"

// Why it is shaped this way (decode is a single warp's dependent chain, so the work is the
// length of that chain, not throughput):
// - Lane l holds experts [l*NE, (l+1)*NE) (lane-contiguous), so among lanes holding equal
//   scores the lowest lane holds the lowest ids, and a DeepSeek group (32 experts) is LPG = 4
//   whole lanes.
// - Every score becomes an order-preserving uint32 key (router_order.h), exact, so a warp
//   maximum is ONE redux.sync.max.u32 instead of a 5-round shuffle butterfly on (value, id).
// - Each lane sorts its NE entries once (descending key, then lower id: a 64-bit composite
//   key << 32 | (31 - j) through Batcher's odd-even merge network, depth 3 for NE = 4, 6 for
//   NE = 8). Its current candidate is the head of that list.
// - Top-k = TOPK rounds of: m = redux.max(head key); ballot(head == m); winner = the lowest
//   set lane (lowest ids); the winner shifts its list by one (one predicated move per slot,
//   depth 1). Per round the critical path is redux -> compare -> vote -> ffs -> compare ->
//   select: ~6 dependent instructions. The winner's slot j and payload travel by shuffles that
//   nothing in the next round waits for.
// - Lane r keeps rank r (id, key, payload) and computes its own weight, so the k weights,
//   the renormalization and the stores are done by k lanes in parallel.
// - Softmax: the ids depend on the logits' order only; the denominator is the per-lane sum of
//   exp(x - max) in slot order, then a 5-round xor butterfly (replayed by the CPU reference);
//   it runs beside the selection (no dependency). Rank r's numerator is exp(key_value(m_r) -
//   max): key_value gives back the logit exactly (a zero as +0, which exp(+-0 - max) does not
//   see), so it equals the reference's exp of that expert.
// - DeepSeek: group score = the sum of the group's two largest keys' values: each lane's top-2
//   is its sorted slots 0 and 1, merged over the group's lanes by log2(LPG) xor shuffles; the
//   top TOPK_GROUPS groups by rank counting (G independent shuffles, no rounds); a lane outside
//   the kept groups zeroes its head (key 0 = no expert), so it never wins.
static constexpr int NE = SL_ROUTER_NE(NUM_EXPERTS);
static constexpr int GS = NUM_EXPERTS / NUM_GROUPS; // experts per group
static constexpr int LPG = KIND == 1 ? GS / NE : 1; // lanes per group
static constexpr int DEPTH = NE < TOPK ? NE : TOPK; // list slots a lane can still need
static_assert(NE <= 32, "at most 1024 experts");
static_assert(TOPK >= 1 && TOPK <= 32 && TOPK <= NUM_EXPERTS, "1..32 experts per token");
static_assert(KIND == 0 || (NUM_EXPERTS % NUM_GROUPS == 0 && GS % NE == 0 && (LPG & (LPG - 1)) == 0 && GS >= 2 &&
                            TOPK_GROUPS >= 1 && TOPK_GROUPS <= NUM_GROUPS && NUM_GROUPS <= 32),
              "grouped routing needs groups of whole lanes (a power of two of them)");
#define FULL 0xffffffffu

// Loads of the logits and the bias: through the read-only path (ld.global.nc) when the
// includer defines SL_ROUTER_LOAD_NC 1 (the router kernel: its inputs are complete when it
// starts, as the kernel parameters' __restrict__ gave before this routine moved here), plain
// loads otherwise (the dispatch kernel reads logits that the kernel before it in the stream
// wrote, after griddepcontrol.wait).
#ifndef SL_ROUTER_LOAD_NC
#define SL_ROUTER_LOAD_NC 0
#endif
template <typename T> __device__ __forceinline__ T sl_router_ld(const T *p) {
  if constexpr (SL_ROUTER_LOAD_NC)
    return __ldg(p);
  else
    return *p;
}

// Loads NE consecutive elements [first, first + NE) of a bf16/f16/f32 array as fp32. When
// the lane's run is a whole number of aligned chunks (CH bytes, a power of two 4..16 dividing
// NE * size; rows of NUM_EXPERTS elements keep the alignment when NE divides it), one
// LDG.32/64/128 per chunk; otherwise element by element. `vec` is the runtime alignment test
// of the base pointer (uniform).
template <int DT> __device__ __forceinline__ float elem(const void *p, long i) {
  if constexpr (DT == SL_DTYPE_F32)
    return sl_router_ld(reinterpret_cast<const float *>(p) + i);
  else if constexpr (DT == SL_DTYPE_BF16)
    return sl_kq_bf16_to_f32(sl_router_ld(reinterpret_cast<const unsigned short *>(p) + i));
  else
    return sl_kq_f16_to_f32(sl_router_ld(reinterpret_cast<const unsigned short *>(p) + i));
}
template <int DT> struct run_fmt {
  static constexpr int SZ = DT == SL_DTYPE_F32 ? 4 : 2;
  static constexpr int BYTES = NE * SZ;
  static constexpr int CH = (BYTES % 16 == 0) ? 16 : (BYTES % 8 == 0) ? 8 : (BYTES % 4 == 0) ? 4 : 0;
  static constexpr bool VEC = CH >= 4 && NUM_EXPERTS % NE == 0;
};
template <int DT> __device__ __forceinline__ bool run_aligned(const void *p) {
  return run_fmt<DT>::VEC && (reinterpret_cast<unsigned long long>(p) % (run_fmt<DT>::CH > 0 ? run_fmt<DT>::CH : 1)) == 0;
}
template <int DT> __device__ __forceinline__ void load_run(const void *p, long first, int valid, bool vec, float (&x)[NE]) {
  using F = run_fmt<DT>;
  if constexpr (F::VEC) {
    if (vec) {
      if (valid > 0) { // a whole lane (NE divides NUM_EXPERTS)
        constexpr int NW = F::BYTES / 4, CW = F::CH / 4;
        unsigned w[NW];
        const char *base = reinterpret_cast<const char *>(p) + first * F::SZ;
#pragma unroll
        for (int c = 0; c < NW / CW; c++) {
          if constexpr (CW == 4) {
            uint4 v = sl_router_ld(reinterpret_cast<const uint4 *>(base + c * 16));
            w[4 * c] = v.x, w[4 * c + 1] = v.y, w[4 * c + 2] = v.z, w[4 * c + 3] = v.w;
          } else if constexpr (CW == 2) {
            uint2 v = sl_router_ld(reinterpret_cast<const uint2 *>(base + c * 8));
            w[2 * c] = v.x, w[2 * c + 1] = v.y;
          } else {
            w[c] = sl_router_ld(reinterpret_cast<const unsigned *>(base + c * 4));
          }
        }
#pragma unroll
        for (int j = 0; j < NE; j++) {
          if constexpr (DT == SL_DTYPE_F32)
            x[j] = __uint_as_float(w[j]);
          else {
            unsigned short h = (unsigned short)(j & 1 ? w[j / 2] >> 16 : w[j / 2] & 0xffffu);
            x[j] = DT == SL_DTYPE_BF16 ? sl_kq_bf16_to_f32(h) : sl_kq_f16_to_f32(h);
          }
        }
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < NE; j++)
    if (j < valid) x[j] = elem<DT>(p, first + j);
}

// Descending sort of the lane's list: composite c = key << 32 | (31 - slot) (larger key
// first, then the lower slot = lower id), payload q moved along. Batcher's odd-even merge
// sort; a comparator whose second index is past N is skipped, which is the network for the
// next power of two with the missing entries below everything (already in place).
__device__ __forceinline__ void cmp_swap(unsigned long long &a, unsigned long long &b, float &qa, float &qb) {
  bool sw = b > a;
  unsigned long long t = sw ? b : a;
  b = sw ? a : b, a = t;
  float u = sw ? qb : qa;
  qb = sw ? qa : qb, qa = u;
}
// Comparator `idx` of the network for n entries (second = its larger index); idx = -1 gives
// the number of comparators. Evaluated at compile time; the comparators are then emitted by
// template recursion, so every index is a constant and the list stays in registers.
constexpr int batcher(int n, int idx, bool second) {
  int cnt = 0;
  for (int p = 1; p < n; p <<= 1)
    for (int k = p; k >= 1; k >>= 1)
      for (int j = k % p; j + k < n; j += 2 * k)
        for (int i = 0; i < k; i++)
          if (i + j + k < n && (i + j) / (2 * p) == (i + j + k) / (2 * p)) {
            if (cnt == idx) return second ? i + j + k : i + j;
            cnt++;
          }
  return cnt;
}
template <int I> __device__ __forceinline__ void sort_from(unsigned long long (&c)[NE], float (&q)[NE]) {
  if constexpr (I < batcher(NE, -1, false)) {
    constexpr int A = batcher(NE, I, false), B = batcher(NE, I, true);
    cmp_swap(c[A], c[B], q[A], q[B]);
    sort_from<I + 1>(c, q);
  }
}
__device__ __forceinline__ void sort_desc(unsigned long long (&c)[NE], float (&q)[NE]) {
  sort_from<0>(c, q);
}

// RN(1 / d) for d in [1, 2^64): the fast path of nvcc's IEEE division (__fdiv_rn: MUFU.RCP,
// one Newton step, q = r, remainder, correction), which __fdiv_rn returns whenever its FCHK
// finds no exponent hazard, as for every such d; written out without the FCHK branch so the
// lane's NE divisions share one basic block. Callers fall back to SL_QF_DIV outside the range.
// Source switch (not a JIT point): 0 = plain SL_QF_DIV (one branch per division), the
// fallback should a GPU ever disagree with the CPU reference in the last bit.
#ifndef SL_ROUTER_RECIP_FAST
#define SL_ROUTER_RECIP_FAST 1
#endif
__device__ __forceinline__ float recip_fast(float d) {
  if constexpr (!SL_ROUTER_RECIP_FAST) return SL_QF_DIV(1.0f, d);
  float r0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(d));
  const float e = fmaf(-d, r0, 1.0f);
  const float r = fmaf(r0, e, r0);
  const float rem = fmaf(-d, r, 1.0f);
  return fmaf(r, rem, r);
}

__device__ __forceinline__ unsigned hi(unsigned long long c) {
  return (unsigned)(c >> 32);
}

// Per-lane constants of a call: experts of this lane that exist (0 for padding lanes, NE for
// whole ones), whether the logits' base allows vector loads, and (KIND 1) the lane's
// correction bias.
struct sl_router_lane_t {
  int valid;
  bool vec, has_bias;
  float bv[NE];
};
__device__ __forceinline__ void sl_router_lane_init(const void *logits, const float *bias, int lane,
                                                    sl_router_lane_t &s) {
  s.valid = NUM_EXPERTS - lane * NE < 0 ? 0 : NUM_EXPERTS - lane * NE > NE ? NE : NUM_EXPERTS - lane * NE;
  s.vec = run_aligned<DTYPE>(logits);
#pragma unroll
  for (int j = 0; j < NE; j++)
    s.bv[j] = 0.0f;
  s.has_bias = false;
#if KIND == 1
  s.has_bias = bias != nullptr; // the correction bias is per expert: loaded once per call
  if (s.has_bias) load_run<SL_DTYPE_F32>(bias, (long)lane * NE, s.valid, run_aligned<SL_DTYPE_F32>(bias), s.bv);
#else
  (void)bias;
#endif
}

// What a call of the routine computes (sl_router_token_part): all of it, or one of its two halves
// for a caller that needs the ids before the weights (the one-kernel decode layer streams the
// chosen experts' weights meanwhile). A half runs the same operations as the whole, so it gives
// the same bits (the router kernel's SASS is unchanged by the split).
enum { SL_ROUTER_ALL = 0, SL_ROUTER_IDS = 1, SL_ROUTER_WEIGHTS = 2 };
// Rank r's selection (lane r): what the weights half needs from the ids half.
struct sl_router_pick_t {
  unsigned key; // the order key (softmax: the logit's, exact)
  float q;      // the payload (grouped: the unbiased score)
};

// Token t of the [*, NUM_EXPERTS] logits, by the whole warp (every lane calls it, converged):
// lane r < TOPK gets rank r's expert id and its weight (renormalized if asked, times scaling);
// the other lanes get unspecified values. PART SL_ROUTER_IDS: the ids, and `pick` for the
// weights half; SL_ROUTER_WEIGHTS: only the weight of `pick` (my_id untouched).
template <int PART>
__device__ __forceinline__ void sl_router_token_part(const void *__restrict__ logits, long t, int lane,
                                                     const sl_router_lane_t &ls, int renormalize, float scaling,
                                                     int &my_id, float &wt, sl_router_pick_t &pick) {
  const int valid = ls.valid;
  const bool vec = ls.vec;
#if KIND == 1
  const bool has_bias = ls.has_bias;
  const float(&bv)[NE] = ls.bv;
#endif
  float x[NE];
#pragma unroll
  for (int j = 0; j < NE; j++)
    x[j] = 0.0f;
  load_run<DTYPE>(logits, t * NUM_EXPERTS + (long)lane * NE, valid, vec, x);

  unsigned long long c[NE]; // sorted list: key << 32 | (31 - slot)
  float q[NE];              // payload: the unbiased score (DeepSeek), unused for softmax
#if KIND == 0
  unsigned lmax = SL_ROUTER_KEY_NONE;
#pragma unroll
  for (int j = 0; j < NE; j++) {
    unsigned k = j < valid ? sl_router_key(x[j]) : SL_ROUTER_KEY_NONE;
    c[j] = (unsigned long long)k << 32 | (unsigned)(31 - j);
    q[j] = 0.0f;
    lmax = max(lmax, k);
  }
  // denominator: max by key (the reference's definition), exp per slot, lane sum in slot
  // order, xor butterfly; independent of the selection below
  float mx = 0.0f, sum = 0.0f;
  if constexpr (PART != SL_ROUTER_IDS) {
    mx = sl_router_key_value(__reduce_max_sync(FULL, lmax));
    float ex[NE];
#pragma unroll
    for (int j = 0; j < NE; j++) // all exps first: one branch-free block, interleaved
      ex[j] = sl_router_expf(x[j] - mx);
#pragma unroll
    for (int j = 0; j < NE; j++)
      sum = SL_QF_ADD(sum, j < valid ? ex[j] : 0.0f);
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
      sum = SL_QF_ADD(sum, __shfl_xor_sync(FULL, sum, m));
  }
  if constexpr (PART != SL_ROUTER_WEIGHTS) sort_desc(c, q);
#else
  if constexpr (PART != SL_ROUTER_WEIGHTS) { // (the weights half reads only the pick)
    // sigmoid = 1 / (1 + exp(-x)) as sl_qf_sigmoidf: all exps first, then all reciprocals
    // (recip_fast), both branch-free, so the NE chains interleave in one basic block
    float ex[NE];
#pragma unroll
    for (int j = 0; j < NE; j++)
      ex[j] = sl_router_expf(-x[j]);
    float sg[NE];
    bool fast = true;
#pragma unroll
    for (int j = 0; j < NE; j++) {
      const float d = SL_QF_ADD(1.0f, ex[j]);
      sg[j] = recip_fast(d);
      fast = fast && d < 0x1p64f; // false for NaN
    }
    if (!fast) { // rare (logit < -44 or NaN): the IEEE division, as the reference
#pragma unroll
      for (int j = 0; j < NE; j++)
        sg[j] = SL_QF_DIV(1.0f, SL_QF_ADD(1.0f, ex[j]));
    }
#pragma unroll
    for (int j = 0; j < NE; j++) {
      float s = sg[j];
      float b = has_bias ? SL_QF_ADD(s, bv[j]) : s;
      unsigned k = j < valid ? sl_router_key(b) : SL_ROUTER_KEY_NONE;
      c[j] = (unsigned long long)k << 32 | (unsigned)(31 - j);
      q[j] = s;
    }
    sort_desc(c, q);
    // group score: the two largest keys of the group (this lane's slots 0 and 1, merged over
    // the group's LPG lanes), their values added
    unsigned t1 = hi(c[0]), t2 = NE > 1 ? hi(c[NE > 1 ? 1 : 0]) : SL_ROUTER_KEY_NONE;
#pragma unroll
    for (int m = 1; m < LPG; m <<= 1) {
      unsigned o1 = __shfl_xor_sync(FULL, t1, m), o2 = __shfl_xor_sync(FULL, t2, m);
      unsigned n2 = max(min(t1, o1), max(t2, o2));
      t1 = max(t1, o1), t2 = n2;
    }
    const unsigned gkey = sl_router_key(SL_QF_ADD(sl_router_key_value(t1), sl_router_key_value(t2)));
    // keep the group if fewer than TOPK_GROUPS groups rank above it (key, then lower group)
    const int group = lane / LPG;
    int above = 0;
#pragma unroll
    for (int g = 0; g < NUM_GROUPS; g++) {
      unsigned o = __shfl_sync(FULL, gkey, g * LPG);
      above += (o > gkey || (o == gkey && g < group)) ? 1 : 0;
    }
    if (above >= TOPK_GROUPS || valid == 0) c[0] = (unsigned long long)SL_ROUTER_KEY_NONE << 32;
  }
#endif
  // top-k rounds. Only redux -> vote -> ffs -> the winner's shift is on the chain; the
  // winner's slot and payload are shuffled into per-round registers that nothing reads
  // before the last round (each warp intrinsic ends a basic block, so a use inside the
  // round would stall the next round on the shuffle's latency).
  unsigned rm[TOPK], rs[TOPK];
  int rw[TOPK];
  float rq[TOPK];
  unsigned my_key = SL_ROUTER_KEY_NONE;
  float my_q = 0.0f;
  if constexpr (PART == SL_ROUTER_WEIGHTS) {
    my_key = pick.key, my_q = pick.q;
  } else {
#pragma unroll
    for (int r = 0; r < TOPK; r++) {
      const unsigned head = hi(c[0]);
      const unsigned m = __reduce_max_sync(FULL, head);
      const unsigned ties = __ballot_sync(FULL, head == m);
      const int w = __ffs(ties) - 1; // lowest lane: lowest ids
      rm[r] = m, rw[r] = w;
      rs[r] = __shfl_sync(FULL, (unsigned)c[0], w);
      rq[r] = __shfl_sync(FULL, q[0], w);
      if (lane == w) {
#pragma unroll
        for (int p = 0; p + 1 < DEPTH; p++)
          c[p] = c[p + 1], q[p] = q[p + 1];
        c[DEPTH - 1] = (unsigned long long)SL_ROUTER_KEY_NONE << 32;
      }
    }
    // lane r keeps rank r
    my_id = 0;
#pragma unroll
    for (int r = 0; r < TOPK; r++)
      if (lane == r) my_id = rw[r] * NE + (int)(31u - rs[r]), my_key = rm[r], my_q = rq[r];
    pick.key = my_key, pick.q = my_q;
  }
  if constexpr (PART == SL_ROUTER_IDS) return;
  // weights, one rank per lane
#if KIND == 0
  wt = SL_QF_DIV(sl_router_expf(sl_router_key_value(my_key) - mx), sum);
#else
  wt = my_q;
  (void)my_key;
#endif
  if (renormalize) { // sum of the k weights in rank order, on every lane
    float norm = 0.0f;
#pragma unroll
    for (int r = 0; r < TOPK; r++)
      norm = SL_QF_ADD(norm, __shfl_sync(FULL, wt, r));
    wt = SL_QF_DIV(wt, norm);
  }
  wt = SL_QF_MUL(wt, scaling);
}
__device__ __forceinline__ void sl_router_token(const void *__restrict__ logits, long t, int lane,
                                                const sl_router_lane_t &ls, int renormalize, float scaling,
                                                int &my_id, float &wt) {
  sl_router_pick_t pick;
  sl_router_token_part<SL_ROUTER_ALL>(logits, t, lane, ls, renormalize, scaling, my_id, wt, pick);
}

#endif
