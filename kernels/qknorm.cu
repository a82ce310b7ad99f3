// QK-norm: in-place per-head RMSNorm of Q and K (several heads per warp), optionally with neox RoPE.
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

static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(ITEMS >= 1 && ITEMS <= 8, "ITEMS must be in [1, 8]");
static_assert(ROT_DIM == 0 || (ROT_DIM >= 16 && ROT_DIM <= HEAD_DIM && (ROT_DIM & (ROT_DIM - 1)) == 0),
              "ROT_DIM must be 0 or a power of two in [16, HEAD_DIM]");

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

// (token, head) of head o of an iteration starting at head `base` (t0 = base / heads, h0 = the
// remainder): o < ITEMS * HEADS_PER_WARP crosses into the next token at most once when
// heads >= that span (the usual case); small head counts take a division.
__device__ __forceinline__ void sl_qk_locate(unsigned t0, unsigned h0, unsigned o, unsigned heads, unsigned &tk,
                                             unsigned &h) {
  h = h0 + o;
  tk = t0;
  if (h >= heads) {
    h -= heads;
    tk++;
    if (h >= heads) {
      const unsigned more = h / heads;
      tk += more;
      h -= more * heads;
    }
  }
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

extern "C" __global__ void SL_QK_BOUNDS
    sl_qknorm_fwd(void *q, void *k, long q_row_stride, long k_row_stride, int tokens, int q_heads, int kv_heads,
                  const void *__restrict__ q_weight, const void *__restrict__ k_weight,
                  const int *__restrict__ positions, const float *__restrict__ cos_cache,
                  const float *__restrict__ sin_cache, int max_pos) {
  const int lane = threadIdx.x & (SL_WARP_SIZE - 1);
  const int sub = lane / LANES; // head slot within the warp
  const int l = lane % LANES;   // lane within the head: elements [l*VEC, l*VEC + VEC)
  // Head indices are 32-bit (the host checks tokens * heads < 2^30): one 32-bit division per
  // warp iteration instead of a 64-bit one per head, which made the kernel issue-bound.
  const unsigned heads = (unsigned)(q_heads + kv_heads);
  const unsigned total = (unsigned)tokens * heads;

  // Both weight slices stay in registers for the whole loop, packed (4 words each for 16-bit
  // weights instead of 8 floats), and are unpacked and biased at use. v2 converted and added the
  // bias before the loop: ptxas placed those FADDs ahead of the first Q/K load, so every warp
  // waited one full load latency for the weights before it issued its heads' loads -- once per
  // warp, which the full grid (one iteration per warp) would pay on every iteration. Same fp32
  // operations at use: bit-identical results.
  using raw_w = sl_raw<DTYPE_W, VEC>;
  raw_w wq, wk;
  sl_raw_load<DTYPE_W, VEC>((const char *)q_weight + l * VEC * sl_elem<DTYPE_W>::bytes, wq);
  sl_raw_load<DTYPE_W, VEC>((const char *)k_weight + l * VEC * sl_elem<DTYPE_W>::bytes, wk);

  // Grid-stride over blocks of ITEMS x HEADS_PER_WARP consecutive heads, uniform per warp: every
  // lane runs every iteration, so the full-mask shuffles below are always legal. Item u of an
  // iteration is head base + u*HEADS_PER_WARP + sub: each load instruction covers 512 contiguous
  // bytes, and all ITEMS loads are issued before the first reduction (ITEMS x 16 bytes in flight
  // per lane; one head group alone would leave the memory system under-fed).
  const unsigned warp_id = blockIdx.x * WARPS + threadIdx.x / SL_WARP_SIZE;
  const unsigned warp_stride = gridDim.x * WARPS;
  constexpr int SPAN = ITEMS * HEADS_PER_WARP;
  const unsigned step = warp_stride * SPAN;
#if ROT_DIM > 0
  // RoPE: the positions of an iteration's tokens are loaded one iteration ahead (prologue, then
  // at the end of each iteration), so the cos/sin loads, which need them, go out together with
  // the loads of Q/K instead of one memory round trip later.
  int pos_next[ITEMS];
  {
    const unsigned b = warp_id * SPAN, t0 = b / heads, h0 = b - t0 * heads;
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      unsigned tk, h;
      sl_qk_locate(t0, h0, u * HEADS_PER_WARP + sub, heads, tk, h);
      pos_next[u] = b + u * HEADS_PER_WARP + sub < total ? positions[tk] : -1;
    }
  }
#endif
  for (unsigned base = warp_id * SPAN; base < total; base += step) {
    const unsigned t0 = base / heads, h0 = base - t0 * heads;
    raw_t raw[ITEMS];
    char *p[ITEMS];
    bool active[ITEMS], is_q[ITEMS];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      const unsigned o = u * HEADS_PER_WARP + sub;
      unsigned tk, h;
      sl_qk_locate(t0, h0, o, heads, tk, h);
      active[u] = base + o < total;
      if (!active[u]) tk = 0u; // (the pointer of an inactive item is never dereferenced)
      is_q[u] = (int)h < q_heads;
      p[u] = is_q[u] ? (char *)q + ((long)tk * q_row_stride + (long)h * HEAD_DIM + l * VEC) * ESZ
                     : (char *)k + ((long)tk * k_row_stride + (long)((int)h - q_heads) * HEAD_DIM + l * VEC) * ESZ;
      if (active[u])
        sl_raw_load<DTYPE, VEC>(p[u], raw[u]);
      else
        sl_raw_zero<DTYPE, VEC>(raw[u]);
    }
#if ROT_DIM > 0
    // cos/sin rows of this iteration's positions (loaded last iteration), issued before the
    // reductions so their latency overlaps them; then the next iteration's positions.
    constexpr int HALF = ROT_DIM / 2;
    bool rotate[ITEMS];
    float cs[ITEMS][VEC], sn[ITEMS][VEC];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      const int pos = pos_next[u];
      rotate[u] = active[u] && pos >= 0 && pos < max_pos && l * VEC < ROT_DIM;
      if (rotate[u]) {
        const long off = (long)pos * HALF + (l * VEC) % HALF;
        sl_load_vec<SL_DTYPE_F32, VEC>(cos_cache + off, cs[u]);
        sl_load_vec<SL_DTYPE_F32, VEC>(sin_cache + off, sn[u]);
      }
    }
    {
      const unsigned b = base + step; // may pass total (then every item is inactive)
      const unsigned nt0 = b / heads, nh0 = b - nt0 * heads;
#pragma unroll
      for (int u = 0; u < ITEMS; u++) {
        unsigned tk, h;
        sl_qk_locate(nt0, nh0, u * HEADS_PER_WARP + sub, heads, tk, h);
        pos_next[u] = b < total && b + u * HEADS_PER_WARP + sub < total ? positions[tk] : -1;
      }
    }
#endif
    // Then one item at a time: its sum of squares, scale and store. Only one item's fp32 values
    // are live (the others stay packed), which keeps registers -- and so occupancy -- for the
    // loads in flight; other warps hide the shuffle and sqrt latencies.
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
      float v[VEC];
      sl_raw_to_f32<DTYPE, VEC>(raw[u], v);
      float ss = 0.0f;
#pragma unroll
      for (int i = 0; i < VEC; i++)
        ss += v[i] * v[i];
      ss = sl_butterfly_sum<ROUNDS>(ss);
      const float inv = 1.0f / sqrtf(ss / (float)HEAD_DIM + EPS);
      raw_w ws; // the item's weight, selected word by word (a select of the structs went to the stack)
#pragma unroll
      for (int j = 0; j < raw_w::words; j++)
        ws.w[j] = is_q[u] ? wq.w[j] : wk.w[j];
      float w[VEC];
      sl_raw_to_f32<DTYPE_W, VEC>(ws, w);
#pragma unroll
      for (int i = 0; i < VEC; i++)
        v[i] = (v[i] * inv) * (WEIGHT_BIAS + w[i]);
#if ROT_DIM > 0
      // Element i pairs with i + HALF, held by the lane HALF/VEC away; HALF/VEC is a power of
      // two below the head's lane count, so the partner is lane ^ (HALF/VEC), in the same head.
      float partner[VEC];
#pragma unroll
      for (int i = 0; i < VEC; i++)
        partner[i] = __shfl_xor_sync(0xffffffffu, v[i], HALF / VEC);
      if (rotate[u]) {
        const bool first = l * VEC < HALF;
#pragma unroll
        for (int i = 0; i < VEC; i++)
          v[i] = first ? v[i] * cs[u][i] - partner[i] * sn[u][i] : v[i] * cs[u][i] + partner[i] * sn[u][i];
      }
#endif
      if (active[u]) sl_store_vec<DTYPE, VEC>(p[u], v);
    }
  }
}
