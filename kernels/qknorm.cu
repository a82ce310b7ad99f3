// QK-norm: in-place per-head RMSNorm of Q and K (several heads per warp), optionally with neox RoPE.
#include "kernels/moe_pdl.cuh"
#include "kernels/qknorm.h"
#include "kernels/vec.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM (64, 128 or 256) must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (sl_dtype_t code of Q and K) must be defined by the JIT"
#endif
#ifndef DTYPE_W
#error "DTYPE_W (sl_dtype_t code of the q/k weights) must be defined by the JIT"
#endif
#ifndef EPS
#error "EPS (a float constant) must be defined by the JIT"
#endif
#ifndef WEIGHT_BIAS
#error "WEIGHT_BIAS (a float constant: scale is WEIGHT_BIAS + w) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef ITEMS
#error "ITEMS (head groups per warp per iteration: 1 for decode, 2-4 for prefill) must be defined by the JIT"
#endif
#ifndef ROT_DIM
#error "ROT_DIM (0: no RoPE; else the rotated dims, a power of two in [16, HEAD_DIM]) must be defined by the JIT"
#endif
#ifndef CACHE
#error "CACHE (Q/K cache hints: 0 none, 1 streaming stores st.global.cs, 2 streaming loads and stores) must be defined by the JIT"
#endif
#ifndef RSQ
#error "RSQ (0: 1/sqrtf as the CPU reference; 1: rsqrtf, <= 2 fp32 ulp) must be defined by the JIT"
#endif
#ifndef WF32
#error "WF32 (0: weights kept packed, unpacked per item; 1: unpacked and biased once, fp32 in registers) must be defined by the JIT"
#endif
#ifndef PIPE
#error "PIPE (0: one iteration's heads at a time; 1: the next iteration's loads issued before this one's reductions) must be defined by the JIT"
#endif
#ifndef RLAYOUT
#error "RLAYOUT (RoPE: 0 pairs across lanes, 8 cos + 8 sin per lane; 1 the same, split: 4 + 4; 2 pairs within a lane) must be defined by the JIT"
#endif

static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(ITEMS >= 1 && ITEMS <= 8, "ITEMS must be in [1, 8]");
static_assert(ROT_DIM == 0 || (ROT_DIM >= 16 && ROT_DIM <= HEAD_DIM && (ROT_DIM & (ROT_DIM - 1)) == 0),
              "ROT_DIM must be 0 or a power of two in [16, HEAD_DIM]");
static_assert(CACHE >= 0 && CACHE <= 2, "CACHE must be 0, 1 or 2");
static_assert((RSQ == 0 || RSQ == 1) && (WF32 == 0 || WF32 == 1) && (PIPE == 0 || PIPE == 1),
              "RSQ, WF32 and PIPE are 0 or 1");
static_assert(RLAYOUT >= 0 && RLAYOUT <= 2 && (RLAYOUT == 0 || ROT_DIM > 0), "RLAYOUT is 0, 1 or 2 (1, 2: RoPE only)");
static_assert(RLAYOUT != 2 || ROT_DIM == HEAD_DIM, "RLAYOUT 2 (pairs within a lane) needs full rotary");

// Layout: a head is LANES consecutive lanes (an aligned sub-warp), each holding VEC consecutive
// elements as 16-byte packets; the warp holds HEADS_PER_WARP heads (4 at 64, 2 at 128, 1 at 256),
// so a 128-elt bf16 head is half a warp. The sum of squares is a butterfly over the head's lanes
// only: ROUNDS = log2(LANES) shfl_xor steps, no shared memory, no barrier.
constexpr int VEC = SL_QKNORM_ELTS_PER_LANE;
constexpr int LANES = SL_QKNORM_LANES_PER_HEAD(HEAD_DIM);
constexpr int HEADS_PER_WARP = SL_WARP_SIZE / LANES;
constexpr int ROUNDS = sl_log2_exact(LANES);
constexpr int ESZ = sl_elem<DTYPE>::bytes;

using raw_t = sl_raw<DTYPE, VEC>;

// RLAYOUT 2 (full-rotary RoPE): lane l of a head holds elements [4l, 4l+4) and their rotation
// partners [HD/2 + 4l, HD/2 + 4l + 4) -- two 8-byte packets at 16 bits, each half-warp access
// still 128 contiguous bytes -- so the rotation needs no shuffle and a lane reads 4 cos + 4 sin.
// Otherwise lane l holds [8l, 8l+8), one 16-byte packet (two at fp32).
constexpr bool PAIRS = RLAYOUT == 2;
constexpr int HALF_VEC = VEC / 2;
constexpr int HI_OFF = PAIRS ? HEAD_DIM / 2 : HALF_VEC; // elements from a lane's first half to its second
__device__ __forceinline__ int sl_qk_lane_off(int l) {
  return PAIRS ? l * HALF_VEC : l * VEC;
}

// Occupancy: the RoPE variant of 16-bit heads (~92 registers unbounded: 2 blocks of 8 warps per
// SM) is asked for 24 resident warps (<= 85 registers; ptxas: 80, an 8-byte spill slot), since it
// keeps Q/K and cos/sin loads in flight per warp. Without RoPE (60 registers at 4 items) and for
// fp32 (which would spill), no minimum.
// (An explicit minimum of 1 changes ptxas's register heuristic -- 70 instead of 60 registers at
// 4 items without RoPE -- so the one-argument form is kept where no minimum is wanted.)
#if ROT_DIM > 0 && WARPS >= 2 && WARPS <= 8
constexpr int MIN_BLOCKS = ESZ == 2 ? 24 / WARPS : 1;
#define SL_QK_BOUNDS __launch_bounds__(WARPS * SL_WARP_SIZE, MIN_BLOCKS)
#else
#define SL_QK_BOUNDS __launch_bounds__(WARPS * SL_WARP_SIZE)
#endif

// A lane's packets: VEC elements as two halves of 4 (8 bytes at 16 bits, 16 at fp32), at
// p and p + HI_OFF elements: contiguous (one 16-byte access at 16 bits) unless PAIRS.
template <int DT> __device__ __forceinline__ void sl_qk_load_raw(const char *p, sl_raw<DT, VEC> &r, bool stream) {
  constexpr int eb = sl_elem<DT>::bytes;
  if constexpr (!PAIRS && eb == 2) {
    const uint4 *a = reinterpret_cast<const uint4 *>(p);
    const uint4 v = stream ? __ldcs(a) : *a;
    r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
  } else if constexpr (eb == 2) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint2 *a = reinterpret_cast<const uint2 *>(p + h * HI_OFF * eb);
      const uint2 v = stream ? __ldcs(a) : *a;
      r.w[2 * h] = v.x, r.w[2 * h + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint4 *a = reinterpret_cast<const uint4 *>(p + h * HI_OFF * eb);
      const uint4 v = stream ? __ldcs(a) : *a;
      r.w[4 * h] = v.x, r.w[4 * h + 1] = v.y, r.w[4 * h + 2] = v.z, r.w[4 * h + 3] = v.w;
    }
  }
}
// Q/K: plain, or with the streaming hints of CACHE -- st.global.cs (1, 2) and ld.global.cs (2):
// evict-first in L1 and L2, so the in-place lines leave L2 early instead of crowding it until
// the next kernel evicts them. Rounding is sl_store_vec's (sl_pack_u32).
__device__ __forceinline__ void sl_qk_load(const char *p, raw_t &r) {
  sl_qk_load_raw<DTYPE>(p, r, CACHE == 2);
}
__device__ __forceinline__ void sl_qk_store(char *p, const float (&f)[VEC]) {
  raw_t r;
  sl_raw_from_f32<DTYPE, VEC>(f, r);
  if constexpr (!PAIRS && ESZ == 2) {
    uint4 *a = reinterpret_cast<uint4 *>(p);
    const uint4 v = make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
    if constexpr (CACHE >= 1)
      __stcs(a, v);
    else
      *a = v;
  } else if constexpr (ESZ == 2) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint2 *a = reinterpret_cast<uint2 *>(p + h * HI_OFF * ESZ);
      const uint2 v = make_uint2(r.w[2 * h], r.w[2 * h + 1]);
      if constexpr (CACHE >= 1)
        __stcs(a, v);
      else
        *a = v;
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint4 *a = reinterpret_cast<uint4 *>(p + h * HI_OFF * ESZ);
      const uint4 v = make_uint4(r.w[4 * h], r.w[4 * h + 1], r.w[4 * h + 2], r.w[4 * h + 3]);
      if constexpr (CACHE >= 1)
        __stcs(a, v);
      else
        *a = v;
    }
  }
}

// Where heads are: head n (of tokens x heads) is token n / heads (sl_qknorm_div with the host's
// magic m, s), head n % heads of it, in Q below q_heads, else in K.
struct sl_qk_geo {
  char *q, *k;
  long qsb, ksb; // row strides in bytes
  unsigned heads, total, m;
  int s, q_heads;
};
__device__ __forceinline__ unsigned sl_qk_token(const sl_qk_geo &g, unsigned n) {
  return sl_qknorm_div(n, g.m, g.s);
}

// The heads of one warp iteration (base = its first head): item u is head base + u*HEADS_PER_WARP
// + sub. Their loads are issued here; nothing waits on them.
struct sl_qk_iter {
  raw_t raw[ITEMS];
  char *p[ITEMS];
  bool active[ITEMS], is_q[ITEMS];
};
__device__ __forceinline__ void sl_qk_issue(unsigned base, const sl_qk_geo &g, int sub, int l, sl_qk_iter &it) {
#pragma unroll
  for (int u = 0; u < ITEMS; u++) {
    const unsigned n = base + u * HEADS_PER_WARP + sub;
    it.active[u] = n < g.total;
    unsigned tk = sl_qk_token(g, n);
    const int h = (int)(n - tk * g.heads);
    if (!it.active[u]) tk = 0u; // (the pointer of an inactive item is never dereferenced)
    it.is_q[u] = h < g.q_heads;
    const int hh = it.is_q[u] ? h : h - g.q_heads;
    it.p[u] = (it.is_q[u] ? g.q : g.k) + (long)tk * (it.is_q[u] ? g.qsb : g.ksb) +
              ((long)hh * HEAD_DIM + sl_qk_lane_off(l)) * ESZ;
    if (it.active[u])
      sl_qk_load(it.p[u], it.raw[u]);
    else
      sl_raw_zero<DTYPE, VEC>(it.raw[u]);
  }
}

// Packed words -> fp32. bf16 is the top half of an fp32: element 2j is `w << 16`, element
// 2j + 1 is `w & 0xffff0000` (2 instructions per word; __bfloat1622float2 compiles to 3:
// PRMT + IMAD.U32 + SHF). Bit-identical to sl_raw_to_f32.
template <int DT> __device__ __forceinline__ void sl_qk_to_f32(const sl_raw<DT, VEC> &r, float (&f)[VEC]) {
  if constexpr (DT == SL_DTYPE_BF16) {
#pragma unroll
    for (int j = 0; j < sl_raw<DT, VEC>::words; j++) {
      f[2 * j] = __uint_as_float(r.w[j] << 16);
      f[2 * j + 1] = __uint_as_float(r.w[j] & 0xffff0000u);
    }
  } else {
    sl_raw_to_f32<DT, VEC>(r, f);
  }
}

using raw_w = sl_raw<DTYPE_W, VEC>;
constexpr float SL_QK_BIAS = WEIGHT_BIAS;

// A weight slice as fp32, biased. A bias of 0 is not added: (x*inv)*w equals (x*inv)*(0+w)
// except for the sign of a zero product when w is -0.0.
__device__ __forceinline__ void sl_qk_weight_f32(const raw_w &r, float (&w)[VEC]) {
  sl_qk_to_f32<DTYPE_W>(r, w);
  if constexpr (SL_QK_BIAS != 0.0f) {
#pragma unroll
    for (int i = 0; i < VEC; i++)
      w[i] = SL_QK_BIAS + w[i];
  }
}

// Sum of squares over the head's lanes, then 1/sqrt(mean + eps): IEEE sqrt and division as the
// CPU reference, or (RSQ) the hardware reciprocal square root (<= 2 fp32 ulp; far below a bf16 ulp).
__device__ __forceinline__ float sl_qk_inv_rms(const float (&v)[VEC]) {
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < VEC; i++)
    ss += v[i] * v[i];
  ss = sl_butterfly_sum<ROUNDS>(ss);
  const float ms = ss / (float)HEAD_DIM + EPS;
  if constexpr (RSQ)
    return rsqrtf(ms);
  else
    return 1.0f / sqrtf(ms);
}

extern "C" __global__ void SL_QK_BOUNDS
    sl_qknorm_fwd(void *q, void *k, long q_row_stride, long k_row_stride, int tokens, int q_heads, int kv_heads,
                  const void *__restrict__ q_weight, const void *__restrict__ k_weight,
                  const int *__restrict__ positions, const float *__restrict__ cos_cache,
                  const float *__restrict__ sin_cache, int max_pos, unsigned div_m, int div_s) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & (SL_WARP_SIZE - 1);
  const int sub = lane / LANES; // head slot within the warp
  const int l = lane % LANES;   // lane within the head: elements [l*VEC, l*VEC + VEC)
  // Head indices are 32-bit (the host checks tokens * heads < 2^30, so every index below, at
  // most total + one grid stride, is < 2^31) and divided by the head count with the host's
  // magic multiplier: v1's 64-bit division per head made it issue-bound, v3's 32-bit division
  // per iteration plus a branchy wrap per item still cost ~20% of the plain kernel's instructions.
  const unsigned heads = (unsigned)(q_heads + kv_heads);
  const unsigned total = (unsigned)tokens * heads;
  const sl_qk_geo g = {(char *)q,  (char *)k, q_row_stride * ESZ, k_row_stride * ESZ, heads, total, div_m,
                       div_s,     q_heads};

  // Both weight slices stay in registers for the whole loop, packed (4 words each for 16-bit
  // weights instead of 8 floats), and are unpacked and biased at use (WF32 = 0), or unpacked and
  // biased once, after the first iteration's Q/K loads are issued (WF32 = 1: 16 registers, no
  // per-item conversion: fewer instructions per head for a grid-stride loop). v2 converted them
  // before the loop: ptxas placed those FADDs ahead of the first Q/K load, so every warp waited
  // one full load latency for the weights before it issued its heads' loads. Same fp32
  // operations either way: bit-identical results.
  raw_w wq, wk;
  sl_qk_load_raw<DTYPE_W>((const char *)q_weight + sl_qk_lane_off(l) * sl_elem<DTYPE_W>::bytes, wq, false);
  sl_qk_load_raw<DTYPE_W>((const char *)k_weight + sl_qk_lane_off(l) * sl_elem<DTYPE_W>::bytes, wk, false);
#if WF32
  float wqf[VEC], wkf[VEC];
  bool wready = false;
#endif

  // Normalize, scale, (rotate) and store one item whose packed values are in `raw`. Only one
  // item's fp32 values are live at a time (the others stay packed), which keeps registers -- and
  // so occupancy -- for the loads in flight; other warps hide the shuffle and sqrt latencies.
  auto norm_item = [&](const raw_t &raw, bool is_q, float (&v)[VEC]) {
    sl_qk_to_f32<DTYPE>(raw, v);
    const float inv = sl_qk_inv_rms(v);
    float w[VEC];
#if WF32
#pragma unroll
    for (int i = 0; i < VEC; i++)
      w[i] = is_q ? wqf[i] : wkf[i];
#else
    raw_w ws; // the item's weight, selected word by word (a select of the structs went to the stack)
#pragma unroll
    for (int j = 0; j < raw_w::words; j++)
      ws.w[j] = is_q ? wq.w[j] : wk.w[j];
    sl_qk_weight_f32(ws, w);
#endif
#pragma unroll
    for (int i = 0; i < VEC; i++)
      v[i] = (v[i] * inv) * w[i];
  };

  // Grid-stride over blocks of ITEMS x HEADS_PER_WARP consecutive heads, uniform per warp: every
  // lane runs every iteration, so the full-mask shuffles below are always legal. Item u of an
  // iteration is head base + u*HEADS_PER_WARP + sub: each load instruction covers 512 contiguous
  // bytes, and all ITEMS loads are issued before the first reduction (ITEMS x 16 bytes in flight
  // per lane; one head group alone would leave the memory system under-fed).
  const unsigned warp_id = blockIdx.x * WARPS + threadIdx.x / SL_WARP_SIZE;
  const unsigned warp_stride = gridDim.x * WARPS;
  constexpr int SPAN = ITEMS * HEADS_PER_WARP;
  const unsigned step = warp_stride * SPAN;
#if PIPE
  // Software pipelining (resident grid): the next iteration's loads are issued before this
  // iteration's reductions and stores, so a warp always has a head group's loads in flight
  // (as kernels/rmsnorm.cu does for plain rows). ITEMS more packed raws live (4 registers each
  // at 16 bits). Plain norm only (the host rejects PIPE with RoPE).
  static_assert(ROT_DIM == 0, "PIPE is for the plain norm");
  unsigned base = warp_id * SPAN;
  if (base >= total) return; // warp-uniform; no block-wide synchronisation in this kernel
  sl_qk_iter cur;
  sl_qk_issue(base, g, sub, l, cur);
#if WF32
  sl_qk_weight_f32(wq, wqf);
  sl_qk_weight_f32(wk, wkf);
#endif
  for (; base < total; base += step) {
    sl_qk_iter nxt;
    if (base + step < total) sl_qk_issue(base + step, g, sub, l, nxt);
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      float v[VEC];
      norm_item(cur.raw[u], cur.is_q[u], v);
      if (cur.active[u]) sl_qk_store(cur.p[u], v);
    }
    cur = nxt;
  }
#else
#if ROT_DIM > 0
  // RoPE: the positions of an iteration's tokens are loaded one iteration ahead (prologue, then
  // at the end of each iteration), so the cos/sin loads, which need them, go out together with
  // the loads of Q/K instead of one memory round trip later.
  int pos_next[ITEMS];
#pragma unroll
  for (int u = 0; u < ITEMS; u++) {
    const unsigned n = warp_id * SPAN + u * HEADS_PER_WARP + sub;
    pos_next[u] = n < total ? positions[sl_qk_token(g, n)] : -1;
  }
#endif
  for (unsigned base = warp_id * SPAN; base < total; base += step) {
    sl_qk_iter it;
    sl_qk_issue(base, g, sub, l, it);
#if ROT_DIM > 0
    // cos/sin rows of this iteration's positions (loaded last iteration), issued before the
    // reductions so their latency overlaps them; then the next iteration's positions.
    // RLAYOUT 0: both lanes of a rotation pair (lane, lane ^ HALF/VEC) read the same 8 cos and
    // 8 sin values (16 registers per item); 1: each reads 4 + 4 (its half of the pairs); 2: a
    // lane holds its pairs, 4 + 4 at 4l.
    constexpr int HALF = ROT_DIM / 2;
    constexpr int CSN = RLAYOUT ? VEC / 2 : VEC;
    const bool first = l * VEC < HALF;
    bool rotate[ITEMS];
    float cs[ITEMS][CSN], sn[ITEMS][CSN];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      const int pos = pos_next[u];
      rotate[u] = it.active[u] && pos >= 0 && pos < max_pos && (PAIRS || l * VEC < ROT_DIM);
      if (rotate[u]) {
        const long off = (long)pos * HALF + (PAIRS ? l * HALF_VEC : (l * VEC) % HALF + (RLAYOUT == 1 && !first ? VEC / 2 : 0));
        sl_load_vec<SL_DTYPE_F32, CSN>(cos_cache + off, cs[u]);
        sl_load_vec<SL_DTYPE_F32, CSN>(sin_cache + off, sn[u]);
      } else {
#pragma unroll
        for (int i = 0; i < CSN; i++)
          cs[u][i] = sn[u][i] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < ITEMS; u++) { // the next iteration's (past total: none)
      const unsigned n = base + step + u * HEADS_PER_WARP + sub;
      pos_next[u] = n < total ? positions[sl_qk_token(g, n)] : -1;
    }
#endif
#if WF32
    if (!wready) { // once, after the first iteration's loads are out
      sl_qk_weight_f32(wq, wqf);
      sl_qk_weight_f32(wk, wkf);
      wready = true;
    }
#endif
    // Then one item at a time: its sum of squares, scale and store.
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      float v[VEC];
      norm_item(it.raw[u], it.is_q[u], v);
#if ROT_DIM > 0
      // Element i pairs with i + HALF, held by the lane HALF/VEC away; HALF/VEC is a power of
      // two below the head's lane count, so the partner is lane ^ (HALF/VEC), in the same head
      // (and rotates exactly when this lane does: same head, same position, both < ROT_DIM).
#if RLAYOUT == 2
      // v[i] and v[i + 4] are elements 4l + i and 4l + i + HALF: rotated in place.
      if (rotate[u]) {
#pragma unroll
        for (int i = 0; i < HALF_VEC; i++) {
          const float x1 = v[i], x2 = v[HALF_VEC + i];
          v[i] = x1 * cs[u][i] - x2 * sn[u][i];
          v[HALF_VEC + i] = x2 * cs[u][i] + x1 * sn[u][i];
        }
      }
#elif RLAYOUT == 1
      // The first lane of a pair computes both outputs of pairs 0..3 of its 8, the second lane
      // those of pairs 4..7: one exchange of 4 inputs, one of 4 outputs (8 shuffles, as below),
      // with half the cos/sin registers and loads. Same expressions as RLAYOUT 0.
      float snd[VEC / 2], rcv[VEC / 2];
#pragma unroll
      for (int i = 0; i < VEC / 2; i++)
        snd[i] = first ? v[VEC / 2 + i] : v[i];
#pragma unroll
      for (int i = 0; i < VEC / 2; i++)
        rcv[i] = __shfl_xor_sync(0xffffffffu, snd[i], HALF / VEC);
      float keep[VEC / 2];
#pragma unroll
      for (int i = 0; i < VEC / 2; i++) {
        const float x1 = first ? v[i] : rcv[i];                // element j
        const float x2 = first ? rcv[i] : v[VEC / 2 + i];      // element j + HALF
        const float o1 = x1 * cs[u][i] - x2 * sn[u][i];
        const float o2 = x2 * cs[u][i] + x1 * sn[u][i];
        keep[i] = first ? o1 : o2;
        snd[i] = first ? o2 : o1; // the partner's
      }
#pragma unroll
      for (int i = 0; i < VEC / 2; i++)
        rcv[i] = __shfl_xor_sync(0xffffffffu, snd[i], HALF / VEC);
      if (rotate[u]) {
#pragma unroll
        for (int i = 0; i < VEC / 2; i++) {
          const float lo = first ? keep[i] : rcv[i], hi = first ? rcv[i] : keep[i];
          v[i] = lo;
          v[VEC / 2 + i] = hi;
        }
      }
#else
      float partner[VEC];
#pragma unroll
      for (int i = 0; i < VEC; i++)
        partner[i] = __shfl_xor_sync(0xffffffffu, v[i], HALF / VEC);
      if (rotate[u]) {
#pragma unroll
        for (int i = 0; i < VEC; i++)
          v[i] = first ? v[i] * cs[u][i] - partner[i] * sn[u][i] : v[i] * cs[u][i] + partner[i] * sn[u][i];
      }
#endif
#endif
      if (it.active[u]) sl_qk_store(it.p[u], v);
    }
  }
#endif
}
