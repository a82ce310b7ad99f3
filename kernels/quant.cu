// Block-scaled quantize / dequantize kernels (FP8 group-128, MXFP8, MXFP4, NVFP4); the host
// side and the CPU reference are kernels/quant.c, the format rules kernels/quant_formats.h.
#include "kernels/kq_launch.h"
#include "kernels/moe_pdl.cuh"
#include "kernels/quant_dev.cuh"

#ifndef QFMT
#error "QFMT (SL_QFMT_*) must be defined by the JIT"
#endif
#ifndef QRULE
#error "QRULE (SL_QRULE_*) must be defined by the JIT"
#endif
#ifndef QLAYOUT
#error "QLAYOUT (SL_QLAYOUT_*) must be defined by the JIT"
#endif
#ifndef HIDDEN
#error "HIDDEN (elements per row) must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (SL_DTYPE_* of the wide side: quant input, dequant output) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif
#ifndef UNROLL
#error "UNROLL (work items in flight per warp) must be defined by the JIT"
#endif
#ifndef SEG
#error "SEG (0: grid-stride warp items; N > 0: a warp walks N chunks of one row) must be defined by the JIT"
#endif
#ifndef SWZ_STAGE
#error "SWZ_STAGE (1: swizzled scales staged in shared memory, whole-sector stores; 0: off) must be defined by the JIT"
#endif
#ifndef QPAIR
#error "QPAIR (FP4 quantizer lane: 1 a whole block, 2 half an MXFP4 block, 0 one packet) must be defined by the JIT"
#endif

#ifndef QLINE
#define QLINE 0 // 1: the FP8 IEEE group quantizer's straight-line hot path (quant_packet; kq_launch.h q8_line_rows)
#endif
#define BLOCK_ELEMS (QFMT == SL_QFMT_FP8_GROUP ? 128 : QFMT == SL_QFMT_NVFP4 ? 16 : 32)
#define IS_FP4 (QFMT == SL_QFMT_MXFP4 || QFMT == SL_QFMT_NVFP4)
static constexpr int VEC = sl_kq_elem<DTYPE>::vec; // elements per thread per item
static constexpr int CHUNK = 32 * VEC;             // elements per warp item
static constexpr int CHUNKS = (HIDDEN + CHUNK - 1) / CHUNK;
static constexpr int LANES = BLOCK_ELEMS / VEC;   // lanes sharing one scale block
static constexpr int COLS = HIDDEN / BLOCK_ELEMS; // scale blocks per row
static_assert(HIDDEN % BLOCK_ELEMS == 0, "HIDDEN must be a multiple of the block size");
static_assert(BLOCK_ELEMS % VEC == 0, "a thread's packet never straddles two blocks");
static_assert(QFMT != SL_QFMT_FP8_GROUP || QLAYOUT == SL_QLAYOUT_LINEAR, "fp32 scales are linear");

// Blocks per SM the kernels are compiled for (__launch_bounds__). Prefill: 2048 threads per
// SM on Hopper and Blackwell, so 32 registers per thread and every resident warp adds loads in
// flight. The other formats keep IEEE-division slow paths (FP8 IEEE and NVFP4 scales, tiny
// absmax) whose call sequence spills at 32 (ptxas -v), so they get 40 registers (3/4 of the
// warps: still 48 KB of loads in flight per SM and 12 warps per scheduler); MXFP8 fits 32.
// Decode (1 warp per block): no bound, occupancy is irrelevant there.
// The NVFP4 quantizer with a whole block per lane (QPAIR) and staged swizzled scales fits 32 too
// (ptxas -v: no spill at h=2048/4096/7168, sm_90 and sm_100; its scale stores go through shared
// memory) and takes the full 2048 threads: MEASURED on the H200 (session 15 call 3, `SL_KQ_TUNE=mb
// sluice bench kernels --only quant_`, rows "mb8", kernel us, 8 / 6 blocks per SM): T=32768
// h=2048 41.92 / 43.55, h=4096 81.73 / 85.18; T=8192 12.83 / 12.93, 22.59 / 23.01 (with the
// launcher's 2-wave full-grid point, which it keeps). At 32 registers the linear layout spills
// (14 bytes) and the FP8 group, MXFP4 and FP8-out activation kernels spill on their hot path and
// measured 2-25 % slower ("mb8" rows of the same call): those keep 40.
#ifndef MIN_BLOCKS
#define SL_QUANT_FULL_OCC (QFMT == SL_QFMT_MXFP8 || (QFMT == SL_QFMT_NVFP4 && QPAIR && SWZ_STAGE))
#define MIN_BLOCKS (WARPS == 1 ? 1 : 2048 / (WARPS * 32) * (SL_QUANT_FULL_OCC ? 4 : 3) / 4)
#endif
// Dequantizer blocks per SM: MIN_BLOCKS (6 of 8 warps: 40 registers) for every variant. The FP4
// table dequantizer (16-bit outputs in the segment layout, DEQ_TABLE) fits 32 registers on sm_90
// and ran at 8 blocks from session 13 (more CTAs covering each one's table fill and barrier) until
// session 16 found the fill slow for another reason (one thread's reference decodes of the NaN
// scale byte, see nan_entry): with that gone, 6 blocks measured ahead (call 7, the bench's then
// "mb6" rows, kernel us, swz T=32768 h=2048/4096/7168 43.90-44.16/86.30-86.33/149.12-150.18 vs
// 44.29-44.61/86.94-87.07/150.69-150.98 at 8; T=8192 h=4096/7168 22.82-22.85/38.91-38.95 vs
// 23.20-23.23/39.14-39.39; h=2048 a tie). DEQ_MIN_BLOCKS in the spec overrides it (kq_launch.h
// sl_kq_set_deq_blocks_override: the benchmark's "mb8" comparison rows).
#ifndef DEQ_MIN_BLOCKS
#define DEQ_MIN_BLOCKS MIN_BLOCKS
#endif
static constexpr bool RAGGED = HIDDEN % CHUNK != 0; // the last chunk of a row has idle lanes
static_assert(!QLINE || (QFMT == SL_QFMT_FP8_GROUP && QRULE == SL_QRULE_IEEE && DTYPE != SL_DTYPE_F32 && SEG == 0 &&
                         !RAGGED && SL_KQ_HW_E4M3),
              "QLINE: the FP8 IEEE group quantizer of 16-bit inputs in the item layout, whole chunks, hardware E4M3");

// Segment layout (SEG > 0): a warp task is SEGC consecutive chunks of one row (the row's last
// segment may be shorter), walked UNROLL chunks at a time with running pointers. Per chunk the
// input moves CHUNK elements, the codes CODE_STEP bytes and the lane's scale SCALE_STEP bytes:
// CHUNK / BLOCK_ELEMS scale columns, and in the swizzled layout that is a whole number of
// 4-column tiles (512 bytes each: the offset's other terms do not change with the column tile).
static constexpr int SEGC = SEG <= 0 ? 1 : SEG < CHUNKS ? SEG : CHUNKS;
static constexpr int NSEG = (CHUNKS + SEGC - 1) / SEGC; // segments per row
static constexpr int CODE_STEP = IS_FP4 ? CHUNK / 2 : CHUNK;
static_assert(CHUNK % BLOCK_ELEMS == 0, "a chunk holds whole scale blocks");
static_assert(QLAYOUT != SL_QLAYOUT_SWIZZLED || (CHUNK / BLOCK_ELEMS) % 4 == 0, "a chunk holds whole column tiles");
static constexpr int SCALE_STEP = QFMT == SL_QFMT_FP8_GROUP         ? 4 * (CHUNK / BLOCK_ELEMS)
                                  : QLAYOUT == SL_QLAYOUT_SWIZZLED ? (CHUNK / BLOCK_ELEMS / 4) * 512
                                                                    : CHUNK / BLOCK_ELEMS;

// Staged swizzled scales (SWZ_STAGE == 1, kernels/NOTES.md "Staged swizzled scales"): one
// 32-byte sector of the swizzled layout holds rows {2k, 2k+1} x the four 32-row groups of a tile
// row x the 4 columns of one column tile. A CTA's 8 warps take exactly those 8 rows (warp w:
// row 2k + (w & 1) + 32 * (w >> 1) of the tile row) and the same segment, write their scale
// bytes into a shared stage (one 32-byte sector image per column tile of the segment, the warp's
// 4 bytes at (w & 1) * 16 + (w >> 1) * 4, as in global memory), and after a block barrier the
// CTA stores the images as 16-byte halves of whole sectors: no partial-sector scale writes.
// Those stores cover every scale byte of the tensor (rows up to a multiple of 128, column tiles
// up to the padding), so the padding is written here as zeros (zero_swizzle_padding does not
// run): warps of rows >= num_tokens load and store no codes and zero their stage slots; the
// column padding of the last tile (COLS % 4 != 0) is zeroed by each data row's lane 0.
static_assert(!SWZ_STAGE || (QLAYOUT == SL_QLAYOUT_SWIZZLED && QFMT != SL_QFMT_FP8_GROUP && SEG > 0 &&
                             WARPS == SL_KQ_SWZ_STAGE_WARPS),
              "SWZ_STAGE: swizzled byte scales, the segment layout and 8 warps (the rows of one sector)");

// QPAIR (the NVFP4 quantizer of 16-bit inputs in the segment layout): a lane takes a whole
// 16-element block -- two 16-byte packets, 32 bytes apart per lane -- instead of half of one, so
// the block's work (absmax, the shuffle, the E4M3 scale and the IEEE quotient gs / d, ~35
// instructions) runs once per block instead of once per lane of a pair, and every lane stores 8
// code bytes and its own scale byte. A step walks two chunks (512 elements: 32 blocks, one per
// lane). The loads go through L1: the second packet's instruction hits the lines the first one
// brought, so L2 and DRAM traffic are unchanged. Whole chunk pairs only (the host grants it where
// rows are whole, even numbers of chunks per task and of tasks per row).
// The MXFP4 quantizer's lane does the same with its 32-element block: four packets (64 bytes per
// lane), a step of four chunks, 16 code bytes and one scale byte per lane -- the block's absmax
// reduction (two shuffle rounds), its exponent and its scale store once per block instead of once
// per lane of four. PPL = packets per lane; "pair" below names both.
// QPAIR 2 (MXFP4 only): a lane takes two packets -- half a block, 16 elements, NVFP4's whole-block
// lane's loads and 8-byte code stores -- and its partner lane (lane ^ 1) the other half: one shuffle
// of the packed absmax word per block instead of two, the exponent on two lanes instead of four,
// the even lane stores the scale byte. LPB = lanes per block (1, or 2 for QPAIR 2).
static constexpr bool PAIR = QPAIR != 0;
static constexpr int PPL = QPAIR == 2 ? 2 : BLOCK_ELEMS / VEC; // packets per lane (16-bit: NVFP4 2, MXFP4 4 or 2)
static constexpr int LPB = BLOCK_ELEMS / (VEC * PPL);
static_assert(QPAIR >= 0 && QPAIR <= 2 && (QPAIR != 2 || (QFMT == SL_QFMT_MXFP4 && LPB == 2)),
              "QPAIR: 0, 1, or 2 (MXFP4 with 16-bit inputs: two lanes per block)");
static_assert(!PAIR || (IS_FP4 && DTYPE != SL_DTYPE_F32 && SEG > 0 && !RAGGED && CHUNKS % SEGC == 0 &&
                        SEGC % (UNROLL >= PPL ? UNROLL : PPL) == 0),
              "QPAIR: FP4, 16-bit inputs, the segment layout, whole rows of whole chunk groups (PPL chunks) per task");

// Byte-scale offset of (row, block column g): sl_qf_scale_offset with unsigned shifts (row and
// g are never negative here) and the tile-row product the only 64-bit term.
__device__ __forceinline__ size_t scale_offset(unsigned row, unsigned g) {
  if constexpr (QLAYOUT == SL_QLAYOUT_SWIZZLED) {
    constexpr unsigned col_tiles = (COLS + 3) / 4;
    return (size_t)(row >> 7) * (col_tiles * 512u) +
           (((g >> 2) << 9) | ((row & 31u) << 4) | (((row >> 5) & 3u) << 2) | (g & 3u));
  } else {
    return (size_t)row * COLS + g;
  }
}

// Swizzled layout: zero the padding (rows up to a multiple of 128, blocks up to 4), which the
// GEMM reads. Only the last 128-row tile row has padding rows: each 16-byte line of it holds
// rows i, i+32, i+64, i+96 (4 scale bytes each) of one 4-column tile, so a line whose first
// row is padding is one 16-byte store and the others get 4-byte stores for their padding rows
// (the data rows are the quantizer's). Column padding (COLS % 4 != 0) is byte-wise.
// 32-bit index math only (rows < 2^31 / 128). Scales are 16-byte aligned (host check).
__device__ __forceinline__ void zero_swizzle_padding(unsigned char *scales, int num_tokens) {
  if constexpr (QLAYOUT == SL_QLAYOUT_SWIZZLED) {
    constexpr int col_tiles = (COLS + 3) / 4, cols_pad = col_tiles * 4;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int rem = num_tokens & 127, rt = num_tokens >> 7;
    if (rem) {
      for (int l = tid; l < col_tiles * 32; l += nthreads) {
        const int ct = l >> 5, i = l & 31;
        unsigned char *line = scales + (((size_t)rt * col_tiles + ct) << 9) + (i << 4);
        if (i >= rem) {
          *reinterpret_cast<uint4 *>(line) = make_uint4(0u, 0u, 0u, 0u);
        } else {
#pragma unroll
          for (int j = 1; j < 4; j++)
            if (i + 32 * j >= rem) reinterpret_cast<unsigned *>(line)[j] = 0u;
        }
      }
    }
    if constexpr (cols_pad != COLS) {
      constexpr int pad = cols_pad != COLS ? cols_pad - COLS : 1;
      for (int i = tid; i < num_tokens * pad; i += nthreads)
        scales[sl_qf_swizzled_offset(i / pad, COLS + i % pad, COLS)] = 0;
    }
  }
}

// Quantize one lane's packet (live: its columns are inside the row; all 32 lanes must call this
// together, for the block reduction) and store its codes at cdst and, on the block's first lane,
// the block scale at sdst (fp32 for FP8 group, else one byte).
__device__ __forceinline__ void quant_packet(uint4 raw, bool live, int lane, unsigned char *cdst, unsigned char *sdst,
                                             float global_scale) {
  float v[VEC];
  sl_kq_unpack<DTYPE>(raw, v);
  float absmax;
  int bad;
  if constexpr (DTYPE == SL_DTYPE_F32)
    sl_kq_block_absmax<VEC, LANES>(v, absmax, bad); // all lanes: tail lanes hold zeros
  else
    sl_kq_block_absmax16<DTYPE, LANES>(raw, absmax, bad);
  if (RAGGED && !live) return;
  unsigned char scale_u8;
  float scale_f32;
  if constexpr (QLINE) {
    // Straight-line (decode launches, kq_launch.h q8_line_rows: a few warps with one item each, so the chain from
    // the load to the stores is the kernel's time). Every lane takes the fast branch of sl_kq_quantize_fast -- from
    // a stand-in absmax where its block is non-finite or tiny -- and such blocks, rare, are redone by the exact path
    // behind a warp-uniform vote; the scale goes out by a predicated store. Without the branches' reconvergence
    // points on the chain: -0.01..-0.05 us at T <= 16 (the table's measurements). The whole warp is here (no
    // RAGGED). The store's generic pointer is converted to the global window (cvta: no instruction on sm_90).
    const bool slow = bad || !(absmax >= SL_QF_DIV448_MIN);
    scale_f32 = sl_qf_div448_fast(slow ? 1.0f : absmax);
    unsigned long long w = sl_kq_fp8_ieee_codes16(v, scale_f32);
    if (__any_sync(0xffffffffu, slow))
      if (slow)
        w = sl_kq_quantize_fast<QFMT, QRULE, VEC, DTYPE, true>(v, absmax, bad, global_scale, scale_f32, scale_u8, raw);
    sl_kq_store_packed<VEC, IS_FP4>(cdst, w);
    asm volatile("{\n\t.reg .pred p;\n\t.reg .u64 a;\n\tsetp.eq.u32 p, %0, 0;\n\tcvta.to.global.u64 a, %1;\n\t"
                 "@p st.global.f32 [a], %2;\n\t}" ::"r"((unsigned)lane % LANES),
                 "l"(sdst), "f"(scale_f32)
                 : "memory");
    return;
  }
  const unsigned long long w =
      sl_kq_quantize_fast<QFMT, QRULE, VEC, DTYPE, true>(v, absmax, bad, global_scale, scale_f32, scale_u8, raw);
  sl_kq_store_packed<VEC, IS_FP4>(cdst, w);
  if (lane % LANES == 0) {
    if constexpr (QFMT == SL_QFMT_FP8_GROUP)
      *reinterpret_cast<float *>(sdst) = scale_f32;
    else
      *sdst = scale_u8;
  }
}

// Byte address of the scale of (row, block column g).
__device__ __forceinline__ unsigned char *scale_ptr(void *scales, unsigned row, unsigned g) {
  if constexpr (QFMT == SL_QFMT_FP8_GROUP)
    return reinterpret_cast<unsigned char *>(reinterpret_cast<float *>(scales) + (size_t)row * COLS + g);
  else
    return reinterpret_cast<unsigned char *>(scales) + scale_offset(row, g);
}

// One warp task of the segment layout: chunks c0.. of `row` (SEGC, or fewer in the row's last
// segment) walked UNROLL at a time with running pointers. The lane's scale pointer starts at its
// byte of chunk c0: in global memory (scale_ptr; SCALE_STEP bytes per chunk) or, STAGED, at
// stage_ofs in the CTA's stage image `scales` (SSTEP bytes per chunk).
template <bool STAGED, int SSTEP>
__device__ __forceinline__ void quant_task(const void *__restrict__ in, long in_stride,
                                           unsigned char *__restrict__ codes, void *scales, unsigned stage_ofs,
                                           unsigned row, unsigned c0, int lane, float global_scale) {
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  // chunks in this task: SEGC, or fewer in the row's last segment (compile-time when even)
  const unsigned nc = CHUNKS % SEGC == 0 ? SEGC : min((unsigned)SEGC, CHUNKS - c0);
  unsigned col = c0 * CHUNK + lane * VEC;
  const char *ip = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ebytes;
  unsigned char *cp = codes + (IS_FP4 ? (size_t)row * (HIDDEN / 2) + col / 2 : (size_t)row * HIDDEN + col);
  unsigned char *sp =
      STAGED ? reinterpret_cast<unsigned char *>(scales) + stage_ofs : scale_ptr(scales, row, col / BLOCK_ELEMS);
  for (unsigned c = 0; c < nc; c += UNROLL) {
    uint4 raw[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      raw[u] = make_uint4(0u, 0u, 0u, 0u);
      const bool in_task = (CHUNKS % SEGC == 0 && SEGC % UNROLL == 0) || c + u < nc;
      if (in_task && (!RAGGED || col + u * CHUNK < HIDDEN)) raw[u] = sl_kq_load_raw(ip + u * CHUNK * ebytes);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      if (!((CHUNKS % SEGC == 0 && SEGC % UNROLL == 0) || c + u < nc)) break; // warp-uniform
      quant_packet(raw[u], !RAGGED || col + u * CHUNK < HIDDEN, lane, cp + u * CODE_STEP,
                   sp + u * (STAGED ? SSTEP : SCALE_STEP), global_scale);
    }
    ip += UNROLL * CHUNK * ebytes;
    cp += UNROLL * CODE_STEP;
    sp += UNROLL * (STAGED ? SSTEP : SCALE_STEP);
    col += UNROLL * CHUNK;
  }
}

// The MXFP4 block exponent of the whole-block lane: sl_qf_block_exp_fast's CEIL formula, and the
// FLOOR rule's exponent read, inline for a normal absmax >= 2^-100 (where neither clamps); the
// reference out of line below that (tiny blocks: a division and a subnormal log2), so the hot
// path holds no call and its 16 input registers do not spill at the 40-register bound.
__device__ __noinline__ int mx_block_exp_tiny(float absmax) {
  return sl_qf_block_exp(absmax, QRULE, SL_E2M1_MAX, SL_E2M1_EMAX);
}
__device__ __forceinline__ int mx_block_exp(float absmax) {
  const unsigned a = __float_as_uint(absmax), m = __float_as_uint(SL_E2M1_MAX);
  if (a < 0x0d800000u) return mx_block_exp_tiny(absmax); // [0, 2^-100)
  if constexpr (QRULE == SL_QRULE_CEIL)
    return (int)(a >> 23) - (int)(m >> 23) + ((a & 0x7fffffu) > (m & 0x7fffffu));
  else
    return (int)(a >> 23) - 127 - SL_E2M1_EMAX;
}

// QPAIR: quantize the lane's whole block (packets p[0..PPL): its BLOCK_ELEMS elements) and store
// its codes (4 PPL bytes) at cdst and its scale byte at sdst; the same rules as quant_packet
// (sl_kq_quantize_fast: sl_kq_nvfp4_scale / sl_qf_block_exp_fast, the same element encoders), so
// the same bits. LPB 2: the lane's half of a block, the absmax of both halves by one shuffle (the
// whole warp calls this together), the scale byte stored by the even lane.
// (A template, so that kernels of other dtypes, which never call it, do not instantiate it.)
template <int DT>
__device__ __forceinline__ void quant_block_lane(const uint4 *p, unsigned char *cdst, unsigned char *sdst,
                                                 float global_scale, int lane) {
  float absmax;
  int bad;
  if constexpr (PPL == 2 && LPB == 1) {
    sl_kq_block_absmax16x2<DT>(p[0], p[1], absmax, bad);
  } else {
    unsigned m = sl_kq_max16x4(p[0]);
#pragma unroll
    for (int k = 1; k < PPL; k++) {
      const unsigned o = sl_kq_max16x4(p[k]);
      asm("max.u16x2 %0, %0, %1;" : "+r"(m) : "r"(o));
    }
    if constexpr (LPB == 2) {
      const unsigned o = __shfl_xor_sync(0xffffffffu, m, 1);
      asm("max.u16x2 %0, %0, %1;" : "+r"(m) : "r"(o));
    }
    sl_kq_absmax16_of<DT>(m, absmax, bad);
  }
  uint4 q[PPL]; // MXFP4: the packets again, opaque -- without it ptxas keeps the absmax's |x| words
#pragma unroll  // for the encoder, 16 more live registers, and spills at 40 (bf16: 12-36 bytes)
  for (int k = 0; k < PPL; k++) {
    q[k] = p[k];
    if constexpr (PPL == 4) asm volatile("" : "+r"(q[k].x), "+r"(q[k].y), "+r"(q[k].z), "+r"(q[k].w));
  }
  unsigned w[PPL];
#pragma unroll
  for (int k = 0; k < PPL; k++)
    w[k] = 0u;
  unsigned char su;
  if (bad) {
    float unused;
    sl_qf_nan_scale(QFMT, &unused, &su);
  } else if constexpr (QFMT == SL_QFMT_NVFP4) {
    const float mul = sl_kq_nvfp4_scale(absmax, global_scale, su);
    if (su != 0) {
#pragma unroll
      for (int k = 0; k < PPL; k++) {
        float v[VEC];
        sl_kq_unpack<DT>(q[k], v);
        w[k] = sl_kq_e2m1_packet<DT, VEC>(v, q[k], mul);
      }
    }
  } else { // MXFP4: x * 2^-e exact, codes straight from x (sl_kq_quantize_fast's MXFP4 branch)
    const int e = mx_block_exp(absmax);
    su = (unsigned char)(e + 127);
    if (absmax > 0.0f) {
#pragma unroll
      for (int k = 0; k < PPL; k++) {
        if constexpr (DT == SL_DTYPE_BF16 && SL_KQ_E2M1_BF16X2) {
          const unsigned u[4] = {q[k].x, q[k].y, q[k].z, q[k].w};
          w[k] = (unsigned)sl_qf_e2m1_pack_bf16x2(u, sl_qf_e2m1_m2(e));
        } else {
          float v[VEC];
          sl_kq_unpack<DT>(q[k], v);
          w[k] = sl_kq_e2m1_packet<DT, VEC>(v, q[k], sl_qf_pow2(-e));
        }
      }
    }
  }
  if constexpr (PPL == 2)
    *reinterpret_cast<unsigned long long *>(cdst) = ((unsigned long long)w[1] << 32) | w[0];
  else
    *reinterpret_cast<uint4 *>(cdst) = make_uint4(w[0], w[1], w[2], w[3]);
  if (LPB == 1 || (lane & 1) == 0) *sdst = su;
}

// QPAIR's warp task: chunks c0.. (SEGC, whole groups of PPL chunks) of `row`, max(UNROLL, PPL)
// packets (UP groups) loaded per step. The lane's packets of a group sit at elements
// PPL VEC lane + VEC k (k < PPL), its codes at PPL VEC / 2 lane bytes, its block column
// 32 / LPB groups + lane / LPB.
template <bool STAGED, int SSTEP>
__device__ __forceinline__ void quant_task_pair(const void *__restrict__ in, long in_stride,
                                                unsigned char *__restrict__ codes, void *scales, unsigned stage_ofs,
                                                unsigned row, unsigned c0, int lane, float global_scale) {
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  constexpr int UP = UNROLL >= PPL ? UNROLL / PPL : 1;      // chunk groups per step
  constexpr int STEP = PPL * (STAGED ? SSTEP : SCALE_STEP); // scale bytes per chunk group
  const unsigned col = c0 * CHUNK + lane * (PPL * VEC);
  const char *ip = (const char *)in + ((size_t)row * (size_t)in_stride + col) * ebytes;
  unsigned char *cp = codes + (size_t)row * (HIDDEN / 2) + col / 2;
  unsigned char *sp =
      STAGED ? reinterpret_cast<unsigned char *>(scales) + stage_ofs : scale_ptr(scales, row, col / BLOCK_ELEMS);
  for (unsigned c = 0; c < SEGC; c += PPL * UP) {
    uint4 r[UP][PPL];
#pragma unroll
    for (int u = 0; u < UP; u++)
#pragma unroll
      for (int k = 0; k < PPL; k++)
        r[u][k] = sl_kq_load_raw(ip + u * PPL * CHUNK * ebytes + k * VEC * ebytes);
#pragma unroll
    for (int u = 0; u < UP; u++)
      quant_block_lane<DTYPE>(r[u], cp + u * (PPL * CHUNK / 2), sp + u * STEP, global_scale, lane);
    ip += UP * PPL * CHUNK * ebytes;
    cp += UP * (PPL * CHUNK / 2); // a chunk group's codes
    sp += UP * STEP;
  }
}

// One warp item = CHUNK consecutive elements of one row; lane l holds elements
// [l*VEC, (l+1)*VEC) of it. A warp loads UNROLL items before quantizing any, so its loads are
// in flight together.
// SEG == 0: items are grid-stride (grid <= resident blocks) with 32-bit indices (the host
// checks rows * CHUNKS < 2^31): row = item / CHUNKS is a multiply-high by a compile-time
// constant, not a 64-bit division; every item computes its own addresses.
// SEG > 0: grid-stride over warp tasks (row, segment); inside a task the addresses are running
// pointers advanced by compile-time steps (loads and stores of a step use immediate offsets).
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
    sl_quant_kernel(const void *__restrict__ in, long in_stride, unsigned char *__restrict__ codes,
                    void *__restrict__ scales, float global_scale, int num_tokens) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & 31;
  const unsigned warp = blockIdx.x * WARPS + threadIdx.x / 32, nwarps = gridDim.x * WARPS;
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  if constexpr (SWZ_STAGE) {
    // column tiles per segment, stage bytes per chunk (the guards: FP8 group's discarded branch)
    constexpr unsigned STAGE_TILES = SWZ_STAGE ? SEGC * (CHUNK / BLOCK_ELEMS / 4) : 1;
    constexpr int STAGE_STEP = SWZ_STAGE ? (CHUNK / BLOCK_ELEMS / 4) * 32 : 0;
    // stage[b]: one group's sector images (32 bytes per column tile). Two of them, so that one
    // barrier per group orders both this group's stage writes before its stores and its stores
    // (stage reads) before the writes of the group after next into the same image.
    __shared__ uint4 stage[2][2 * STAGE_TILES];
    constexpr unsigned col_tiles = (COLS + 3) / 4;
    const unsigned w = threadIdx.x / 32, slot = (w & 1u) * 16u + (w >> 1) * 4u;
    const unsigned gl = lane * VEC / BLOCK_ELEMS; // the lane's block column inside its chunk
    // groups: (tile row, row pair k of 16, segment); the bound is CTA-uniform, so every thread
    // reaches every barrier
    const unsigned groups = (((unsigned)num_tokens + 127u) >> 7) * 16u * NSEG;
    unsigned b = 0;
    for (unsigned grp = blockIdx.x; grp < groups; grp += gridDim.x, b ^= 1u) {
      const unsigned pair = grp / NSEG, s = grp - pair * NSEG; // pair = tile row * 16 + k
      const unsigned row = (pair >> 4) * 128u + (pair & 15u) * 2u + (w & 1u) + (w >> 1) * 32u;
      unsigned char *img = reinterpret_cast<unsigned char *>(stage[b]);
      if (row < (unsigned)num_tokens) { // warp-uniform
        if constexpr (PAIR) { // the lane's block column inside its chunk group: lane / LPB
          const unsigned j = lane / LPB;
          quant_task_pair<true, STAGE_STEP>(in, in_stride, codes, img, slot + ((j >> 2) << 5) + (j & 3u), row, s * SEGC,
                                            lane, global_scale);
        } else {
          quant_task<true, STAGE_STEP>(in, in_stride, codes, img, slot + ((gl >> 2) << 5) + (gl & 3u), row, s * SEGC,
                                       lane, global_scale);
        }
        if constexpr (COLS % 4 != 0) // the last column tile's padding columns: no live lane writes them
          if (s == NSEG - 1 && lane < 4 - COLS % 4)
            img[(col_tiles - 1 - s * STAGE_TILES) * 32 + slot + COLS % 4 + lane] = 0;
      } else { // a padding row: zeros, no codes
        for (unsigned j = lane; j < STAGE_TILES; j += 32)
          *reinterpret_cast<unsigned *>(img + j * 32 + slot) = 0u;
      }
      __syncthreads();
      const unsigned t0 = s * STAGE_TILES; // the segment's first column tile
      const unsigned halves = 2 * (col_tiles % STAGE_TILES == 0 ? STAGE_TILES : min(STAGE_TILES, col_tiles - t0));
      unsigned char *dst = reinterpret_cast<unsigned char *>(scales) + (size_t)(pair >> 4) * (col_tiles * 512u) +
                           t0 * 512u + (pair & 15u) * 32u;
      for (unsigned i = threadIdx.x; i < halves; i += WARPS * 32) // i = 2 * tile + half
        *reinterpret_cast<uint4 *>(dst + (i >> 1) * 512u + (i & 1u) * 16u) = stage[b][i];
    }
  } else if constexpr (SEG > 0) {
    const unsigned tasks = (unsigned)num_tokens * NSEG;
    for (unsigned t = warp; t < tasks; t += nwarps) {
      const unsigned row = t / NSEG, c0 = (t - row * NSEG) * SEGC;
      if constexpr (PAIR)
        quant_task_pair<false, 0>(in, in_stride, codes, scales, 0, row, c0, lane, global_scale);
      else
        quant_task<false, 0>(in, in_stride, codes, scales, 0, row, c0, lane, global_scale);
    }
  } else {
    const unsigned items = (unsigned)num_tokens * CHUNKS;
    for (unsigned base = warp; base < items; base += nwarps * UNROLL) {
      uint4 raw[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const unsigned it = base + u * nwarps;
        const unsigned row = it / CHUNKS;
        const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
        raw[u] = make_uint4(0u, 0u, 0u, 0u);
        if (it < items && (!RAGGED || col < HIDDEN))
          raw[u] = sl_kq_load_raw((const char *)in + ((size_t)row * (size_t)in_stride + col) * ebytes);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const unsigned it = base + u * nwarps;
        if (it >= items) break; // warp-uniform
        const unsigned row = it / CHUNKS;
        const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
        // code byte offset: FP4 halves row and column separately (HIDDEN is even): no 64-bit shift
        const size_t cofs = IS_FP4 ? (size_t)row * (HIDDEN / 2) + col / 2 : (size_t)row * HIDDEN + col;
        quant_packet(raw[u], !RAGGED || col < HIDDEN, lane, codes + cofs, scale_ptr(scales, row, col / BLOCK_ELEMS),
                     global_scale);
      }
    }
  }
  if constexpr (QFMT != SL_QFMT_FP8_GROUP && !SWZ_STAGE) // staged: the stores above wrote the padding
    zero_swizzle_padding(reinterpret_cast<unsigned char *>(scales), num_tokens);
}

// Decode one thread's VEC codes with the block's scale, as sl_qf_decode (bit for bit; NaN
// codes give NaN). FP8 formats by the hardware E4M3 pair conversion.
__device__ __forceinline__ void decode_codes(const unsigned char *c, float sf, unsigned char su, float global_scale,
                                             float *y) {
  if constexpr (QFMT == SL_QFMT_FP8_GROUP || QFMT == SL_QFMT_MXFP8) {
    const float scale = QFMT == SL_QFMT_FP8_GROUP ? sf : sl_e8m0_to_f32(su);
#pragma unroll
    for (int j = 0; j < VEC; j += 2) {
      float lo, hi;
      sl_kq_e4m3x2_to_f32((unsigned short)(c[j] | (c[j + 1] << 8)), lo, hi);
      y[j] = __fmul_rn(lo, scale);
      y[j + 1] = __fmul_rn(hi, scale);
    }
  } else if constexpr (QFMT == SL_QFMT_NVFP4) {
    // (e2m1 * decode(sf)) exact, then / global_scale: the FMA-corrected quotient where
    // global_scale is in the proven range (a kernel argument: the branch is uniform).
    const float sfv = sl_e4m3_to_f32(su);
    if (sl_qf_deq_fast_ok(global_scale)) {
      const float r = __frcp_rn(global_scale);
#pragma unroll
      for (int j = 0; j < VEC; j++)
        y[j] = sl_qf_div_fast(__fmul_rn(sl_e2m1_to_f32(c[j]), sfv), global_scale, r);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; j++)
        y[j] = sl_qf_decode(QFMT, c[j], sf, su, global_scale);
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; j++)
      y[j] = sl_qf_decode(QFMT, c[j], sf, su, global_scale);
  }
}

// Two fp32 values rounded once (RNE) to a packed pair of DT (bf16/f16), lo in the low half.
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned d;
  if constexpr (DTYPE == SL_DTYPE_BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// A NaN scale byte (E8M0 0xff; E4M3 0x7f / 0xff) gives NaN at every magnitude: the entry of the
// DTYPE's quiet NaN (0x7fc0 / 0x7e00) in both byte planes, without the reference's decodes. Those
// took ~8 IEEE divisions and their slow paths in one thread of every CTA -- the CTA's other warps
// waited for it at the table's barrier (ncu, session 16: 21 % of the FP4 dequantizer's stall samples).
__device__ __forceinline__ uint4 nan_entry() {
  constexpr unsigned lo = DTYPE == SL_DTYPE_F16 ? 0x00000000u : 0xc0c0c0c0u;
  constexpr unsigned hi = DTYPE == SL_DTYPE_F16 ? 0x7e7e7e7eu : 0x7f7f7f7fu;
  return make_uint4(lo, lo, hi, hi);
}

// 16-bit outputs (bf16/f16, 8 per lane): the thread's codes stay one packed word (8 bytes of
// E4M3, 4 of E2M1) and decode without unpacking them into bytes:
//  - FP8 formats: E4M3 pairs by cvt.rn.f16x2.e4m3x2 straight from the word's halves (exact),
//    times the block scale in fp32 (the reference's one rounding), packed by one cvt per pair.
//  - FP4 formats: magnitudes by byte permutes (sl_qf_e2m1_mag8_bf16), times the scale (MX: one
//    exact-or-reference-rounded multiply; NVFP4: (e2m1 * sf) exact, then the FMA-corrected
//    quotient by global_scale as decode_codes), and the signs XOR'ed into the packed output
//    pairs (sl_qf_e2m1_sign8): RN is symmetric, so sign ^ RN(|e2m1| * scale) is RN(x), -0
//    included (XOR, not OR: a negative NVFP4 scale byte makes the magnitude's result negative).
// Returns false where the generic per-element path must run (NVFP4 outside the fast range).
// The table entry (sl_qf_fp4_entry16: the 16-bit results of the 8 E2M1 magnitudes as two 8-byte
// permute tables) of FP4 scale byte su from two fp32 results (rcp = RN(1 / global_scale), NVFP4
// only), or false where the reference's decode must run. NVFP4 needs global_scale in the fast
// quotient's range; a negative scale byte is its magnitude's entry with every sign flipped (RN is
// symmetric; magnitude 0 becomes -0, the reference's (0 * -d) / gs); scale bytes +-0 give zeros;
// NaN scale bytes nan_entry.
__device__ __forceinline__ bool fp4_entry(unsigned su, float global_scale, float rcp, uint4 &e) {
  float q1, q3;
  if (QFMT == SL_QFMT_MXFP4 ? su == 0xffu : (su & 0x7fu) == 0x7fu) {
    e = nan_entry();
    return true;
  }
  if constexpr (QFMT == SL_QFMT_MXFP4) {
    q1 = sl_e8m0_to_f32((unsigned char)su); // 2^(su - 127): 3 q1 exact (or out of range: rejected)
    q3 = 3.0f * q1;
  } else {
    float unused;
    sl_kq_e4m3x2_to_f32((unsigned short)(su & 0x7fu), q1, unused); // d >= +0, exact (code 0x7f: NaN)
    if ((su & 0x7fu) == 0) {
      e = make_uint4(0u, 0u, (su & 0x80u) ? 0x80808080u : 0u, (su & 0x80u) ? 0x80808080u : 0u);
      return true;
    }
    q3 = sl_qf_div_fast_signed(3.0f * q1, global_scale, rcp); // 3d: an exact product
    q1 = sl_qf_div_fast_signed(q1, global_scale, rcp);
  }
  unsigned r[4];
  const unsigned pk = pack2(q1, q3);
  if (!sl_qf_fp4_entry16(pk & 0xffffu, pk >> 16, DTYPE == SL_DTYPE_F16, r)) return false;
  const unsigned flip = QFMT == SL_QFMT_NVFP4 && (su & 0x80u) ? 0x80808080u : 0u;
  e = make_uint4(r[0], r[1], r[2] ^ flip, r[3] ^ flip);
  return true;
}

// The 8 outputs (4 packed pairs) of the 8 codes in c (nibble j = element j) from the scale's
// table entry t (fp4_entry / fill_deq_table).
__device__ __forceinline__ uint4 decode16_table(unsigned c, uint4 t) {
  unsigned sg[4], r[4], sel = c & 0x77777777u; // the permute index: magnitude bits only
  sl_qf_e2m1_sign8(c, sg);
#pragma unroll
  for (int h = 0; h < 2; h++, sel >>= 16) {
    const unsigned lo = sl_qf_prmt(t.x, t.y, sel), hi = sl_qf_prmt(t.z, t.w, sel);
    r[2 * h] = sl_qf_prmt(lo, hi, 0x5140u) ^ (sg[2 * h] & 0x80008000u);
    r[2 * h + 1] = sl_qf_prmt(lo, hi, 0x7362u) ^ (sg[2 * h + 1] & 0x80008000u);
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

__device__ __forceinline__ bool decode16(unsigned long long w, float sf, unsigned char su, float global_scale,
                                         uint4 &o) {
  unsigned r[4];
  if constexpr (QFMT == SL_QFMT_FP8_GROUP || QFMT == SL_QFMT_MXFP8) {
    const float scale = QFMT == SL_QFMT_FP8_GROUP ? sf : sl_e8m0_to_f32(su);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float lo, hi;
      sl_kq_e4m3x2_to_f32((unsigned short)(w >> (16 * i)), lo, hi);
      r[i] = pack2(__fmul_rn(lo, scale), __fmul_rn(hi, scale));
    }
  } else {
    const unsigned c = (unsigned)w;
    unsigned p[4], sg[4];
    sl_qf_e2m1_mag8_bf16(c, p);
    sl_qf_e2m1_sign8(c, sg);
    float a[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      a[2 * i] = __uint_as_float(p[i] << 16);
      a[2 * i + 1] = __uint_as_float(p[i] & 0xffff0000u);
    }
    if constexpr (QFMT == SL_QFMT_MXFP4) {
      const float scale = sl_e8m0_to_f32(su);
#pragma unroll
      for (int j = 0; j < 8; j++)
        a[j] = __fmul_rn(a[j], scale);
    } else {
      if (!sl_qf_deq_fast_ok(global_scale)) return false; // a kernel argument: uniform
      // negative scale bytes (never written by the quantizer): the generic path keeps the
      // reference's -0 for code magnitude 0 (the signed fast quotient gives +0 there)
      if (su & 0x80u) return false;
      float sfv, unused;
      sl_kq_e4m3x2_to_f32(su, sfv, unused); // exact (NaN for code 0x7f: NaN outputs either way)
      const float rcp = __frcp_rn(global_scale);
#pragma unroll
      for (int j = 0; j < 8; j++)
        a[j] = sl_qf_div_fast_signed(__fmul_rn(a[j], sfv), global_scale, rcp); // magnitudes: >= +0
    }
#pragma unroll
    for (int i = 0; i < 4; i++) // XOR: also right for a negative E4M3 scale byte (the magnitude's sign set)
      r[i] = pack2(a[2 * i], a[2 * i + 1]) ^ (sg[i] & 0x80008000u);
  }
  o = make_uint4(r[0], r[1], r[2], r[3]);
  return true;
}

// Load one lane's codes (cbytes at cp) and its block's scale (at sp: fp32 for FP8 group, else
// a byte) for dequantization.
__device__ __forceinline__ void dequant_load(const unsigned char *cp, const unsigned char *sp, unsigned long long &cw,
                                             float &sf, unsigned char &su) {
  constexpr int cbytes = IS_FP4 ? VEC / 2 : VEC; // 2, 4 or 8 bytes, aligned to their size
  if constexpr (cbytes == 8)
    cw = __ldg(reinterpret_cast<const unsigned long long *>(cp));
  else if constexpr (cbytes == 4)
    cw = __ldg(reinterpret_cast<const unsigned *>(cp));
  else
    cw = __ldg(reinterpret_cast<const unsigned short *>(cp));
  if constexpr (QFMT == SL_QFMT_FP8_GROUP)
    sf = __ldg(reinterpret_cast<const float *>(sp));
  else
    su = __ldg(sp);
}

// Decode one lane's codes and store its VEC outputs at dst.
__device__ __forceinline__ void dequant_packet(unsigned long long cw, float sf, unsigned char su, float global_scale,
                                               char *dst) {
  if constexpr (DTYPE != SL_DTYPE_F32) { // 8 outputs per lane, codes kept as one word
    uint4 o;
    if (decode16(cw, sf, su, global_scale, o)) {
      *reinterpret_cast<uint4 *>(dst) = o;
      return;
    }
  }
  unsigned char c[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++)
    c[j] = (unsigned char)((cw >> (IS_FP4 ? 4 * j : 8 * j)) & (IS_FP4 ? 0xfu : 0xffu));
  float y[VEC];
  decode_codes(c, sf, su, global_scale, y);
  sl_kq_store<DTYPE, VEC>(dst, y);
}

// FP4 to 16-bit outputs in the segment layout: a per-CTA table, for every scale byte s, of the
// 16-bit results of the 8 magnitudes (sl_qf_decode(QFMT, m, 0, s, gs) rounded once to DTYPE:
// the reference's own value), as two 8-byte permute tables (low bytes of m = 0..7, high bytes).
// A lane then decodes its 8 codes with one 16-byte shared load and the byte permutes of
// sl_qf_e2m1_mag8_bf16, and XORs the code signs in (sign ^ RN(|e2m1| * scale) = RN(x), -0 and
// negative scale bytes included; NaN scales give NaN). An entry is fp4_entry's two fp32 results
// (NVFP4: two quotients) and ~10 integer instructions; the few bytes it refuses (NaN, f16 out of
// range, a tensor scale outside the fast quotient's range) take decode16 or the reference. Until
// session 13 every entry was decode16's 8 quotients, and the NVFP4 scale bytes >= 0x80 -- half of
// the CTA's threads -- took the reference's 8 IEEE divisions: ~100 and ~400 instructions per
// thread before the CTA's barrier, against ~175 for a warp's whole 4-chunk task. Once per CTA;
// the item layout keeps decode16 per item (its CTAs live for 16 items).
static constexpr bool DEQ_TABLE = IS_FP4 && DTYPE != SL_DTYPE_F32 && SEG > 0;

__device__ __forceinline__ unsigned short to16(float y) {
  if constexpr (DTYPE == SL_DTYPE_BF16)
    return sl_kq_f32_to_bf16(y);
  else
    return sl_kq_f32_to_f16(y);
}

// The entry of a scale byte fp4_entry refuses (NaN, f16 out of range, a tensor scale outside
// the fast quotient's range), out of line so the fill's hot path keeps its registers.
__device__ __noinline__ uint4 deq_entry_slow(int s, float global_scale) {
  uint4 o;
  // codes 0..7 in nibbles 0..7 through the packed decoder (bit-identical to sl_qf_decode);
  // its pairs (element m in half m & 1 of word m / 2) regrouped into the byte planes. A negative
  // NVFP4 scale byte takes its magnitude's results with every sign flipped (RN is symmetric, and
  // magnitude 0 gives the reference's (0 * -d) / gs = -0 that decode16's own quotient would not).
  const int mag = QFMT == SL_QFMT_NVFP4 ? s & 0x7f : s;
  if (decode16(0x76543210ull, 0.0f, (unsigned char)mag, global_scale, o)) {
    const unsigned flip = mag != s ? 0x80808080u : 0u;
    return make_uint4(sl_qf_prmt(o.x, o.y, 0x6420u), sl_qf_prmt(o.z, o.w, 0x6420u),
                      sl_qf_prmt(o.x, o.y, 0x7531u) ^ flip, sl_qf_prmt(o.z, o.w, 0x7531u) ^ flip);
  }
  unsigned b[4] = {0u, 0u, 0u, 0u}; // the reference's own decode
#pragma unroll
  for (int m = 0; m < 8; m++) {
    const unsigned h = to16(sl_qf_decode(QFMT, (unsigned char)m, 0.0f, (unsigned char)s, global_scale));
    b[m >> 2] |= (h & 0xffu) << (8 * (m & 3));
    b[2 + (m >> 2)] |= (h >> 8) << (8 * (m & 3));
  }
  return make_uint4(b[0], b[1], b[2], b[3]);
}

__device__ __forceinline__ void fill_deq_table(uint4 *tab, float global_scale) {
  const bool fast = QFMT == SL_QFMT_MXFP4 || sl_qf_deq_fast_ok(global_scale); // uniform
  const float rcp = QFMT == SL_QFMT_NVFP4 && fast ? __frcp_rn(global_scale) : 0.0f;
  for (int s = threadIdx.x; s < 256; s += blockDim.x) {
    uint4 o;
    if (!(fast && fp4_entry((unsigned)s, global_scale, rcp, o))) o = deq_entry_slow(s, global_scale);
    tab[s] = o;
  }
}

// Dequantize: one warp item = CHUNK output elements (16 bytes of output per lane); SEG as in
// sl_quant_kernel (SEG > 0: warp tasks of SEGC chunks of a row with running pointers).
extern "C" __global__ void __launch_bounds__(WARPS * 32, DEQ_MIN_BLOCKS)
    sl_dequant_kernel(const unsigned char *__restrict__ codes, const void *__restrict__ scales, float global_scale,
                      void *__restrict__ out, long out_stride, int num_tokens) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & 31;
  const unsigned warp = blockIdx.x * WARPS + threadIdx.x / 32, nwarps = gridDim.x * WARPS;
  constexpr int ebytes = sl_kq_elem<DTYPE>::bytes;
  if constexpr (SEG > 0) {
    __shared__ uint4 tab[DEQ_TABLE ? 256 : 1];
    if constexpr (DEQ_TABLE) {
      fill_deq_table(tab, global_scale);
      __syncthreads(); // every thread reaches it: before any early exit
    }
    const unsigned tasks = (unsigned)num_tokens * NSEG;
    for (unsigned t = warp; t < tasks; t += nwarps) {
      const unsigned row = t / NSEG, c0 = (t - row * NSEG) * SEGC;
      const unsigned nc = CHUNKS % SEGC == 0 ? SEGC : min((unsigned)SEGC, CHUNKS - c0);
      unsigned col = c0 * CHUNK + lane * VEC;
      char *op = (char *)out + ((size_t)row * (size_t)out_stride + col) * ebytes;
      const unsigned char *cp =
          codes + (IS_FP4 ? (size_t)row * (HIDDEN / 2) + col / 2 : (size_t)row * HIDDEN + col);
      const unsigned char *sp = scale_ptr(const_cast<void *>(scales), row, col / BLOCK_ELEMS);
      for (unsigned c = 0; c < nc; c += UNROLL) {
        unsigned long long cw[UNROLL];
        float sf[UNROLL];
        unsigned char su[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          sf[u] = 0.0f;
          su[u] = 0;
          cw[u] = 0;
          const bool in_task = (CHUNKS % SEGC == 0 && SEGC % UNROLL == 0) || c + u < nc;
          if (in_task && (!RAGGED || col + u * CHUNK < HIDDEN))
            dequant_load(cp + u * CODE_STEP, sp + u * SCALE_STEP, cw[u], sf[u], su[u]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          if (!((CHUNKS % SEGC == 0 && SEGC % UNROLL == 0) || c + u < nc)) break; // warp-uniform
          if (RAGGED && col + u * CHUNK >= HIDDEN) continue;
          if constexpr (DEQ_TABLE)
            *reinterpret_cast<uint4 *>(op + u * CHUNK * ebytes) = decode16_table((unsigned)cw[u], tab[su[u]]);
          else
            dequant_packet(cw[u], sf[u], su[u], global_scale, op + u * CHUNK * ebytes);
        }
        op += UNROLL * CHUNK * ebytes;
        cp += UNROLL * CODE_STEP;
        sp += UNROLL * SCALE_STEP;
        col += UNROLL * CHUNK;
      }
    }
    return;
  }
  const unsigned items = (unsigned)num_tokens * CHUNKS;
  for (unsigned base = warp; base < items; base += nwarps * UNROLL) {
    unsigned long long cw[UNROLL];
    float sf[UNROLL];
    unsigned char su[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const unsigned it = base + u * nwarps;
      const unsigned row = it / CHUNKS;
      const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
      sf[u] = 0.0f;
      su[u] = 0;
      cw[u] = 0;
      if (it < items && (!RAGGED || col < HIDDEN))
        dequant_load(codes + (IS_FP4 ? (size_t)row * (HIDDEN / 2) + col / 2 : (size_t)row * HIDDEN + col),
                     scale_ptr(const_cast<void *>(scales), row, col / BLOCK_ELEMS), cw[u], sf[u], su[u]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const unsigned it = base + u * nwarps;
      const unsigned row = it / CHUNKS;
      const unsigned col = (it - row * CHUNKS) * CHUNK + lane * VEC; // unsigned: shifts, no sign fix-ups
      if (it >= items || (RAGGED && col >= HIDDEN)) continue;
      dequant_packet(cw[u], sf[u], su[u], global_scale, (char *)out + ((size_t)row * (size_t)out_stride + col) * ebytes);
    }
  }
}
