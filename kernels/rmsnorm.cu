// RMSNorm over rows of HIDDEN elements, optionally fused with a residual add (see kernels/rmsnorm.h).
#include "kernels/moe_pdl.cuh"
#include "kernels/rmsnorm.h"
#include "kernels/vec.cuh"

#ifndef HIDDEN
#error "HIDDEN (elements per row, a multiple of 8) must be defined by the JIT"
#endif
#ifndef DTYPE_IN
#error "DTYPE_IN (sl_dtype_t code of x) must be defined by the JIT"
#endif
#ifndef DTYPE_OUT
#error "DTYPE_OUT (sl_dtype_t code of y) must be defined by the JIT"
#endif
#ifndef DTYPE_W
#error "DTYPE_W (sl_dtype_t code of the weight) must be defined by the JIT"
#endif
#ifndef DTYPE_RES
#error "DTYPE_RES (sl_dtype_t code of the residual) must be defined by the JIT"
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
#ifndef RESIDUAL
#error "RESIDUAL (0: plain norm, 1: fused residual add) must be defined by the JIT"
#endif
#ifndef ELTS
#error "ELTS (most elements of a row per thread: 8, 16 or 32; sets the warps per row) must be defined by the JIT"
#endif
#ifndef WREG
#error "WREG (1: the weight slice kept in registers, loaded once per block; 0: re-read per row) must be defined by the JIT"
#endif
#ifndef RSQ
#error "RSQ (0: the row's factor 1/sqrtf(mean + eps) as the CPU reference; 1: rsqrtf) must be defined by the JIT"
#endif
#ifndef ONEROW
#error "ONEROW (1: one row per block and a block per row, no row loop; 0: grid-stride) must be defined by the JIT"
#endif

static_assert(HIDDEN % 8 == 0 && HIDDEN >= SL_RMSNORM_MIN_HIDDEN && HIDDEN <= SL_RMSNORM_MAX_HIDDEN,
              "HIDDEN must be a multiple of 8 in [64, 16384]");
static_assert(ELTS == 8 || ELTS == 16 || ELTS == 32, "ELTS must be 8, 16 or 32");

// Layout: a row belongs to ROW_WARPS consecutive warps; a block holds ROWS_PER_BLOCK rows. A
// thread owns CHUNKS chunks of VEC elements, chunk c at position c*ROW_THREADS + thread: each
// chunk is one 16-byte packet of x, so consecutive lanes read consecutive 16 bytes (coalesced).
// The whole row stays in registers as its packed words (CHUNKS*VEC <= ELTS elements), so nothing
// but one float per warp goes through shared memory, and x is read from memory exactly once.
// ELTS picks how many warps share a row (h=2048: 2, 4 or 8 warps at 32, 16 or 8 elements per
// thread): fewer elements per thread is fewer registers per row, so more warps -- and rows --
// resident per SM, at the price of a wider cross-warp reduction (see kernels/rmsnorm.c).
constexpr int VEC = sl_elem<DTYPE_IN>::per16;
constexpr int ROW_WARPS = SL_RMSNORM_ROW_WARPS_E(HIDDEN, ELTS);
static_assert(ROW_WARPS <= 32, "HIDDEN / ELTS needs more than 32 warps per row");
constexpr int ROW_THREADS = ROW_WARPS * SL_WARP_SIZE;
constexpr int ROWS_PER_BLOCK = WARPS / ROW_WARPS;
constexpr int NVEC = HIDDEN / VEC;
constexpr int CHUNKS = (NVEC + ROW_THREADS - 1) / ROW_THREADS;
static_assert(WARPS % ROW_WARPS == 0 && WARPS <= 32, "WARPS must be a multiple of the row's warps, <= 32");
using raw_x = sl_raw<DTYPE_IN, VEC>;
using raw_r = sl_raw<DTYPE_RES, VEC>;
using raw_w = sl_raw<DTYPE_W, VEC>;
constexpr int RCHUNKS = RESIDUAL ? CHUNKS : 1; // residual registers (unused by the plain norm)

// Occupancy (ncu, H200, v2 at T=8192 h=2048, one row of 2 warps per block with the weight in
// registers: 95 registers -> 20 resident warps per SM, 0.5 issued warps per scheduler, stalled on
// L1TEX): registers, not bandwidth per warp, were the limit. So __launch_bounds__ always asks for
// MIN_BLOCKS blocks per SM: as many as fit 64 warps while what a thread must hold -- its row's
// packed words, the weight's if WREG, and REG_OVERHEAD -- stays under the register cap, i.e.
// 64 resident warps at <= 32 registers, 48 at <= 40, 40 at <= 48, 32 at <= 64.
// WREG (a JIT knob, swept by --tune): the weight is the same for every row, so a thread may keep
// its slice in registers, packed, loaded before x: its latency overlaps the loads of x instead
// of following the reduction, and a block that strides over rows (or holds several) loads it
// once. The price is W_WORDS registers (8 at 16 bf16 elements per thread), i.e. fewer resident
// warps (h=2048 at 16 elements, 4 warps: 40 instead of 48). WREG 0 re-reads it per row after the
// reduction (an L1 hit: every block of the SM reads the same few KB).
constexpr int ROW_WORDS = CHUNKS * raw_x::words + (RESIDUAL ? CHUNKS * raw_r::words : 0);
constexpr int W_WORDS = CHUNKS * raw_w::words;
// Registers besides the row (addresses, indices, the loop, fp32 temporaries of one packet):
// ptxas -v over elts 8/16/32 x rows per block x plain/fused at h=2048..16384 (bf16 and fp32):
// at 32 the bounds below leave no spill but a 4-8-byte slot where v2 had one too. A weight of
// more than 2 packets needs 16 more (ptxas spilled 32-44 bytes at h=7168/16384, 32 elements,
// with 8).
constexpr int REG_OVERHEAD = 32;
constexpr int THREADS = WARPS * SL_WARP_SIZE;
// Per-thread register cap ptxas applies for `b` resident blocks: each of the SM's 4 schedulers
// has 16384 registers for its share of the warps (ceil(warps/4)), allocated per warp in units of
// 256 (so a multiple of 8 per thread). (Checked against ptxas -v: e.g. 42 warps -> 40, not 48.)
constexpr int reg_cap(int b) {
  return 16384 / (((b * WARPS + 3) / 4) * SL_WARP_SIZE) / 8 * 8 < 255
             ? 16384 / (((b * WARPS + 3) / 4) * SL_WARP_SIZE) / 8 * 8
             : 255;
}
constexpr int pick_blocks(int need) {
  int best = 1;
  for (int b = 1; b <= 32 && b * WARPS <= 64; b++)
    if (reg_cap(b) >= need) best = b;
  return best;
}
// WREG is honoured where the row and the weight fit even one block's cap (not at 1024 threads
// with 32 elements per thread: 64 registers).
constexpr int W_NEED = W_WORDS + (W_WORDS > 8 ? 16 : 0);
constexpr bool PRELOAD_W = WREG != 0 && ROW_WORDS + W_NEED + REG_OVERHEAD <= reg_cap(1);
constexpr int W_REGS = PRELOAD_W ? W_NEED : 0;
constexpr int MIN_BLOCKS = pick_blocks(ROW_WORDS + W_REGS + REG_OVERHEAD);
constexpr int REG_LIMIT = reg_cap(MIN_BLOCKS);
// Software pipelining: a block strides over row groups (resident grid) and issues the loads of
// its next row before the reduction and stores of the current one, so a warp always has a row
// of loads in flight -- also while it waits at the row's barrier and while it stores. That
// costs one more row of packed words per thread: on only where two rows fit REG_LIMIT (+8 of
// slack: ptxas spilled at exactly the cap). (On a full grid a block has one row group and the
// next row's loads are predicated off.)
constexpr bool PIPELINE = 2 * ROW_WORDS + W_REGS + REG_OVERHEAD + 8 <= REG_LIMIT;
// Rows of a block synchronise separately (a hardware barrier per row, 1..15) when the block holds
// several rows, so one slow row does not hold up the others; one row: __syncthreads.
constexpr bool NAMED_BARRIER = ROWS_PER_BLOCK > 1 && ROW_WARPS > 1 && ROWS_PER_BLOCK <= 15;

constexpr float SL_RMS_BIAS = WEIGHT_BIAS;

// r = x + r rounded to DR: on packed pairs (sl_raw_add) where x and the residual share a 16-bit dtype, else
// through fp32. (A template, so that the branch a configuration does not take is not compiled.)
template <int DI, int DR> __device__ __forceinline__ void residual_add(const sl_raw<DI, VEC> &x, sl_raw<DR, VEC> &r) {
  if constexpr (DI == DR && (DR == SL_DTYPE_BF16 || DR == SL_DTYPE_F16)) {
    sl_raw_add<DR, VEC>(x, r);
  } else {
    float a[VEC], b[VEC];
    sl_raw_to_f32<DI, VEC>(x, a);
    sl_raw_to_f32<DR, VEC>(r, b);
#pragma unroll
    for (int i = 0; i < VEC; i++)
      a[i] = a[i] + b[i];
    sl_raw_from_f32<DR, VEC>(a, r);
  }
}

__device__ __forceinline__ bool in_row(int c, int t) {
  return NVEC % ROW_THREADS == 0 || (c * ROW_THREADS + t) * VEC < HIDDEN;
}

// The packed x (and residual) of `row`, zeros where the row or the chunk does not exist.
__device__ __forceinline__ void load_row(const void *__restrict__ x, const void *__restrict__ residual, long row,
                                         int rows, int t, raw_x (&xr)[CHUNKS], raw_r (&rr)[RCHUNKS]) {
  const bool active = ONEROW || row < rows; // ONEROW: the host launches a block per row
  const long off = row * HIDDEN + t * VEC;
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    const long e = off + c * ROW_THREADS * VEC;
    if (active && in_row(c, t))
      sl_raw_load<DTYPE_IN, VEC>((const char *)x + e * sl_elem<DTYPE_IN>::bytes, xr[c]);
    else
      sl_raw_zero<DTYPE_IN, VEC>(xr[c]);
  }
#if RESIDUAL
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    const long e = off + c * ROW_THREADS * VEC;
    if (active && in_row(c, t))
      sl_raw_load<DTYPE_RES, VEC>((const char *)residual + e * sl_elem<DTYPE_RES>::bytes, rr[c]);
    else
      sl_raw_zero<DTYPE_RES, VEC>(rr[c]);
  }
#else
  (void)residual;
  (void)rr;
#endif
}

// The thread's packed weight slice (WREG; zeros where the chunk does not exist), or nothing.
__device__ __forceinline__ void load_weight(const void *__restrict__ weight, int t,
                                            raw_w (&wpre)[PRELOAD_W ? CHUNKS : 1]) {
#pragma unroll
  for (int c = 0; c < (PRELOAD_W ? CHUNKS : 1); c++) {
    if (PRELOAD_W && in_row(c, t))
      sl_raw_load<DTYPE_W, VEC>((const char *)weight + (long)(c * ROW_THREADS + t) * VEC * sl_elem<DTYPE_W>::bytes,
                                wpre[c]);
    else
      sl_raw_zero<DTYPE_W, VEC>(wpre[c]);
  }
}

// Sum over the row's warps: a butterfly per warp, then one float per warp through `partial`
// (alternate the two halves on consecutive calls: the barrier of call i+1 separates the reads
// of call i from the writes of call i+2, so one barrier per row suffices).
__device__ __forceinline__ float row_sum(float v, float *partial, int slot) {
  v = sl_butterfly_sum<5>(v);
  if constexpr (ROW_WARPS == 1) {
    return v;
  } else {
    const int warp = threadIdx.x / SL_WARP_SIZE;
    if ((threadIdx.x & (SL_WARP_SIZE - 1)) == 0) partial[warp] = v;
    if constexpr (NAMED_BARRIER)
      sl_named_barrier(1 + slot, ROW_THREADS);
    else
      __syncthreads();
    float s = partial[slot * ROW_WARPS]; // not 0 + ...: one dependent add less
#pragma unroll
    for (int i = 1; i < ROW_WARPS; i++)
      s += partial[slot * ROW_WARPS + i];
    return s;
  }
}

// Normalise the row held in xr/rr and store it (and the updated residual).
__device__ __forceinline__ void norm_row(void *__restrict__ y, void *__restrict__ residual,
                                         const void *__restrict__ weight, const raw_w (&wpre)[PRELOAD_W ? CHUNKS : 1],
                                         long row, int rows, int t, int slot, float *partial, raw_x (&xr)[CHUNKS],
                                         raw_r (&rr)[RCHUNKS]) {
  const bool active = ONEROW || row < rows; // ONEROW: the host launches a block per row
  float ss = 0.0f;
#if RESIDUAL
  // residual = x + residual, rounded to its dtype (packing rounds to nearest even); the norm is
  // of the stored value, which rr then holds. x and the residual of one 16-bit dtype add as packed
  // pairs (sl_raw_add: the same bits as the fp32 sum rounded), one instruction per two elements
  // instead of two unpacks, an add and half a pack each. A decode row is issue-bound (ncu,
  // session 30, h=7168 at 32 elements per thread: the Triton row kernel, whose compiler adds the
  // pairs packed too, issued 330 instructions per warp where ours issued 474); with this and the
  // zero bias not added the kernel's PTX went from 319 to 239 instructions.
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    residual_add<DTYPE_IN, DTYPE_RES>(xr[c], rr[c]);
    if (active && in_row(c, t))
      sl_raw_store<DTYPE_RES, VEC>(
          (char *)residual + (row * HIDDEN + (c * ROW_THREADS + t) * VEC) * sl_elem<DTYPE_RES>::bytes, rr[c]);
  }
#define SL_CUR_DT DTYPE_RES
#define SL_CUR rr
#else
  (void)residual;
#define SL_CUR_DT DTYPE_IN
#define SL_CUR xr
#endif
  // Four interleaved partial sums: a thread's 8-32 squares are four short FFMA chains, not one
  // long one (each FFMA waits for the last: 16 elements were 16 x 4 cycles before the shuffles).
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    float v[VEC];
    sl_raw_to_f32<SL_CUR_DT, VEC>(SL_CUR[c], v);
#pragma unroll
    for (int i = 0; i < VEC; i++)
      part[(c * VEC + i) & 3] += v[i] * v[i];
  }
  ss = (part[0] + part[1]) + (part[2] + part[3]);
  ss = row_sum(ss, partial, slot);
  // The row's factor. RSQ 0: IEEE sqrt and division of the mean, as the CPU reference; in SASS
  // (sm_90) an RSQ, a Newton step, a range check and an RCP with its own check and step, each
  // branching to a slow path: ~80 dependent cycles once per row, nothing next to a prefill
  // row's memory time but a visible part of a decode row's (a Triton row kernel uses rsqrt).
  // RSQ 1: rsqrt of mean * (1/HIDDEN): one MUFU.RSQ (<= 2 fp32 ulp) and one multiply for the
  // mean (<= 1 ulp): the factor within ~3 fp32 ulp of the reference's, far below a 16-bit
  // output's ulp (the tests' tolerance: 2 ulp of the output dtype, fp32 1e-5 relative).
#if RSQ
  // .ftz: the argument is >= EPS > 0, a normal number (rsqrtf would add a denormal check).
  float inv;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(inv) : "f"(ss * (1.0f / (float)HIDDEN) + EPS));
#else
  const float inv = 1.0f / sqrtf(ss / (float)HIDDEN + EPS);
#endif
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    const int e = (c * ROW_THREADS + t) * VEC;
    if (active && in_row(c, t)) {
      float v[VEC], w[VEC], out[VEC];
      sl_raw_to_f32<SL_CUR_DT, VEC>(SL_CUR[c], v);
      if constexpr (PRELOAD_W) {
        // Unpacked here, per row: the empty asm makes the packed words opaque, so the compiler
        // cannot hoist their unpacking and the bias add out of the row loop -- hoisted, they sat
        // between the weight's loads and x's, and every block waited for the weight before it
        // asked for x: two memory round trips in a row (SASS, sm_90) instead of one.
        raw_w wc = wpre[c];
#pragma unroll
        for (int i = 0; i < raw_w::words; i++)
          asm volatile("" : "+r"(wc.w[i]));
        sl_raw_to_f32<DTYPE_W, VEC>(wc, w);
      } else {
        sl_load_vec<DTYPE_W, VEC>((const char *)weight + (long)e * sl_elem<DTYPE_W>::bytes, w);
      }
#pragma unroll
      for (int i = 0; i < VEC; i++) // a bias of 0 is not added (as kernels/qknorm.cu): only a zero's sign differs
        out[i] = (v[i] * inv) * (SL_RMS_BIAS != 0.0f ? SL_RMS_BIAS + w[i] : w[i]);
      sl_store_vec<DTYPE_OUT, VEC>((char *)y + (row * HIDDEN + e) * sl_elem<DTYPE_OUT>::bytes, out);
    }
  }
#undef SL_CUR_DT
#undef SL_CUR
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sl_rmsnorm_fwd(const void *__restrict__ x, void *__restrict__ y, void *__restrict__ residual,
                   const void *__restrict__ weight, int rows) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  __shared__ float partial[2][WARPS];
  // Row within the block and thread within the row. One row per block of a width that is not a
  // power of two (h=7168: 7 warps): constants, not threadIdx.x / ROW_THREADS -- a multiply-high
  // the compiler cannot fold (it does not know the block is ROW_THREADS wide), whose result
  // ptxas kept live across the row and spilled at the 56-register cap (2 STL + 2 LDL per thread
  // and row; H200 ncu: 229,376 spill requests at T=8192 h=7168). A power of two is a shift:
  // left as it was (constants there moved ptxas from 32 to 40 registers at h=2048, 8 elements,
  // fused). Found by the `spill` helper; its register-estimate changes for other shapes were
  // not taken (they move measured table picks' occupancy; re-measure first).
  constexpr bool ONE_ROW_CONST = ROWS_PER_BLOCK == 1 && (ROW_THREADS & (ROW_THREADS - 1)) != 0;
  const int slot = ONE_ROW_CONST ? 0 : threadIdx.x / ROW_THREADS;
  const int t = ONE_ROW_CONST ? (int)threadIdx.x : threadIdx.x - slot * ROW_THREADS;
  raw_w wpre[PRELOAD_W ? CHUNKS : 1];
  // One row, one block (ONEROW: the host launches exactly `rows` blocks of one row -- decode,
  // and full grids of one row per block): the row is blockIdx.x, x's loads go out first -- their
  // address is the longer computation -- then the weight's, and nothing else. The strided path
  // below computes 64-bit row bases in a loop and re-reads `rows` before its first x load (~20
  // instructions between the weight's loads and x's in the sm_90 SASS): at decode a row's
  // latency is the kernel's (H200 graph, T=1 h=2048: 1.40 -> 1.27 us; s12 calls 1-2). No row
  // check either: `active` is constant true, so ptxas cannot sink the weight's loads into a
  // branch below the row's barrier (it did, with the check: one more round trip).
  if constexpr (ONEROW) {
    static_assert(!ONEROW || ROWS_PER_BLOCK == 1, "ONEROW: one row per block");
    raw_x xr[CHUNKS];
    raw_r rr[RCHUNKS];
    load_row(x, residual, blockIdx.x, rows, t, xr, rr);
    load_weight(weight, t, wpre);
    norm_row(y, residual, weight, wpre, blockIdx.x, rows, t, slot, partial[0], xr, rr);
    return;
  }
  int parity = 0;
  load_weight(weight, t, wpre);
  // Grid-stride over groups of rows: the bound depends only on blockIdx, so every thread of a
  // block runs the same iterations and reaches the same barriers.
  const long stride = (long)gridDim.x * ROWS_PER_BLOCK;
  long base = (long)blockIdx.x * ROWS_PER_BLOCK;
  raw_x xr[CHUNKS];
  raw_r rr[RCHUNKS];
  if constexpr (PIPELINE) load_row(x, residual, base + slot, rows, t, xr, rr);
  for (; base < rows; base += stride) {
    const long row = base + slot;
    if constexpr (PIPELINE) {
      raw_x xn[CHUNKS];
      raw_r rn[RCHUNKS];
      load_row(x, residual, row + stride, rows, t, xn, rn); // the next row's loads go out first
      norm_row(y, residual, weight, wpre, row, rows, t, slot, partial[parity], xr, rr);
#pragma unroll
      for (int c = 0; c < CHUNKS; c++)
        xr[c] = xn[c];
#pragma unroll
      for (int c = 0; c < RCHUNKS; c++)
        rr[c] = rn[c];
    } else {
      load_row(x, residual, row, rows, t, xr, rr);
      norm_row(y, residual, weight, wpre, row, rows, t, slot, partial[parity], xr, rr);
    }
    parity ^= 1;
  }
}
