// The whole local MoE layer for ONE token in one cooperative kernel (decode at batch 1):
// router logits -> top-k in every block -> gate_up + SiLU-and-mul -> (tagged activations, or a
// grid barrier) -> down -> combine (+ residual). Host side and the rule that picks it:
// kernels/moe_layer.c; measured phase by phase in kernels/NOTES.md ("One-kernel decode layer").
//
// Why one kernel. At T = 1 the layer moves ~76 MB of expert weights (Qwen3-30B-A3B: 8 experts
// x 9.4 MB; 17.7 us at copy bandwidth) and the chain of six launches (logits, top-k, dispatch,
// gate_up, down, combine) measured 35 us in a CUDA graph: each launch pays its ramp and drain
// and one dependent round trip while HBM idles, and the two FFN kernels streamed at ~65 % of
// copy bandwidth (bench/results/2026-11-29-s3-h200-merged/). Here:
//  - There is no dispatch: the one token's x is read by every block straight from the input.
//  - The router logits are spread over the grid (one expert row per warp) and published as
//    64-bit (launch tag, value) words; warp 0 of every block polls them (the poll is the load:
//    no fence, no grid barrier) and computes the same top-k (kernels/router_topk.cuh, the router
//    kernel's warp routine: ids and weights are what sl_router gives for these logits, bit for
//    bit).
//  - Block b owns the output columns [c0, c1) = [b H / G, (b+1) H / G). Its down-projection rows
//    of those columns for each chosen expert (K x (c1 - c0) rows of I bf16: 192 KB per block at
//    Qwen3-30B-A3B size) come by the bulk-copy engine into shared memory: a quarter of the weights
//    in ~8 instructions per block. The default shape (DLATE) asks for them once the block's gate_up
//    is done, so they stream while the activations are exchanged; the older shapes right after the
//    top-k (their copy warp), so they arrive while the gate_up weights stream.
//  - gate_up: the K x I (gate row j, up row j) pairs are split into one contiguous range per
//    block, strided over its compute warps; a warp loads both 4 KB rows of PP pairs (16-byte
//    loads, all issued before the first use), dots them with x, and writes
//    act[k][j] = bf16(silu(bf16(g)) * bf16(u)) to global memory. In the default shape (PRODREM)
//    the copy warp takes the 1-2 pairs past the compute warps' last full round, and (IDSFIRST)
//    the top-k warp computes only the ids before the stream starts; the copy warp computes the
//    weights later (PRODREM and IDSFIRST below say why).
//  - The activations go out as 32-bit tagged words (ACTTAG, the default shape): a warp per rank
//    polls that rank's words (3 KB, L2) -- the poll is the load, as for the logits -- and
//    computes the block's 16 down outputs from shared memory; the block then combines its
//    columns: no expert-output buffer and no combine launch. (The _BAR shapes wait at a grid
//    barrier and read plain bf16 activations instead: ~0.2 us slower on the H200.)
// DRAM traffic is the weights once (+ the router's 0.5 MB).
//
// Rounding as the unfused layer (kernels/moe_ffn_gemv.cu, kernels/moe_combine.cu): gate and up
// rounded to bf16, act = silu(g) * u in fp32 rounded to bf16, each expert's down output rounded
// to bf16, combine acc = fma(w_k, y_k, acc) over the ranks in order from 0, + residual, rounded
// to bf16. Dot products are fp32 sums in a fixed order of their own (per lane over its packets,
// then a xor butterfly), so results are deterministic; they differ from the tensor-core kernels
// only by fp32 summation order. Router logits likewise (fp32 FMAs from bf16 x and weights).
//
// Waits are bounded: the logit and activation polls, the grid barrier (kernels/grid_barrier.cuh) and the
// mbarrier wait for the bulk copies give up after timeout_ns and record the error in
// state->error (the layer's dispatch workspace record: sl_moe_layer_check reports it).
#include <cuda_bf16.h>

#include "kernels/bulk_copy.cuh"
#include "kernels/grid_barrier.cuh"
#include "kernels/moe_pdl.cuh"
#define SL_ROUTER_LOAD_NC 0 // the routine reads the logits from shared memory
#include "kernels/router_topk.cuh"

#if !defined(HIDDEN) || !defined(INTER) || !defined(WARPS) || !defined(PP)
#error "HIDDEN, INTER (multiples of 8), WARPS (warps per block) and PP (pairs per warp step) must be defined by the JIT"
#endif
#if !defined(KIND) || !defined(NUM_EXPERTS) || !defined(TOPK) || !defined(NUM_GROUPS) || !defined(TOPK_GROUPS) ||      \
    !defined(DTYPE)
#error "the router's KIND, NUM_EXPERTS, TOPK, NUM_GROUPS, TOPK_GROUPS and DTYPE (f32 logits) must be defined"
#endif
static_assert(HIDDEN % 8 == 0 && INTER % 8 == 0, "rows of whole 16-byte packets");
static_assert(DTYPE == SL_DTYPE_F32, "the kernel writes fp32 logits");
static constexpr int XV = HIDDEN / 8;      // 16-byte packets in a row of H
static constexpr int XP = (XV + 31) / 32;  // ... per lane
static constexpr int IV = INTER / 8;       // packets in a row of I
static constexpr int IPL = (IV + 31) / 32; // ... per lane
static_assert(XP <= 8, "x is kept in registers: H <= 2048 (the host checks it)");
static_assert(PP >= 1 && PP <= 4 && WARPS >= 4 && WARPS <= 32, "PP 1..4, WARPS 4..32");
// PROF (optional JIT constant, 0 if absent; benchmarks only): thread 0 of every block writes
// %globaltimer at SL_MOE_DECODE_PROF_STAMPS points to prof[block * 16 + i] (kernels/moe_layer.h),
// with extra block barriers before the second grid barrier and at the end.
#ifndef PROF
#define PROF 0
#endif
// XSMEM (optional JIT constant, 0 if absent): 1 = gate_up reads x as fp32 from shared memory
// (8 KB at H = 2048, laid out so each LDS.128 of a warp is conflict-free) instead of holding it in
// every warp's registers (64 fp32 registers x all warps = ~100 KB of the SM's register file), so
// more warps -- more weight bytes in flight per SM -- fit the register file.
#ifndef XSMEM
#define XSMEM 0
#endif
// ACTTAG (optional JIT constant, 0 if absent): 1 = the activations go out as 32-bit tagged words
// (the launch tag's low 16 bits << 16 | the bf16 value) and each down item polls the words of
// its rank instead of waiting at a grid barrier: a rank's down outputs start as soon as the ~17
// blocks that produce its activations are done, and the barrier's release/poll round trips
// and the separate act read after it are gone. What the barrier also guaranteed -- every block
// has read the launch counter before any block stores it back -- comes from a split grid barrier
// instead: arrive after the top-k, wait (the copy warp, off the critical path) before the store.
// Stale words: every launch writes all K x I words (ranks past nv with value 0), so a word the
// readers see was written by this launch or carries an older launch's tag; 16 bits of tag are
// enough as long as a word is not left unwritten by 65535 launches in a row, which only
// launches that timed out (an error the host sees) can do.
#ifndef ACTTAG
#define ACTTAG 0
#endif
// POLLNS (optional, ACTTAG only): __nanosleep between two polls of the words not yet seen (each
// poll re-reads them through L2 while other blocks still stream; 256 measured slower than 32).
#ifndef POLLNS
#define POLLNS 32
#endif
// DMMA (optional JIT constant, 0 if absent; needs ACTTAG): 1 = the down phase on the tensor cores
// (mma.sync m16n8k16 bf16 -> fp32), with the weights in registers before the activations come.
//  - Items (rank s, tile m of 16 output rows, part sp of SPLIT along I): a warp multiplies the 16
//    rows' slice (A, row-major 16 x 16 fragments) by the rank's activations (B). I is walked in
//    windows of 64 elements, two rounds of two MMAs each, with a permuted k: lane (g, q) reads 16
//    bytes of rows g and g + 8 at element 64 w + 16 q + 8 ((r + g) % 2) of round r. Rows of even g
//    and odd g thus read different halves, so B carries two permutations of the activations --
//    column 0 for the even rows, column 1 for the odd ones (lanes 0-7 load them; the other
//    columns are zero) -- and every LDS.128 is bank-conflict-free on the plain row-major layout
//    (rows 1536 bytes apart: g and g + 1 land on alternate 16-byte banks).
//  - The warp loads its item's A fragments (WPH windows = 16 WPH registers, 96 at I = 768 with
//    SPLIT = 2) as soon as its own gate_up share is done -- the 192 KB shared-memory read then
//    overlaps the other warps' and blocks' stream -- and only then polls the activations, stages
//    them as bf16 in its own 64 WPH-element shared row, and runs the MMAs: after the last
//    activation lands, ~24 MMAs per warp instead of a 192 KB read and ~200 FMA-side instructions
//    per lane (the H200 took ~2 us there). Session 8 loaded A after the block barrier instead (no
//    competition with the block's own stream) in a shape with PRODREM and IDSFIRST: 27.09 us
//    against 24.69 for the FMA default in the same run -- the down phase after the barrier took
//    as long as the FMA one (both read the 192 KB of rows from shared memory), removed again.
//  - Partial sums go to shared memory per part; the combine adds the parts in order, rounds to
//    bf16 (the expert output), then combines the ranks as before. Sums are fp32 in the tensor
//    cores' order: deterministic, not the FMA phase's order.
#ifndef DMMA
#define DMMA 0
#endif
// IDSFIRST (optional JIT constant, 0 if absent): 1 = the top-k warp computes only the ids
// (sl_router_token_part<SL_ROUTER_IDS>) before the block barrier that starts the stream; the
// weights -- needed only by the combine -- come from the copy warp afterwards (the same
// operations, the same bits), so the softmax denominator and the renormalization leave the path
// before the first weight load.
#ifndef IDSFIRST
#define IDSFIRST 0
#endif
// PRODREM (optional JIT constant, 0 if absent): a block's n gate_up pairs take n / WARPS full
// rounds of its compute warps plus n % WARPS pairs for some of them -- a last round in which most
// warps idle and HBM sees a fraction of the loads in flight (at Qwen3 size 46-47 pairs: 1-2 of 15
// warps run a 4th round). With PRODREM = r, those n % WARPS pairs go to the copy warp instead when
// there are at most r of them: it issues the first one's loads before the bulk copies (whose issue
// stalls for microseconds while HBM is saturated) and the others after, all long before the
// compute warps end their last full round. Its split-barrier arrive then comes first (every warp
// of the block has read the launch counter once the top-k barrier is passed), so its wait -- and
// the PDL trigger after it -- do not wait for those pairs.
#ifndef PRODREM
#define PRODREM 0
#endif
// DLATE (optional JIT constant, 0 if absent; needs ACTTAG, PRODREM and IDSFIRST; the default shape):
// the down rows are asked for LATE -- by the last compute warp to finish its gate_up pairs -- instead of
// right after the top-k, with one mbarrier per rank. The SM's requests are served about in the order
// they were issued (session 20 call 3: loads issued behind a queue wait for it), so the gate_up rows come
// first, the activations are produced and exchanged while the down rows still stream, and the tail
// after the stream is the down dot products alone: the activations' round trip (~1.5 us) leaves the
// critical path, each rank's item starting as its own rows land. H200, Qwen3-30B-A3B T=1 (session 20
// calls 8-12): 23.00-23.28 us in a graph vs 24.3-24.7 with the rows asked for after the top-k. Asked
// for by the copy warp once it sees the compute warps done: the same within noise (23.08-23.22).
#ifndef DLATE
#define DLATE 0
#endif
// DLW (optional, 0 if absent; DLATE only): at most DLW of the down-row copies in flight per block (the
// copy warp issues copy s once copy s - DLW has landed), so the last ranks' rows land after the others
// and their items run as they land instead of all at the end; 0: all at once. The default shape takes
// 6 (of 8): graph us 23.05-23.13 vs 23.08-23.09 (5), 23.26-23.33 (4), 23.28-23.43 (7, 3), 23.55-23.59
// (all at once); sessions 20 calls 7-9.
#ifndef DLW
#define DLW 0
#endif
static_assert(DLW == 0 || DLATE, "DLW: DLATE only");
static_assert(DLATE == 0 || DLATE == 1, "DLATE: 0 or 1");
#if DLATE
static_assert(ACTTAG && PRODREM && IDSFIRST && !DMMA, "DLATE: the tagged, PRODREM, IDSFIRST shape");
#endif
// CUT (optional JIT constant, 0 if absent; benchmarks only, WRONG RESULTS): phases left out, to
// measure what each costs on the critical path (`SL_BENCH_DECODE_CUT=mask sluice bench moe-local`):
//  1 = the activation polls read each word once and do not wait for this launch's tag;
//  2 = no down dot products (the polled words still feed the expert outputs);
//  4 = no logit poll and no top-k: the ids are (tag * TOPK + k) % NUM_EXPERTS (new experts
//      every launch, as the benchmark's rotated inputs give), the weights 1 / TOPK;
//  8 = no router logits either (with 4: the stream starts right after the PDL wait).
#ifndef CUT
#define CUT 0
#endif
#if DMMA
static_assert(INTER % 64 == 0, "DMMA walks I in windows of 64");
static_assert(ACTTAG, "DMMA polls tagged activations");
static constexpr int NWIN = INTER / 64;               // windows of I
static constexpr int SPLIT = (NWIN + 5) / 6;          // parts per rank: <= 6 windows (96 registers) each
static constexpr int WPH = (NWIN + SPLIT - 1) / SPLIT; // windows per part
#else
static constexpr int SPLIT = 1;
#endif
#define STAMP(i)                                                                                                       \
  do {                                                                                                                 \
    if (PROF && threadIdx.x == 0) prof[blockIdx.x * 16 + (i)] = sl_grid_globaltimer_ns();                              \
  } while (0)

__device__ __forceinline__ float bf_lo(unsigned w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf_hi(unsigned w) {
  return __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ float bf16_round(float f) {
  return __bfloat162float(__float2bfloat16_rn(f));
}
__device__ __forceinline__ float dot8(uint4 a, uint4 b, float s) {
  s = fmaf(bf_lo(a.x), bf_lo(b.x), s);
  s = fmaf(bf_hi(a.x), bf_hi(b.x), s);
  s = fmaf(bf_lo(a.y), bf_lo(b.y), s);
  s = fmaf(bf_hi(a.y), bf_hi(b.y), s);
  s = fmaf(bf_lo(a.z), bf_lo(b.z), s);
  s = fmaf(bf_hi(a.z), bf_hi(b.z), s);
  s = fmaf(bf_lo(a.w), bf_lo(b.w), s);
  return fmaf(bf_hi(a.w), bf_hi(b.w), s);
}
__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, m);
  return s;
}
// Lane's packets lane, lane + 32, ... of a row of H (zeros past the end): weights by streaming
// loads (LD 0), x by ld.global.cv (1) in the router phase and ld.global.cg (2) after it -- two
// different instructions, so the compiler cannot merge them and keep x live (64 fp32 registers)
// through the router phase, which made ptxas split the router row's loads in two (two memory
// latencies; sm_90 SASS at the 128-register cap). Both go to L2: with PDL the kernel before this
// one may write x while this grid already runs, which the read-only path (ld.global.nc) does not
// allow.
template <int LD = 0>
__device__ __forceinline__ void load_hrow(const uint4 *__restrict__ row, int lane, uint4 (&v)[XP]) {
#pragma unroll
  for (int i = 0; i < XP; i++) {
    const int p = lane + 32 * i;
    if (XV % 32 == 0 || p < XV)
      v[i] = LD == 0 ? __ldcs(row + p) : LD == 1 ? __ldcv(row + p) : __ldcg(row + p);
    else
      v[i] = make_uint4(0u, 0u, 0u, 0u);
  }
}
__device__ __forceinline__ float dot_hrow(const uint4 (&v)[XP], const uint4 (&x)[XP]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < XP; i++)
    s = dot8(v[i], x[i], s);
  return s;
}

// XSMEM: x as float4 xs[(i * 2 + h) * 32 + lane] = elements 8 (lane + 32 i) + 4 h .. + 3.
__device__ __forceinline__ float dot4(unsigned a, unsigned b, float4 x, float s) {
  s = fmaf(bf_lo(a), x.x, s);
  s = fmaf(bf_hi(a), x.y, s);
  s = fmaf(bf_lo(b), x.z, s);
  return fmaf(bf_hi(b), x.w, s);
}
__device__ __forceinline__ void dot2_hrow_smem(const uint4 (&g)[XP], const uint4 (&u)[XP], const float4 *xs, int lane,
                                               float &gs, float &us) {
  gs = 0.0f, us = 0.0f;
#pragma unroll
  for (int i = 0; i < XP; i++) {
    const float4 a = xs[(i * 2) * 32 + lane], b = xs[(i * 2 + 1) * 32 + lane];
    gs = dot4(g[i].x, g[i].y, a, gs);
    us = dot4(u[i].x, u[i].y, a, us);
    gs = dot4(g[i].z, g[i].w, b, gs);
    us = dot4(u[i].z, u[i].w, b, us);
  }
}

__device__ __forceinline__ void st_relaxed_u32(unsigned *p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_u64(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_u64(unsigned long long *p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Four 32-bit words, each a single-copy-atomic relaxed load (the vector gives no order among them).
__device__ __forceinline__ uint4 ld_relaxed_v4(const uint4 *p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// ACTTAG: whether all four words of a chunk carry tag16 in their high halves.
__device__ __forceinline__ bool tagged4(uint4 v, unsigned tag16) {
  return (v.x >> 16) == tag16 && (v.y >> 16) == tag16 && (v.z >> 16) == tag16 && (v.w >> 16) == tag16;
}
// ACTTAG: dot8 of a packet of 8 bf16 down weights with 8 activations given as fp32.
__device__ __forceinline__ float dot8f(uint4 a, const float *x, float s) {
  s = fmaf(bf_lo(a.x), x[0], s);
  s = fmaf(bf_hi(a.x), x[1], s);
  s = fmaf(bf_lo(a.y), x[2], s);
  s = fmaf(bf_hi(a.y), x[3], s);
  s = fmaf(bf_lo(a.z), x[4], s);
  s = fmaf(bf_hi(a.z), x[5], s);
  s = fmaf(bf_lo(a.w), x[6], s);
  return fmaf(bf_hi(a.w), x[7], s);
}
// The warp sums of N per-lane values (N a power of two <= 32), lane l ending with the sum of value
// l / (32 / N): at xor distance M a lane keeps half of its values and adds the partner's copies of
// them (N/2 shuffles), then M/2 on the kept half, ... -- 2N - 1 + log2(32/N) shuffles instead of
// 5N for a butterfly per value. Each sum is built by the same tree of additions as that butterfly
// (at every step a lane holds what the butterfly's lane holds for the values it kept), so the bits
// are the same.
template <int N, int M> __device__ __forceinline__ float reduce_scatter(const float (&v)[N], int lane) {
  if constexpr (N == 1) {
    float s = v[0];
#pragma unroll
    for (int m = M; m >= 1; m >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, m);
    return s;
  } else {
    static_assert(M >= 1 && N <= 2 * M, "N <= 32 values, a power of two");
    float h[N / 2];
    const bool up = lane & M;
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
      const float send = up ? v[i] : v[i + N / 2], keep = up ? v[i + N / 2] : v[i];
      h[i] = keep + __shfl_xor_sync(0xffffffffu, send, M);
    }
    return reduce_scatter<N / 2, M / 2>(h, lane);
  }
}

// The FMA down phase's item: the CPI dot products of rows [cb, cb + CPI) of rank s's down rows
// (shared memory, packets dw) with the activations a (this lane's packets, fp32), side by side so
// each row is read once; the warp sums by reduce_scatter (the butterfly's bits); the expert
// outputs rounded to bf16 into y_s. Columns past the block's are computed on a row of this rank's
// region and dropped.
template <int CPI>
__device__ __forceinline__ void down_group(const uint4 *dw, const float (&a)[IPL][8], int s, int cb, int cmax, int cmax4,
                                           int ncols, int lane, float *y_s) {
  float sum[CPI];
#pragma unroll
  for (int cc = 0; cc < CPI; cc++) {
    const int c = cb + cc < cmax ? cb + cc : cmax - 1;
    sum[cc] = 0.0f;
#pragma unroll
    for (int i = 0; i < IPL; i++) {
      const int q = lane + 32 * i;
      if (IV % 32 == 0 || q < IV) sum[cc] = dot8f(dw[((size_t)s * cmax + c) * IV + q], a[i], sum[cc]);
    }
  }
  // column cb + lane / (32 / CPI), summed over the warp by the same xor tree as a butterfly
  const float mine = reduce_scatter<CPI, 16>(sum, lane);
  const int c = lane / (32 / CPI);
  if (lane % (32 / CPI) == 0 && cb + c < ncols) y_s[s * cmax4 + cb + c] = bf16_round(mine); // expert output, bf16
}

// DMMA: D += A (16 x 16 bf16, row-major fragments a0..a3) x B (16 x 8 bf16, b0..b1), fp32.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                               unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ACTTAG: this lane's chunks of activation words (at(k): the k-th chunk of 4 words, nullptr when
// the lane has none; zeros then), polled until every word carries tag16 -- the poll is the load.
// Bounded: false (in every lane) after timeout_ns, recorded as SL_DEV_ERR_POLL_TIMEOUT (chunks
// seen, `expected` chunks in all).
template <int N, typename F>
__device__ __forceinline__ bool poll_chunks(F at, int lane, unsigned tag16, unsigned long long timeout_ns,
                                            sl_grid_barrier_state_t *state, int b, int expected, uint4 (&w)[N]) {
  unsigned need = 0; // bit k: chunk k not yet seen with this launch's tag
#pragma unroll
  for (int k = 0; k < N; k++) {
    const uint4 *p = at(k);
    w[k] = make_uint4(0u, 0u, 0u, 0u);
    if (p) {
      w[k] = ld_relaxed_v4(p);
      if (!tagged4(w[k], tag16)) need |= 1u << k;
    }
  }
  if (CUT & 1) return true; // timing only: whatever the words hold
  unsigned spins = 0;
  unsigned long long start = 0;
  while (__any_sync(0xffffffffu, need != 0)) {
    __nanosleep(POLLNS);
#pragma unroll
    for (int k = 0; k < N; k++)
      if (need >> k & 1u) {
        w[k] = ld_relaxed_v4(at(k));
        if (tagged4(w[k], tag16)) need &= ~(1u << k);
      }
    if ((++spins & 63u) == 0) {
      const unsigned long long now = sl_grid_globaltimer_ns();
      if (start == 0) {
        start = now;
      } else if (now - start > timeout_ns) {
        const unsigned missing = __reduce_add_sync(0xffffffffu, (unsigned)__popc(need));
        if (lane == 0) sl_dev_error_record(&state->error, SL_DEV_ERR_POLL_TIMEOUT, b, expected - (int)missing, expected);
        return false;
      }
    }
  }
  return true;
}

// ---- the down rows' mbarrier (kernels/bulk_copy.cuh has the wrappers) ---------------------------
// Every thread: wait for phase 0 of `bar` (the bulk copies), bounded. false on timeout.
__device__ __forceinline__ bool mbar_wait(unsigned bar, unsigned long long timeout_ns) {
  if (sl_bulk_try_wait(bar, 0)) return true;
  const unsigned long long start = sl_grid_globaltimer_ns();
  while (!sl_bulk_try_wait(bar, 0))
    if (sl_grid_globaltimer_ns() - start > timeout_ns) return false;
  return true;
}

// WARPS compute warps + 1 producer warp (index WARPS): the producer issues the bulk copies of the
// down rows, whose issue stalls while HBM is saturated (H200: up to ~8 us for 8 copies of 24 KB,
// measured with PROF) -- a compute warp doing it started its gate_up share that much later.
// The gate_up pair helpers (pairs (slot s, j) = (pq / INTER, pq % INTER)), defined in the scope of
// each branch that runs pairs: the compute warps, and with PRODREM the copy warp.
#define SL_DECODE_PAIRS \
  const long P = (long)nv * INTER; \
  auto load_pair = [&](long pq, uint4(&g)[XP], uint4(&u)[XP]) { \
    const int s = (int)(pq / INTER), j = (int)(pq % INTER); \
    const int le = id_s[slot_rank_s[s]] - expert_begin; \
    const uint4 *gr = reinterpret_cast<const uint4 *>(w_gate_up) + ((size_t)le * 2 * INTER + j) * XV; \
    load_hrow(gr, lane, g); \
    load_hrow(gr + (size_t)INTER * XV, lane, u); \
  }; \
  auto finish_pair = [&](long pq, const uint4(&g)[XP], const uint4(&u)[XP]) { \
    float gs, us; \
    if (XSMEM) { \
      dot2_hrow_smem(g, u, xs, lane, gs, us); \
    } else { \
      gs = dot_hrow(g, xr); \
      us = dot_hrow(u, xr); \
    } \
    gs = warp_sum(gs); \
    us = warp_sum(us); \
    if (lane == 0) { \
      const float gb = bf16_round(gs), ub = bf16_round(us); \
      const __nv_bfloat16 av = __float2bfloat16_rn(gb / (1.0f + expf(-gb)) * ub); \
      if (ACTTAG) \
        st_relaxed_u32(reinterpret_cast<unsigned *>(act) + pq, tag16 << 16 | (unsigned)__bfloat16_as_ushort(av)); \
      else \
        act[pq] = av; \
    } \
  };

// The end of the compute warps' gate_up pairs in a block's range [p0, p1): p1, or with PRODREM the
// start of the pairs past their last full step when there are at most PRODREM of them (those are
// the copy warp's; PRODREM above).
__device__ __forceinline__ long compute_end(long p0, long p1) {
  if constexpr (PRODREM > 0) {
    const long rem = (p1 - p0) % ((long)WARPS * PP);
    return rem <= PRODREM ? p1 - rem : p1;
  }
  return p1;
}

#define NW (WARPS + 1)
extern "C" __global__ void __launch_bounds__(NW * 32, 1)
    sl_moe_decode_layer(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w_router,
                        const float *__restrict__ bias, int renormalize, float scaling,
                        const __nv_bfloat16 *__restrict__ w_gate_up, const __nv_bfloat16 *__restrict__ w_down,
                        int expert_begin, int expert_end, const __nv_bfloat16 *__restrict__ residual,
                        __nv_bfloat16 *__restrict__ out, unsigned long long *tagged, unsigned *calls,
                        int *__restrict__ topk_ids, float *__restrict__ topk_weights, int *__restrict__ expert_counts,
                        __nv_bfloat16 *act, sl_grid_barrier_state_t *state, unsigned long long timeout_ns,
                        int absent_block, unsigned long long *prof) {
  // 128-byte aligned (the static arrays below are padded to it): the bulk copies land at whole
  // 128-byte lines. When the IDSFIRST shape's one more static array left the dynamic part 64-byte
  // aligned, its stream ran ~0.5 us longer on the H200 (session 6 calls 2-4).
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar_s;
  __shared__ __align__(8) unsigned long long rbar_s[DLATE ? TOPK : 1]; // DLATE: each rank's down rows
  __shared__ unsigned long long dlprof_s[2]; // DLATE + PROF: the block's last rows seen, last item done
  __shared__ int id_s[TOPK], slot_rank_s[TOPK], nv_s, abort_s, fail_s, dl_s;
  __shared__ __align__(16) float lg_s[NUM_EXPERTS];
  __shared__ float w_s[TOPK];
#if IDSFIRST
  __shared__ sl_router_pick_t pick_s[TOPK]; // each rank's selection, for the weights
#endif
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = (int)gridDim.x, b = (int)blockIdx.x;
  const int c0 = (int)((long)b * HIDDEN / G), c1 = (int)((long)(b + 1) * HIDDEN / G), ncols = c1 - c0;
  const int cmax = (HIDDEN + G - 1) / G;
  // shared memory: down rows [TOPK][cmax][INTER] bf16, residual [cmax4] f32, expert outputs
  // [TOPK][cmax4][SPLIT] f32 (cmax4 = cmax rounded up to 4; DMMA: per part), XSMEM: x
  // [XP * 2 * 32] float4, DMMA: each warp's activations [NW][64 WPH] bf16. kernels/moe_layer.c
  // (decode_smem) sizes it.
  const int cmax4 = (cmax + 3) & ~3;
  __nv_bfloat16 *down_s = reinterpret_cast<__nv_bfloat16 *>(smem);
  float *res_s = reinterpret_cast<float *>(down_s + (size_t)TOPK * cmax * INTER);
  float *y_s = res_s + cmax4;
  float4 *xs = reinterpret_cast<float4 *>(y_s + (size_t)TOPK * cmax4 * SPLIT);
#if DMMA
  __nv_bfloat16 *act_s = reinterpret_cast<__nv_bfloat16 *>(xs + (XSMEM ? XP * 2 * 32 : 0));
#endif
  const unsigned bar = sl_bulk_smem_addr(&bar_s);

  if (b == absent_block) return; // tests: this block never shows up; the others must time out
  STAMP(0);
  if (PROF && threadIdx.x == 0) { // stamp 8: the SM this block runs on
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    prof[blockIdx.x * 16 + 8] = smid;
  }
  if (threadIdx.x == 0) {
    fail_s = 0;
    if (DLATE) {
      dl_s = 0; // compute warps done with gate_up
      for (int r = 0; r < TOPK; r++)
        sl_bulk_mbar_init(sl_bulk_smem_addr(&rbar_s[r]), 1u);
      dlprof_s[0] = dlprof_s[1] = 0ull;
    }
    sl_bulk_mbar_init(bar, 1u);
    sl_bulk_mbar_init_fence(); // visible to the copy engine
  }
  sl_router_lane_t ls;
  if (warp == 0 || (IDSFIRST && warp == WARPS)) sl_router_lane_init(lg_s, bias, lane, ls); // the bias: a constant input
  // Programmatic dependent launch (the host's decode_pdl): this grid may start while the kernel
  // before it in the stream still runs (its blocks take each SM as the predecessor's block there
  // exits). Before the wait only constants are read -- the router row this warp dots with x, so
  // its HBM latency overlaps the predecessor's tail -- and nothing is written; everything else
  // (x, the residual, the launch counter, the barrier word, every tagged word) comes after it.
  // Without a PDL launch the wait returns at once.
  const int e0 = b + warp * G; // this warp's router row, if any
  uint4 v[XP];
  if (e0 < NUM_EXPERTS) load_hrow(reinterpret_cast<const uint4 *>(w_router) + (size_t)e0 * XV, lane, v);
  sl_moe_pdl_wait();
  STAMP(12);
  sl_grid_barrier_t gb;
  sl_grid_barrier_init(&gb, state);
  if (ACTTAG && threadIdx.x == WARPS * 32) // the copy warp arrives and waits (split barrier)
    gb.epoch = sl_grid_ld_relaxed_u32(&state->word) & SL_GRID_BARRIER_EPOCH_BIT;
  // This block's residual columns (a layer input), used at the end: read by the copy warp, which
  // has no router row, so the logit warps' first loads do not queue behind them.
  if (residual && warp == WARPS)
    for (int c = lane; c < ncols; c += 32)
      res_s[c] = __bfloat162float(residual[c0 + c]);

  // ---- router logits: expert e on warp e / G of block e % G -----------------------------
  // Each logit goes out as one 64-bit word (this launch's tag, value): whoever reads the word
  // with the current tag has the value, no fence and no grid barrier needed (the consumer's
  // poll is its load). Tag = the launch counter at the start + 1; every block stores it back
  // (the same value) once past the grid barrier (ACTTAG: the copy warp's split barrier) or when
  // it gives up after a timeout -- by then
  // every co-resident block has read the counter -- so the next launch's tag is new even when
  // some block never got that far.
  // x's loads go out before the launch counter's: the tag is needed only by the logit's store,
  // and the counter's load followed by the shuffle of its value stalls the warp, so x issued
  // after it cost a second L2/HBM round trip in a row before the first logit (sm_90 SASS of
  // session 7's default: LDG counter -> VIADD -> SHFL -> 8 LDG of x).
  const bool router_warp = e0 < NUM_EXPERTS && !(CUT & 8);
  uint4 xa[XP];
  if (router_warp) load_hrow<1>(reinterpret_cast<const uint4 *>(x), lane, xa);
  unsigned tag = 0;
  if (lane == 0) tag = sl_grid_ld_relaxed_u32(calls) + 1u;
  tag = __shfl_sync(0xffffffffu, tag, 0);
  const unsigned tag16 = tag & 0xffffu;
  if (router_warp) {
    // The first row's loads went out before x's (above the PDL wait): left to itself, ptxas may
    // hoist the unpacking of x (loop-invariant) above the loop, so the row's loads wait for x's
    // -- two memory latencies in a row (seen at 126 registers with ACTTAG).
    int e = e0;
    while (true) {
      const float s = warp_sum(dot_hrow(v, xa));
      if (lane == 0) st_relaxed_u64(tagged + e, (unsigned long long)tag << 32 | __float_as_uint(s));
      e += NW * G;
      if (e >= NUM_EXPERTS) break;
      load_hrow(reinterpret_cast<const uint4 *>(w_router) + (size_t)e * XV, lane, v);
    }
  }
  STAMP(1);
  uint4 xr[XP]; // x for gate_up (L2 by now), loaded while warp 0 computes the top-k
  if (XSMEM) {
    for (int p = threadIdx.x; p < XP * 32; p += blockDim.x) { // packet p of x -> xs, zeros past H
      const uint4 v = p < XV ? __ldcg(reinterpret_cast<const uint4 *>(x) + p) : make_uint4(0u, 0u, 0u, 0u);
      const int at = (p / 32) * 64 + p % 32;
      xs[at] = make_float4(bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y));
      xs[at + 32] = make_float4(bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w));
    }
  } else if (warp < WARPS || PRODREM) {
    load_hrow<2>(reinterpret_cast<const uint4 *>(x), lane, xr);
  }

  // ---- top-k (every block, warp 0), the local ranks in rank order --------------------------
  if (CUT & 4) {
    if (warp == 0) { // timing only: ids from the tag, weights 1 / TOPK
      const int id = (int)((tag * (unsigned)TOPK + (unsigned)lane) % (unsigned)NUM_EXPERTS);
      const bool local = lane < TOPK && id >= expert_begin && id < expert_end;
      const unsigned lm = __ballot_sync(0xffffffffu, local);
      if (lane < TOPK) {
        id_s[lane] = id;
        w_s[lane] = 1.0f / TOPK;
#if IDSFIRST
        pick_s[lane] = sl_router_pick_t{0u, 0.0f};
#endif
        if (local) slot_rank_s[__popc(lm & ((1u << lane) - 1u))] = lane;
      }
      if (lane == 0) nv_s = __popc(lm), abort_s = 0;
    }
  } else if (warp == 0) {
    // every logit of this launch (polled, bounded), into shared memory for the router routine
    bool got = false;
    unsigned spins = 0;
    unsigned long long start = 0;
    while (true) {
      bool mine = true;
#pragma unroll
      for (int i = 0; i < (NUM_EXPERTS + 31) / 32; i++) {
        const int e = lane + 32 * i;
        if (e < NUM_EXPERTS) {
          const unsigned long long w = ld_relaxed_u64(tagged + e);
          mine = mine && (unsigned)(w >> 32) == tag;
          lg_s[e] = __uint_as_float((unsigned)w);
        }
      }
      if (__all_sync(0xffffffffu, mine)) {
        got = true;
        break;
      }
      if ((++spins & 255u) == 0) {
        const unsigned long long now = sl_grid_globaltimer_ns();
        if (start == 0) {
          start = now;
        } else if (now - start > timeout_ns) {
          if (lane == 0) {
            int have = 0; // how many logits carried this launch's tag at the last poll
            for (int e = 0; e < NUM_EXPERTS; e++)
              have += (unsigned)(ld_relaxed_u64(tagged + e) >> 32) == tag;
            sl_dev_error_record(&state->error, SL_DEV_ERR_POLL_TIMEOUT, b, have, NUM_EXPERTS);
          }
          break;
        }
      }
    }
    if (lane == 0) abort_s = !got;
    __syncwarp();
    int id;
    float wt;
#if IDSFIRST
    sl_router_pick_t pick;
    sl_router_token_part<SL_ROUTER_IDS>(lg_s, 0, lane, ls, renormalize, scaling, id, wt, pick);
#else
    sl_router_token(lg_s, 0, lane, ls, renormalize, scaling, id, wt);
#endif
    const bool local = lane < TOPK && id >= expert_begin && id < expert_end;
    const unsigned lm = __ballot_sync(0xffffffffu, local);
    if (lane < TOPK) {
      id_s[lane] = id;
#if IDSFIRST
      pick_s[lane] = pick;
#else
      w_s[lane] = wt;
#endif
      if (local) slot_rank_s[__popc(lm & ((1u << lane) - 1u))] = lane; // slot -> rank
      if (b == 0) {
        topk_ids[lane] = id;
#if !IDSFIRST
        topk_weights[lane] = wt;
#endif
      }
    }
    if (lane == 0) nv_s = __popc(lm);
    STAMP(11);
  }
  __syncthreads();
  STAMP(2);
  if (abort_s) { // a logit never came (recorded): leave; the others time out at the grid barrier
    if (threadIdx.x == 0) st_relaxed_u32(calls, tag);
    return;
  }
  const int nv = nv_s;
  // DLATE: rank s's down rows into shared memory, counted on its own mbarrier; dl_copies issues the
  // first DLW of them (all with DLW 0), the copy warp the rest as earlier ones land (the down phase)
  const auto dl_copy = [&](int s) {
    const unsigned rb = sl_bulk_smem_addr(&rbar_s[DLATE ? s : 0]), bytes = (unsigned)ncols * INTER * 2u;
    if (bytes == 0) {
      sl_bulk_arrive(rb);
      return;
    }
    sl_bulk_arrive_expect_tx(rb, bytes);
    const __nv_bfloat16 *src = w_down + ((size_t)(id_s[slot_rank_s[s]] - expert_begin) * HIDDEN + c0) * INTER;
    sl_bulk_copy(sl_bulk_smem_addr(down_s + (size_t)s * cmax * INTER), src, bytes, rb);
  };
  const auto dl_copies = [&]() {
    for (int s = 0; s < (DLW > 0 ? min(nv, DLW) : nv); s++)
      dl_copy(s);
    if (PROF) prof[blockIdx.x * 16 + 7] = sl_grid_globaltimer_ns();
  };
  if (warp == WARPS) {
#if PRODREM
    SL_DECODE_PAIRS
    const long pe = (long)(b + 1) * P / G;
    long pp = compute_end((long)b * P / G, pe); // [pp, pe): this warp's pairs
    uint4 g[XP], u[XP];
    if (pp < pe) load_pair(pp, g, u); // in flight while lane 0 issues the copies
#endif
    // ---- producer: this block's down rows, by the copy engine ----------------------------
    // (DLATE: by dl_copies, once the compute warps are done)
    if (DLATE && lane == 0) sl_grid_barrier_arrive(&gb); // every warp of this block has read `calls`
    if (!DLATE && lane == 0) {
      if (ACTTAG && PRODREM) sl_grid_barrier_arrive(&gb); // every warp of this block has read `calls`
      const unsigned bytes = (unsigned)ncols * INTER * 2u;
      if (nv > 0 && bytes > 0) {
        sl_bulk_arrive_expect_tx(bar, bytes * nv);
        for (int s = 0; s < nv; s++) {
          const int le = id_s[slot_rank_s[s]] - expert_begin;
          const __nv_bfloat16 *src = w_down + ((size_t)le * HIDDEN + c0) * INTER;
          sl_bulk_copy(sl_bulk_smem_addr(down_s + (size_t)s * cmax * INTER), src, bytes, bar);
        }
      } else {
        sl_bulk_arrive(bar);
      }
      if (PROF) prof[blockIdx.x * 16 + 7] = sl_grid_globaltimer_ns();
      if (ACTTAG && !PRODREM) sl_grid_barrier_arrive(&gb); // every warp of this block has read `calls`
    }
#if PRODREM
    __syncwarp();
    if (pp < pe) finish_pair(pp++, g, u);
#endif
    if (ACTTAG) {
      // this block's share of the words of ranks nv..K-1 (value 0): every word every launch
      unsigned *aw = reinterpret_cast<unsigned *>(act) + (long)nv * INTER;
      const long R = (long)(TOPK - nv) * INTER;
      for (long i = (long)b * R / G + lane; i < (long)(b + 1) * R / G; i += 32)
        st_relaxed_u32(aw + i, tag16 << 16);
      // once every block has arrived, every block has read the launch counter: store it back
      if (lane == 0) {
        // a timeout is recorded; the act polls give up too
        if (sl_grid_barrier_wait(&gb, timeout_ns)) sl_moe_pdl_trigger(); // every block is resident (see below)
        st_relaxed_u32(calls, tag);
      }
      __syncwarp();
    }
#if PRODREM
    for (; pp < pe; pp++) {
      load_pair(pp, g, u);
      finish_pair(pp, g, u);
    }
#endif
#if IDSFIRST
    if (!(CUT & 4)) { // the weights of the top-k warp's picks
      sl_router_pick_t pick = pick_s[lane < TOPK ? lane : 0];
      int id_unused = 0;
      float wt;
      sl_router_token_part<SL_ROUTER_WEIGHTS>(lg_s, 0, lane, ls, renormalize, scaling, id_unused, wt, pick);
      if (lane < TOPK) {
        w_s[lane] = wt;
        if (b == 0) topk_weights[lane] = wt;
      }
    }
#endif
    if (b == 0) // tokens per local expert (0 or 1), as dispatch would count them
      for (int e = lane; e < expert_end - expert_begin; e += 32) {
        int n = 0;
        for (int s = 0; s < nv; s++)
          n += id_s[slot_rank_s[s]] == e + expert_begin;
        expert_counts[e] = n;
      }
  } else {
    // ---- gate_up + act: pairs (slot s, j) = (pq / INTER, pq % INTER) -------------------------
    SL_DECODE_PAIRS
    {
      // one contiguous range per block, strided over the compute warps, PP per step ([p0, p1);
      // with PRODREM, the pairs past the last full step may go to the copy warp: compute_end).
      // (The blocks' ranges end ~1.6 us apart on the H200 -- about one loaded HBM latency, the
      // drain of whichever warps issued last: handing the last eighth of the pairs out by global
      // tickets to the warps done first did not narrow it, session 4 call 8.)
      const long p0 = (long)b * P / G, p1 = compute_end(p0, (long)(b + 1) * P / G);
      for (long p = p0 + warp; p < p1; p += (long)WARPS * PP) {
        uint4 g[PP][XP], u[PP][XP];
#pragma unroll
        for (int q = 0; q < PP; q++)
          if (q == 0 || p + (long)q * WARPS < p1) load_pair(p + (long)q * WARPS, g[q], u[q]); // warp-uniform
#pragma unroll
        for (int q = 0; q < PP; q++) {
          if (q > 0 && p + (long)q * WARPS >= p1) break;
          finish_pair(p + (long)q * WARPS, g[q], u[q]);
        }
      }
      if (DLATE && lane == 0 && atomicAdd(&dl_s, 1) == WARPS - 1) dl_copies(); // the last warp done asks
    }
  }
#if DMMA
  // DMMA: the down rows are in shared memory long before this (copies issued after the top-k);
  // the warp's first item's A fragments go to registers now, before the activations are polled.
  const int mt = (cmax + 15) / 16, items = ncols > 0 ? nv * mt * SPLIT : 0;
  const auto item_of = [&](int it, int &s, int &m, int &sp) {
    s = it / (mt * SPLIT), m = (it / SPLIT) % mt, sp = it % SPLIT;
  };
  const auto load_a = [&](int it, uint4(&A)[WPH][2][2]) {
    int s, m, sp;
    item_of(it, s, m, sp);
    const int g = lane >> 2, q = lane & 3;
    const int ra = min(m * 16 + g, ncols - 1), rb = min(m * 16 + g + 8, ncols - 1); // rows past ncols: dropped
    const __nv_bfloat16 *pa = down_s + ((size_t)s * cmax + ra) * INTER, *pb = down_s + ((size_t)s * cmax + rb) * INTER;
#pragma unroll
    for (int wi = 0; wi < WPH; wi++)
#pragma unroll
      for (int rp = 0; rp < 2; rp++) {
        A[wi][rp][0] = A[wi][rp][1] = make_uint4(0u, 0u, 0u, 0u);
        if (sp * WPH + wi < NWIN) {
          const int c = 64 * (sp * WPH + wi) + 16 * q + 8 * ((rp + g) & 1);
          A[wi][rp][0] = *reinterpret_cast<const uint4 *>(pa + c);
          A[wi][rp][1] = *reinterpret_cast<const uint4 *>(pb + c);
        }
      }
  };
  const bool rows_in = mbar_wait(bar, timeout_ns);
  uint4 A[WPH][2][2];
  if (rows_in && warp < items) load_a(warp, A);
#endif
  // ACTTAG: no warp polls the activations before the block's last gate_up loads are back (a
  // poll's loads would queue with them; the H200 ran 2 us slower without this barrier).
  if (PROF || ACTTAG) __syncthreads();
  STAMP(3);
  const bool ok = ACTTAG || sl_grid_barrier_sync(&gb, timeout_ns);
  // PDL: the next grid may launch once every block of this one has triggered or exited. Only
  // after a grid-wide barrier: then every block of this cooperative grid holds its SM, so a
  // dependent block (waiting for this grid) can never take an SM one of ours still needs.
  if (!ACTTAG && ok && threadIdx.x == 0) sl_moe_pdl_trigger();
  STAMP(4);
  // the copies land in this block's shared memory: wait for them even when giving up
  if (!ACTTAG && threadIdx.x == 0) st_relaxed_u32(calls, tag); // every block has read it
#if DMMA
  if (!rows_in) {
#else
  if (!DLATE && !mbar_wait(bar, timeout_ns)) { // (DLATE: each item waits for its rank's rows)
#endif
    if (threadIdx.x == 0) sl_dev_error_record(&state->error, SL_DEV_ERR_PIPE_TIMEOUT, b, 0, 0);
    return;
  }
  if (!ok) return;
  STAMP(5);

  // ---- down for columns [c0, c1) of every local rank, then the combine ----------------------
  // Items (slot s, group of CPI columns): the warp holds act[s] in registers (read once, through
  // L2: other blocks wrote it) and runs the CPI dot products side by side over the down rows in
  // shared memory, each row read once -- that read (192 KB per block at Qwen3 size, ~0.8 us at
  // 128 B/clock) is this phase's floor. (A warp per column re-reading act from shared memory for
  // every column doubled the shared-memory traffic: ~2.5 us on the H200, PROF.)
#if DMMA
  // Items (rank s, tile m, part sp), the first one's A fragments already in registers: poll the
  // part's activations, stage them as bf16 in the warp's row of act_s, 2 x 2 WPH MMAs, partial
  // sums to shared memory (the DMMA note at the top says the layout).
  {
    constexpr int CPLW = (16 * WPH + 31) / 32; // chunks of 4 activation words per lane
    const int g = lane >> 2, q = lane & 3, n = lane >> 2;
    __nv_bfloat16 *stage = act_s + (size_t)warp * 64 * WPH;
    for (int it = warp; it < items; it += NW) {
      int s, m, sp;
      item_of(it, s, m, sp);
      if (it != warp) load_a(it, A);
      const int nwin = min(WPH, NWIN - sp * WPH);
      const uint4 *base = reinterpret_cast<const uint4 *>(act) + ((size_t)s * INTER + 64 * sp * WPH) / 4;
      uint4 w[CPLW];
      const auto at = [&](int k) -> const uint4 * {
        const int j = lane + 32 * k;
        return j < 16 * nwin ? base + j : nullptr;
      };
      if (!poll_chunks<CPLW>(at, lane, tag16, timeout_ns, state, b, 16 * nwin, w) && lane == 0) fail_s = 1;
      __syncwarp(); // the previous item's B loads are done
#pragma unroll
      for (int k = 0; k < CPLW; k++)
        if (lane + 32 * k < 16 * nwin)
          reinterpret_cast<uint2 *>(stage)[lane + 32 * k] =
              make_uint2((w[k].x & 0xffffu) | w[k].y << 16, (w[k].z & 0xffffu) | w[k].w << 16);
      __syncwarp();
      float d0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int wi = 0; wi < WPH; wi++)
#pragma unroll
        for (int rp = 0; rp < 2; rp++)
          if (wi < nwin) {
            // B column n (lanes 0-7): the elements rows of parity n read in this round
            const uint4 bb = lane < 8 ? *reinterpret_cast<const uint4 *>(stage + 64 * wi + 16 * q + 8 * ((rp + n) & 1))
                                      : make_uint4(0u, 0u, 0u, 0u);
            const uint4 &x0 = A[wi][rp][0], &x8 = A[wi][rp][1];
            mma_bf16_16816(d0, x0.x, x8.x, x0.y, x8.y, bb.x, bb.y);
            mma_bf16_16816(d1, x0.z, x8.z, x0.w, x8.w, bb.z, bb.w);
          }
      if (q == 0) { // C column (g & 1) holds row g's dot product (c0/c1), and row g + 8's (c2/c3)
        const bool odd = g & 1; // (selects, not an index: a runtime index would put d0/d1 in local memory)
        const int col = m * 16 + g;
        const float lo = odd ? d0[1] + d1[1] : d0[0] + d1[0], hi = odd ? d0[3] + d1[3] : d0[2] + d1[2];
        if (col < ncols) y_s[((size_t)s * cmax4 + col) * SPLIT + sp] = lo;
        if (col + 8 < ncols) y_s[((size_t)s * cmax4 + col + 8) * SPLIT + sp] = hi;
      }
    }
  }
#elif ACTTAG
  // Items (slot s, group of CPI = 16 columns: one item per rank at H / SMs <= 16, so each rank's
  // activations are polled once per block; 8 columns, two warps per rank, measured slower): the warp polls rank s's tagged activations (its
  // packets' 24 words per lane), then runs the CPI dot products as below (same products, same
  // order: the outputs equal the barrier version's bit for bit).
  {
    // DLW: the copy warp (no item of its own) issues copy s once copy s - DLW has landed
    if (DLW > 0 && warp == WARPS && lane == 0)
      for (int s = DLW; s < nv; s++) {
        mbar_wait(sl_bulk_smem_addr(&rbar_s[s - DLW]), timeout_ns); // (bounded; a timeout is the items')
        dl_copy(s);
      }
    constexpr int CPI = 16;
    const int groups = (ncols + CPI - 1) / CPI;
    const uint4 *aw = reinterpret_cast<const uint4 *>(act); // 4 words per uint4, 2 per packet
    const uint4 *dw = reinterpret_cast<const uint4 *>(down_s);
    for (int it = warp; it < nv * groups; it += NW) {
      const int s = it / groups, cb = (it % groups) * CPI;
      uint4 w[2 * IPL]; // chunk 2 i + h: words 8 q + 4 h .. + 3 of packet q = lane + 32 i
      const auto at = [&](int k) -> const uint4 * {
        const int q = lane + 32 * (k >> 1);
        return IV % 32 == 0 || q < IV ? aw + ((size_t)s * IV + q) * 2 + (k & 1) : nullptr;
      };
      if (!poll_chunks<2 * IPL>(at, lane, tag16, timeout_ns, state, b, 2 * IV, w) && lane == 0) fail_s = 1;
      // DLATE: this rank's rows, bounded
      const auto rows_in = [&]() {
        if (__all_sync(0xffffffffu, mbar_wait(sl_bulk_smem_addr(&rbar_s[DLATE ? s : 0]), timeout_ns))) {
          if (PROF && DLATE && lane == 0) atomicMax(&dlprof_s[0], sl_grid_globaltimer_ns());
          return true;
        }
        if (lane == 0) { // this rank's down rows never came (recorded)
          sl_dev_error_record(&state->error, SL_DEV_ERR_PIPE_TIMEOUT, b, s, 0);
          fail_s = 1;
        }
        return false;
      };
      if (DLATE && !rows_in()) continue;
      float a[IPL][8];
#pragma unroll
      for (int i = 0; i < IPL; i++) {
        const uint4 lo = w[2 * i], hi = w[2 * i + 1];
        const unsigned v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int e = 0; e < 8; e++)
          a[i][e] = __uint_as_float(v[e] << 16);
      }
      if (CUT & 2) { // timing only: no dot products
        if (lane < CPI && cb + lane < ncols) y_s[s * cmax4 + cb + lane] = a[0][0];
      } else {
        down_group<CPI>(dw, a, s, cb, cmax, cmax4, ncols, lane, y_s);
      }
      if (PROF && DLATE && lane == 0) atomicMax(&dlprof_s[1], sl_grid_globaltimer_ns());
    }
  }
#else
  {
    constexpr int CPI = 8;
    const int groups = (ncols + CPI - 1) / CPI;
    const uint4 *ag = reinterpret_cast<const uint4 *>(act);
    const uint4 *dw = reinterpret_cast<const uint4 *>(down_s);
    for (int it = warp; it < nv * groups; it += NW) {
      const int s = it / groups, cb = (it % groups) * CPI;
      float a[IPL][8];
#pragma unroll
      for (int i = 0; i < IPL; i++) {
        const int q = lane + 32 * i;
        const uint4 p = (IV % 32 == 0 || q < IV) ? __ldcg(ag + (size_t)s * IV + q) : make_uint4(0u, 0u, 0u, 0u);
        const unsigned v[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
          a[i][2 * e] = bf_lo(v[e]), a[i][2 * e + 1] = bf_hi(v[e]);
      }
      down_group<CPI>(dw, a, s, cb, cmax, cmax4, ncols, lane, y_s);
    }
  }
#endif
  STAMP(9);
  __syncthreads();
  if (DLATE && PROF && threadIdx.x == 0) { // DLATE: 5 = the block's last rows seen, 9 = its last item done
    prof[blockIdx.x * 16 + 5] = dlprof_s[0];
    prof[blockIdx.x * 16 + 9] = dlprof_s[1];
  }
  if (ACTTAG && fail_s) return; // an activation never came (recorded)
  // combine: ranks in order, fp32. The ranks' weights and expert outputs are loaded side by side
  // before the chain of FMAs (a loop over nv issued each rank's three dependent shared-memory loads
  // after the previous FMA; ~0.1-0.2 us of the default shape's tail, session 20 call 7).
  for (int c = threadIdx.x; c < ncols; c += blockDim.x) {
    float wv[TOPK], yv[TOPK];
#pragma unroll
    for (int s = 0; s < TOPK; s++) {
      wv[s] = yv[s] = 0.0f;
      if (s >= nv) continue;
      wv[s] = w_s[slot_rank_s[s]];
#if DMMA
      float y = y_s[((size_t)s * cmax4 + c) * SPLIT]; // the parts in order, then the expert output's bf16
      for (int sp = 1; sp < SPLIT; sp++)
        y += y_s[((size_t)s * cmax4 + c) * SPLIT + sp];
      yv[s] = bf16_round(y);
#else
      yv[s] = y_s[s * cmax4 + c];
#endif
    }
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < TOPK; s++)
      if (s < nv) acc = __fmaf_rn(wv[s], yv[s], acc);
    if (residual) acc = __fadd_rn(acc, res_s[c]);
    out[c0 + c] = __float2bfloat16_rn(acc);
  }
  STAMP(10);
  if (PROF) __syncthreads();
  STAMP(6);
}
