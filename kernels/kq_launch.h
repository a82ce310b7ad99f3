/* Host-only launch-shape choice shared by the quant, act and router kernels (kernels/quant.c,
 * act.c, router.c): the per-arch table of warps per block and the resident-grid rule. */
#ifndef SL_KQ_LAUNCH_H
#define SL_KQ_LAUNCH_H

/* Past this many resident waves of work, launch one block per group of items (the "full grid":
 * many short-lived blocks) instead of a resident grid that strides. MEASURED on the H200 (session
 * 13 call 5, `SL_KQ_GRID=1 sluice bench kernels --only quant_` / `act_`, kernel us, rows "res" /
 * "full"): at T=8192 h=2048 (2.6 resident waves of the 6-block kernels) the full grid is faster
 * for the FP8 quantizer (14.37 -> 14.02), NVFP4 (14.08 -> 13.92), the FP8-out activation (24.00 ->
 * 23.62), the FP8 dequantizer (14.30 -> 14.14); at 1.1 waves (T=1024 h=7168) it is mixed (FP8
 * dequant 6.95 -> 7.30, NVFP4 quant 8.22 -> 7.90), so the point is 2 waves (it was 4, from
 * RMSNorm). Per kind (the callers' sl_kq_launch_waves): the MXFP4 quantizer on rows of <=
 * SL_KQ_FP4Q_WIDE_CHUNKS chunks keeps the resident grid at every size (T=8192 h=4096: 22.78
 * resident vs 23.42 full; call 6, T=32768 h=2048 / 4096 at 10 / 21 waves: 92.6 / 94.2 % of copy
 * resident vs 91.3 / 93.0 full; its wide rows, unroll 4, go full as the others: T=8192 h=7168
 * 39.90 resident vs 37.89), the 8-block kernels (MXFP8 quantizer; the FP4 table dequantizer in
 * sessions 13-15, now 6 blocks and the launcher's point, kernels/quant.cu DEQ_MIN_BLOCKS) go full
 * past 1 of their waves (MXFP8 T=8192 h=4096 at 3.9 waves: 26.11 -> 25.50; the FP4 dequantizer at
 * h=2048, 1.9 waves: 14.30 -> 13.57), the router keeps 4 (not measured). */
#define SL_KQ_FULL_GRID_WAVES 2
#define SL_KQ_FULL_GRID_WAVES_MXFP4Q (1 << 24) /* never the full grid */
#define SL_KQ_FULL_GRID_WAVES_8BLOCKS 1
#define SL_KQ_FULL_GRID_WAVES_ROUTER 4
/* Warps per block of the quantizer's staged swizzled scales (kernels/quant.cu SWZ_STAGE): the 8
 * rows {k, k+1} x the four 32-row groups of a 128x4 tile, which share each 32-byte sector. */
#define SL_KQ_SWZ_STAGE_WARPS 8
#ifndef __CUDACC_RTC__

#include "kernels/quant_formats.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

/* Per-arch warps per block (compile-time constants of the kernels).
 * decode (rows < SMs): one warp per block, so the few rows spread over as many SMs as
 *   possible and no warp waits for a sibling's rows; latency is one row's load + store (the
 *   quantizers and the FP8-out activation: q8_decode below, warps by items).
 * prefill: 8 warps (256 threads) per block; 8 such blocks fill an SM's 64 warps on Hopper
 *   and Blackwell (2048 threads/SM), and with `unroll` items in flight per warp each SM keeps
 *   8 warps * 8 blocks * 32 lanes * 16 B * 2 = 64 KiB of loads outstanding, above the ~23 KiB
 *   Little's law asks for at 4.8 TB/s and ~650 ns latency over 132 SMs.
 * Measured numbers go to kernels/NOTES.md; change a row here only with a benchmark. */
typedef struct {
  int arch; /* SL_ARCH_*; 0 = any other */
  int decode_warps;
  int prefill_warps;
  int unroll; /* work items loaded before any is processed, per warp */
  int seg;    /* prefill work layout: 0 = one warp item per grid-stride step (each item's
               * addresses from its index); N > 0 = a warp walks N consecutive chunks of one row
               * (a "segment") with running pointers: the per-item index math (~45 of ~180
               * instructions per item in the FP4 quantizer, kernels/NOTES.md) becomes pointer
               * increments and the per-warp prologue is paid once per N chunks. */
  int seg_act16; /* the same for the activation without quantization (bf16/f16/f32 out): its
                  * item is cheap, so the running-pointer walk only delays the next loads */
  int unroll_act16; /* `unroll` for that activation (item layout at every T) */
  int unroll_fp4q;  /* `unroll` of the FP4 quantizers (MXFP4, NVFP4) in the segment layout on
                     * rows of more than SL_KQ_FP4Q_WIDE_CHUNKS chunks, and of the NVFP4 quantizer's
                     * whole-block lane (QPAIR) on every row; 0: `unroll` */
  int swz_stage_fmts; /* formats (bit 1 << SL_QFMT_*) whose swizzled scales are staged by default
                       * (sl_kq_swz_stage): FP4 formats only on rows of <= SL_KQ_FP4Q_WIDE_CHUNKS
                       * chunks (the wide rows' unroll-4 walk measured slower staged), MXFP4 only
                       * with its half-block lane (mx_half) */
  int act16_wide_items; /* the 16-bit-output activation takes prefill_warps below sm_count rows from
                         * this many warp items per SM on (sl_kq_warps_act16); 0: never */
  int nv_pair;          /* the NVFP4 quantizer's lane takes a whole 16-element block where it can
                         * (kernels/quant.cu QPAIR; sl_kq_qpair). Hopper 1: MEASURED (session 13
                         * call 8, rows "single" = off): +3-8 points of copy at every T >= 8192
                         * shape, e.g. swz T=32768 h=4096 86.7 -> 92.7 %. Blackwell: not measured
                         * (its table has the item layout, where QPAIR does not apply). */
  int seg_deq8;         /* `seg` of the FP8 group dequantizer (SL_KQ_SEG_DEQ8); see below */
  int mx_quad;          /* the MXFP4 quantizer's lane takes a whole 32-element block (four packets)
                         * where it can on rows of more than SL_KQ_FP4Q_WIDE_CHUNKS chunks (quant.cu
                         * QPAIR; sl_kq_qpair); see below */
  int act8_fast_exp;    /* SiLU-and-mul with the fused FP8 output takes e^-g by ex2.approx, as the
                         * 16-bit outputs do (kernels/act.cu FASTEXP; sl_kq_act8_fast_exp) */
  int seg_act8;         /* `seg` of the FP8-out activation (SL_KQ_SEG_ACT8); see below */
  int mx_half;          /* the MXFP4 quantizer's lane takes half a block (two packets; its partner lane
                         * the other half: quant.cu QPAIR 2) where it can on rows of <=
                         * SL_KQ_FP4Q_WIDE_CHUNKS chunks (sl_kq_qpair); see below */
  int gelu_fast_exp;    /* GELU(tanh)-and-mul into 16-bit and FP8 outputs takes 1 + tanh(z) as 2 / (1 + e^-2z) by
                         * ex2.approx (kernels/act.cu FASTEXP; sl_kq_gelu_fast_exp); fp32 outputs keep tanhf */
  int q8_decode;        /* the quantizers and the FP8-out activation below sm_count rows: one item per warp, the
                         * item layout, and warps by items (sl_kq_q8_decode); 0: decode_warps and `unroll` */
  int q8_small;         /* the FP8 group quantizer and the FP8-out activation from sm_count rows below this many
                         * warp items per SM (GELU: SL_KQ_Q8_SMALL_GELU of it): 4 warps, one item per warp in
                         * the item layout, compiled for the full 2048 threads per SM (sl_kq_q8_small); 0: the
                         * prefill launch; see below */
  int gelu8_blocks;     /* blocks per SM the GELU(tanh)-and-mul into FP8 (IEEE scales) is compiled for at prefill
                         * (act.cu MIN_BLOCKS; sl_kq_gelu8_blocks); 0: the kernel's rule; see below */
  int act16_pack;       /* bytes of gate and of up per lane in the one-item (decode) activation from and into 16-bit
                         * dtypes: 8 or 4 (act.cu PACK; sl_kq_act16_pack); 0: the 16-byte packet; see below */
  int q8_line_rows;     /* the FP8 group quantizer (IEEE scales, 16-bit inputs, whole chunks) up to this many rows and
                         * SL_KQ_Q8_LINE_MAX_HIDDEN: its decode launch with the straight-line hot path (quant.cu
                         * QLINE; sl_kq_q8_line); 0: never; see below */
} sl_kq_arch_cfg_t;

#define SL_KQ_FP4Q_WIDE_CHUNKS 16

/* Hopper seg: MEASURED on the H200 (`SL_KQ_TUNE=1 sluice bench kernels --tokens
 * 1,16,8192,32768`, 2026-11-29 session 3, bench/results/2026-11-29-s3-h200-merged/): mean
 * slowdown against each shape's best over T = 8192, 32768 and hidden 2048/4096/7168, for
 * seg 0 / 4 / 8 / 32:
 *   quant fp8 g128 1.085 / 1.000 / 1.039 / 1.087     act silu fp8  1.084 / 1.004 / 1.023 / 1.071
 *   quant mxfp4    1.277 / 1.017 / 1.028 / 1.035     act silu bf16 1.001 / 1.018 / 1.070 / 1.085
 *   quant nvfp4    1.174 / 1.007 / 1.031 / 1.047     dequant fp8   1.001 / 1.009 / 1.066 / 1.102
 *   quant mxfp8    1.002 / 1.005 / 1.025 / 1.046     dequant nvfp4 1.172 / 1.023 / 1.021 / 1.020
 * -> seg 4, and 0 for the 16-bit activation. Blackwell: not measured (the item layout). */
/* Hopper unroll_act16 1: MEASURED on the H200. The unroll sweep of session 3 (w8u1 / w8u2, rotated
 * inputs, events) already had 1 ahead at every act16 prefill shape (T=8192 I=2048 27.49 / 28.64 us,
 * the others 0.2-1.7 % apart); in the peers' harness (do_bench: a 256 MB fill before each call,
 * bench/probes/peer_sweep.py, session 10 call 3) 1 is 0.9-2.5 us faster at T = 1..8192, I = 2048
 * (T=16 4.35 / 5.36 us, T=8192 29.9 / 32.1): the decode warp's second item only lengthens its
 * chain of dependent loads and its code. Blackwell: not measured. */
/* ... and the NVFP4 quantizer with its whole block per lane (QPAIR) takes unroll_fp4q on every
 * row: MEASURED on the H200 (session 14 calls 2-3, `SL_KQ_TUNE=1 sluice bench kernels --only
 * quant_nvfp4 --tokens 8192,32768`, swizzled, kernel us, u4 / u2): h=2048 13.02 / 13.41 (T=8192),
 * 43.49 / 45.02 (T=32768); h=4096 23.01 / 23.97, 85.09 / 87.65 -- a warp's step is then its whole
 * 4-chunk segment (two chunk pairs), every load in flight at once. The one-packet
 * lane keeps u2 at h <= 4096 (session 10: u4 -0.4..-3 % at h=2048); MXFP4 too (h=2048 T=32768 u4
 * 45.98 vs 43.17, call 2). */
/* Hopper unroll_fp4q 4: MEASURED on the H200 (session 10, call 8: `SL_KQ_TUNE=1 sluice bench
 * kernels --only quant_ --tokens 8192,32768`, swizzled scales, % of copy u2 -> u4): at h=7168 (28
 * chunks per row: a warp's 4-chunk segment then has all its loads in flight at once) MXFP4
 * 84.1 -> 87.0 (T=8192) and 93.0 -> 97.8 (T=32768), NVFP4 79.1 -> 81.3 and 86.8 -> 91.5; at
 * h=4096 within -0.6..+0.5, at h=2048 -0.4..-3 (so only past 16 chunks). MXFP8 and FP8 group
 * (mixed, -1.0..+0.3), dequantization (flat) and the FP8-out activation (u4 -15..-25 points)
 * keep `unroll`. */
/* Hopper swz_stage_fmts MXFP8 | NVFP4: MEASURED on the H200 (session 11, call 1: `sluice bench
 * kernels --only quant_ --tokens 8192,32768`, rows "w8 staged" next to "w8"; events us, staged /
 * plain): MXFP8 h=2048 17.0 / 17.6 (T=8192), 51.8 / 53.7 (T=32768); h=4096 29.0 / 30.0, 98.4 /
 * 101.3; h=7168 45.9 / 48.0, 168.3 / 173.8 (= the linear layout's rows). NVFP4 h=4096 27.5 /
 * 27.9, 92.8 / 94.9; h=2048 17.06 / 17.02 (a tie), 49.1 / 50.2; h=7168 (28 chunks, unroll 4)
 * 45.0 / 43.4 and 162.2 / 154.7: slower, so not past SL_KQ_FP4Q_WIDE_CHUNKS. MXFP4: 0.1-0.4 us
 * slower at h <= 4096 and 2.7 / 10.8 at h=7168: off. Blackwell: not measured (its table has the
 * item layout, where staging does not apply). */
/* Hopper act16_wide_items 4: MEASURED on the H200 (session 11, call 6: bench/probes/peer_sweep.py
 * --graph, SiLU-and-mul bf16 at T=128 in a CUDA graph, us): I=2048 (1024 warp items, 7.8 per SM)
 * 1 warp per block 1.75, 4 warps 1.49, 8 warps 1.52; I=4096 (2048 items) 2.41 vs 8 warps 1.69;
 * I=7168 (3584) 3.35 vs 2.06 -- 2048-3584 one-warp blocks are slower to hand out than the work
 * they carry. At T=16 (128-448 items, <= 3.4 per SM) one warp per block measured level with or
 * ahead of the Triton row kernel (call 4), so the switch sits between: 4 items per SM. */
/* ... and below SL_KQ_ACT16_HALF_ITEMS warp items per SM half the prefill warps: measured twice at
 * T=128 I=2048 (1024 items, 7.8 per SM; graph us, 4 vs 8 warps per block): 1.49 vs 1.52 (session
 * 11 call 6), 1.42 vs 1.44 (session 12 call 7, Triton 1.43); at I=4096 (15.5 per SM) 1.67 vs
 * 1.66 -- level -- so 8 stay from there. */
#define SL_KQ_ACT16_HALF_ITEMS 8
/* Hopper mx_quad 1 (rows of more than SL_KQ_FP4Q_WIDE_CHUNKS chunks): MEASURED on the H200 (session
 * 14 call 8, `sluice bench kernels --only quant_mxfp4 --tokens 1024,8192,32768`, rows "single" =
 * the one-packet lane, kernel us, quad / single): h=7168 (unroll 4: a step is the warp's whole
 * 4-chunk segment either way) swz 37.44 / 37.66 (T=8192), 140.61 / 142.81 (T=32768), lin 36.06 /
 * 36.38, 135.74 / 138.18; at h <= 4096 (unroll 2) slower: h=2048 lin T=32768 44.77 / 42.88, h=4096
 * T=8192 23.46 / 22.37 (its 64 bytes per lane stride the L1 lines of four packets where the
 * one-packet lane's two loads cover 1 KB contiguous) -- so only the wide rows. */
/* Hopper seg_deq8 2: MEASURED on the H200 (session 14 calls 1-2, `SL_KQ_TUNE=1 SL_KQ_GRID=1 sluice
 * bench kernels --only dequant_`, kernel us, seg 2 / the table's 4): the FP8 group dequantizer --
 * a lane's 8 code bytes and one fp32 scale per chunk, nothing per CTA to amortize -- streams
 * better on tasks of 2 chunks at every width and T: T=8192 h=2048/4096/7168 13.89/25.92/44.22 vs
 * 14.14/26.46/45.70, T=32768 50.82/99.84/174.17 vs 52.10/102.24/178.24 (call 1 the same at
 * h=2048: 13.76 / 50.85 vs 14.02 / 51.97); seg 1, 8 and 32 slower. The FP4 table dequantizer
 * (its per-CTA table fill amortized over 4-chunk tasks) measured 15.58 / 55.10 us at seg 2 vs
 * 13.41 / 44.96 (T=8192 / 32768 h=2048) and keeps `seg`; the MXFP8 dequantizer (byte scales, no
 * bench row) keeps `seg` too (not measured). */
/* Hopper act8_fast_exp 1: MEASURED on the H200 (session 15 call 2, `sluice bench kernels --only
 * act_silu_fp8 --tokens 1024,8192,32768`, kernel us, expf / ex2 rows): the FP8-out activation was
 * issue-bound (at T=8192 I=2048 it took as long as the bf16-out one, which moves 19 % more bytes);
 * expf's range reduction is ~6 of its ~25 instructions per element. I=2048 T=8192 23.62 / 22.56
 * (84.1 -> 88.0 % of copy), T=32768 84.38 / 80.80; I=4096 43.87 / 42.27 (90.6 -> 94.0 %), 164.77 /
 * 157.44; I=7168 74.53 / 71.55, 285.44 / 272.26; T=1024 3-4 % faster. Blackwell: not measured. */
/* Hopper seg_act8 2: MEASURED on the H200 (session 15 call 3, `SL_KQ_TUNE=1 sluice bench kernels
 * --only act_silu_fp8 --tokens 8192,32768`, with ex2, kernel us, seg 2 / the table's 4): fastest at
 * all six shapes -- T=8192 I=2048/4096/7168 21.86/40.38/69.38 vs 22.59/42.05/71.39 (91.3/98.8/100.7 %
 * of copy), T=32768 79.49/155.68/267.36 vs 80.61/156.90/271.49; seg 1, 8, 32 and the item layout
 * slower, w4 between. Blackwell: not measured (its table has the item layout). */
/* Hopper mx_half 1 (rows of <= SL_KQ_FP4Q_WIDE_CHUNKS chunks), with its swizzled scales staged
 * (swz_stage_fmts' MXFP4 bit applies to this lane only) and the launcher's full-grid point: MEASURED
 * on the H200 (session 27 call 2, `sluice bench kernels --only quant_mxfp4 --tokens 8192,32768`, rows
 * "half" next to the one-packet lane, then with mx_half on under SL_KQ_TUNE=1 SL_KQ_GRID=1; kernel
 * us / events us): T=32768 h=2048 swz one-packet 43.52 / 46.18, half 42.24 / 45.12, half staged
 * 42.02 / 44.03; lin 42.75 / 45.82 -> 41.25 / 44.38; h=4096 swz 85.82 / 88.64 -> 82.40 / 84.93,
 * staged 82.05 / 83.26; lin 85.09 / 87.87 -> 80.58 / 83.39. T=8192: level unstaged (h=2048 swz 12.80
 * / 15.81 vs 13.09 / 15.78), ahead staged (12.61 / 15.52; h=4096 22.27 / 24.90 vs 22.69 / 25.66). Its
 * unroll is 4 (sl_kq_unroll_quant: a step is two chunk pairs) at 6 blocks per SM (40 registers); u2
 * at 8 blocks measured 50.82 and u4 at 8 blocks (36 bytes of spill) 67.68 us at T=32768 h=2048; the
 * resident grid 44.87. The whole-block lane (mx_quad) keeps the wide rows: at h=7168 half ties it
 * (141.06 vs 140.64 swz, 135.65 vs 135.74 lin). Blackwell: not measured. */
/* Hopper gelu_fast_exp 1: MEASURED on the H200 (session 28 call 1, `sluice bench kernels --only act_`, rows "w8" =
 * ex2 next to "w8 tanhf", events % of copy): GELU(tanh)-and-mul into FP8 was issue-bound with tanhf -- T=32768
 * I=2048/4096/7168 77.8/80.4/82.8 % -> 92.1/95.6/98.6 %, T=8192 66.8/74.1/78.5 -> 77.3/87.0/90.8; into bf16
 * 96.4/99.1/100.9 -> 98.9/101.6/103.1 (T=32768), 84.4/92.5/95.8 -> 86.5/94.2/98.1 (T=8192). Blackwell: not
 * measured. */
/* Hopper q8_decode 1: MEASURED on the H200 (session 28 call 3, bench/probes/peer_sweep.py --graph against the
 * Triton group-128 kernels of bench/triton_rows.py, CUDA-graph us; call 2 had them ahead at 41 of 144 graph
 * shapes): the old decode launch -- one warp per block, two items per warp -- left FP8 group quantization and
 * SiLU/GELU-and-mul into FP8 0.67-0.94 of Triton at T <= 128 (quant T=128 H=7168 2.56 vs 1.72 us: 1792 one-warp
 * blocks; T=1 H=2048 1.48 vs 1.21). One item per warp in the item layout, by warps per block:
 *   quant T=1 H=2048 w1 1.32, w2 1.28, w4 1.28, w8 1.31 (u2 w1: the old 1.48); T=16 1.43 / 1.37 / 1.36 / 1.38;
 *     T=128 -, 1.56, 1.46, 1.47; H=7168 T=1 1.34 / 1.28 / 1.28 / 1.28, T=16 1.48 / 1.39 / 1.38 / 1.37, T=128
 *     w4 1.82, w8 1.79 (Triton 1.21 / 1.35 / 2.23, 1.26 / 1.53 / 1.72);
 *   SiLU into FP8 T=1 I=2048 w1 (the one-item kernel) 1.34, w2 1.40, w4 1.39, w8 1.49; T=16 1.45 / 1.47 / 1.46 /
 *     1.55; T=128 1.79 / 1.71 / 1.67 / 1.69; I=7168 T=1 1.38 / 1.38 / 1.38 / 1.47, T=16 1.54 / 1.49 / 1.49 / 1.57,
 *     T=128 w4 2.47, w8 2.48 (Triton 1.34 / 1.50 / 2.41, 1.36 / 1.70 / 2.33); GELU the same within 0.05 us.
 * So below sm_count rows: unroll 1, the item layout, and prefill_warps / 2 warps below SL_KQ_ACT16_HALF_ITEMS items
 * per SM, prefill_warps from there; the FP8-out activation one warp per block (the one-item kernel) below
 * SL_KQ_ACT8_ONE_WARP_ITEMS items per SM. Blackwell: not measured. */
#define SL_KQ_ACT8_ONE_WARP_ITEMS 2
/* Hopper q8_small 256: MEASURED on the H200 (session 29 call 1, `SL_KQ_TUNE_ROWS=... sluice bench kernels --only
 * _fp8`, CUDA-graph us at T=1024; bench/results/2026-12-01-s29-h200-call1/): the prefill launch (8 warps, unroll 2,
 * segments of 4 chunks, 6 blocks per SM) gives T=1024 H=2048 256 blocks -- a third of one resident wave, 16 warps
 * per SM. 4 warps, unroll 1, the item layout, 16 blocks per SM (32 registers: unroll 1 fits them without spilling,
 * ptxas -v, every input dtype and rule, sm_90), prefill -> small:
 *   FP8 group quant H=2048 / 4096 / 7168 (62 / 124 / 217 items per SM) 3.80 -> 3.20, 5.42 -> 5.28, 8.45 -> 7.64;
 *   SiLU into FP8 I=2048 / 4096 / 7168 5.42 -> 4.90, 8.23 -> 7.52, 11.43 -> 11.10;
 *   GELU into FP8 5.52 -> 4.95, 8.25 -> 7.54, but I=7168 11.59 -> 12.02 (GELU's longer chain wants unroll 2 once
 *   the prefill launch fills a wave: its 896 blocks are 1.1 waves), so GELU only below 3/4 of the point;
 *   at T=8192 (496 items per SM at H=2048) the prefill launch stays ahead (quant 14.05 vs 14.53 kernel us for
 *   4 warps, unroll 1, 16 blocks in segments of 4; SiLU within 1 %). Triton's group kernel (bench/triton_rows.py)
 *   took 2.36 / 3.59 / 5.48 us (quant) and 3.61 / 5.93 (SiLU) in session 28 call 5's graph sweep. Blackwell: not
 *   measured. */
#define SL_KQ_Q8_SMALL_GELU(items) ((items) * 3 / 4)
/* Hopper gelu8_blocks 8: MEASURED on the H200 (session 29 call 4, `SL_KQ_TUNE_ROWS=mb8,s2mb8 sluice bench kernels
 * --only _fp8`, kernel us, the table's 6 blocks / 8): with the FP8 IEEE quantizer free of division calls
 * (sl_kq_rcp_rn, sl_qf_div448_tiny) the prefill launch's unroll 2 fits 32 registers without spilling (ptxas -v,
 * every input dtype, sm_90 and sm_100), and GELU into FP8 gains from the 2048 threads: T=8192 I=2048 / 4096 / 7168
 * 24.45 / 43.58 / 70.72 -> 22.08 / 40.90 / 69.89, T=32768 82.98 / 160.61 / 272.61 -> 80.00 / 156.51 / 268.29. SiLU
 * into FP8 moved -0.5..+1.3 % (kept at 6), the FP8 group quantizer -1..+5 % (kept). UE8M0 scales keep the rule (a
 * 24-byte stack frame at 32 registers; not measured). Blackwell: not measured. */
#define SL_KQ_STAGE_FMT(f) (1 << (f))
/* Hopper act16_pack 8: MEASURED on the H200 (session 31 call 4, bench/results/2026-12-01-s31-h200-call4/: the bench's
 * "p16"/"p4" rows, CUDA-graph us, and torch_peers.py's fixed graphs). The one-item decode activation into 16-bit
 * outputs had trailed torch.compile's kernel by 0.01-0.04 us at T=1 (the reason in kernels/act.cu PACK). SiLU T=1
 * I=2048 / 4096 / 7168, 16 / 8 / 4 bytes per lane: 1.14 / 1.10 / 1.11, 1.14 / 1.12 / 1.12, 1.17 / 1.13 / 1.15 (GELU
 * alike); against torch.compile 0.97 -> 1.00-1.02. At T=16 the narrower lane's blocks cost more than its MUFU saves
 * beyond ~2 per SM: I=4096 1.25 (16) / 1.28 (8), I=7168 1.33 / 1.45, while I=2048 (256 blocks at 8 bytes) gained
 * 1.22 -> 1.18; so the table's width applies while its blocks are <= SL_KQ_ACT16_PACK_PER_SM per SM. Blackwell:
 * not measured (its table has no one-item kernel). */
#define SL_KQ_ACT16_PACK_PER_SM 2
/* Hopper q8_line_rows 16: MEASURED on the H200. Session 34 call 8 (bench/probes/fp8_rule_probe.py: fixed CUDA graphs
 * of 100 calls through the peer FFI; bench/results/2026-12-01-s34-h200-call8/), the FP8 IEEE group quantizer's item
 * layout with its hot path straight-line (quant.cu QLINE) against the branchy one, graph us, bf16:
 *   T=1  H=2048 1.265 -> 1.232, H=4096 1.275 -> 1.242, H=7168 1.269 -> 1.271;
 *   T=16 H=2048 1.340 -> 1.307, H=4096 1.364 -> 1.334, H=7168 1.376 -> 1.380;
 *   T=128 H=2048 1.451 -> 1.421-1.426, H=4096 1.592 -> 1.579-1.603, H=7168 1.836 -> 1.876-1.889;
 *   T=1024 (q8_small's launch) H=2048 2.488 -> 2.555-2.560, H=7168 5.774 -> 5.866-5.886.
 * Call 9 (the committed code; `sluice bench kernels --only quant_fp8`, rotated inputs, the table's launch and the
 * "branchy" / "line" comparison row of the same run): T=1 H=2048 1.37 / 1.40, H=4096 1.40 / 1.45, H=7168 1.43 /
 * 1.42 (line); T=16 H=2048 1.45 / 1.46, H=4096 1.46 / 1.50, H=7168 1.53 / 1.52 (line). So a few warps with one item
 * each gain from the shorter chain (its branches' reconvergence points gone), and the extra select, vote and
 * predicated store cost throughput once the SMs hold many items: up to 16 rows at H <= 4096 (H=7168 within
 * 0.01 us either way). Blackwell: not measured. */
#define SL_KQ_Q8_LINE_MAX_HIDDEN 4096
static const sl_kq_arch_cfg_t sl_kq_arch_table[] = {
    {SL_ARCH_HOPPER, 1, 8, 2, 4, 0, 1, 4,
     SL_KQ_STAGE_FMT(SL_QFMT_MXFP8) | SL_KQ_STAGE_FMT(SL_QFMT_MXFP4) | SL_KQ_STAGE_FMT(SL_QFMT_NVFP4), 4, 1, 2, 1, 1, 2,
     1, 1, 1, 256, 8, 8, 16},
    {SL_ARCH_BLACKWELL, 1, 8, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 8, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

static inline const sl_kq_arch_cfg_t *sl_kq_arch_cfg(int arch) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_table;
  while (c->arch && c->arch != arch)
    c++;
  return c;
}
/* Work items in flight per warp for the act and quant kernels: the table's `unroll`, unless a
 * benchmark sweep has set an override (sl_kq_set_unroll_override, `SL_KQ_TUNE=1 sluice bench
 * kernels`); the router keeps the table's value. Not thread-safe: set only by the benchmark
 * between launches. */
void sl_kq_set_unroll_override(int unroll); /* 0: the table */
int sl_kq_unroll(int arch);
/* The same for the activation kernel: act16 (bf16/f16/f32 out) takes the table's unroll_act16. */
int sl_kq_unroll_act(int arch, int act16);
/* The same for the quantizer of format `fmt` (SL_QFMT_*) at segment length `seg` (0: the item
 * layout) on rows of `chunks` chunks: the table's unroll_fp4q for FP4 formats in the segment
 * layout past SL_KQ_FP4Q_WIDE_CHUNKS chunks, and for the NVFP4 quantizer whose lane takes a
 * whole block (`pair` 1: kernels/quant.c decides it, quant.cu QPAIR) and the MXFP4 one whose lane
 * takes half a block (`pair` 2) at every width. */
int sl_kq_unroll_quant(int arch, int fmt, int seg, int chunks, int pair);

/* Segment layout (the table's `seg`, JIT constant SEG of quant.cu / act.cu) for a launch of
 * `warps` warps per block: decode launches (one warp per block) keep 0, so a short row still
 * spreads over many warps; prefill takes the table's value unless an override is set
 * (sl_kq_set_seg_override: the benchmark sweep and the GPU tests, which run both layouts).
 * SL_KQ_SEG_TABLE restores the table. Not thread-safe, as the unroll override. */
#define SL_KQ_SEG_TABLE (-1)
/* The segment length registered as a JIT point next to the table's (so `sluice jit warm`
 * covers the benchmark's comparison rows and a table flip), and the tune sweep's values. */
#define SL_KQ_SEG_POINT 8
void sl_kq_set_seg_override(int seg); /* SL_KQ_SEG_TABLE, 0 (item layout) or chunks per segment */
/* Which of the table's segment lengths a kernel takes: */
#define SL_KQ_SEG_QUANT 0 /* `seg`: the quantizers, the FP4 / MXFP8 dequantizers */
#define SL_KQ_SEG_ACT16 1 /* `seg_act16`: the activation without quantization */
#define SL_KQ_SEG_DEQ8 2  /* `seg_deq8`: the FP8 group dequantizer */
#define SL_KQ_SEG_ACT8 3  /* `seg_act8`: the FP8-out activation */
int sl_kq_seg(int arch, int warps, int kind);
/* The prefill segment lengths to register as JIT points: the table's seg and seg_act16, 0 (the
 * item layout) and SL_KQ_SEG_POINT, each once; returns the count (<= 4). seg_deq8 and seg_act8 are
 * registered by the FP8 dequantizer's and the FP8-out activation's own points (kernels/quant.c,
 * act.c). */
static inline int sl_kq_seg_points(int arch, int segs[4]) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  const int cand[4] = {c->seg, c->seg_act16, 0, SL_KQ_SEG_POINT};
  int n = 0;
  for (int i = 0; i < 4; i++) {
    int seen = 0;
    for (int j = 0; j < n; j++)
      seen |= segs[j] == cand[i];
    if (!seen) segs[n++] = cand[i];
  }
  return n;
}
/* Warp tasks of the segment layout: rows x segments per row (a segment is min(seg, chunks)
 * chunks; the row's last one may be shorter). */
static inline long sl_kq_seg_tasks(long rows, int chunks, int seg) {
  int s = seg < chunks ? seg : chunks;
  return s > 0 ? rows * ((chunks + s - 1) / s) : 0;
}

/* Staged swizzled scales (kernels/quant.cu SWZ_STAGE, kernels/NOTES.md "Staged swizzled
 * scales"): the quantizer's CTA stages its 8 warps' scale bytes in shared memory and stores whole
 * 32-byte sectors of the 128x4 swizzled layout instead of 4-byte pieces. Whether a quantizer of
 * format `fmt` (SL_QFMT_*) on rows of `chunks` chunks wants it: the table's swz_stage_fmts (FP4
 * formats only up to SL_KQ_FP4Q_WIDE_CHUNKS chunks, unless `pair`: the NVFP4 quantizer's whole
 * block per lane, QPAIR, which measured faster staged at every width -- session 13 call 8, T=8192 /
 * 32768 h=7168 93.8 / 97.8 % of copy staged vs 89.2 / 93.9 unstaged; MXFP4 only with its half-block
 * lane, `pair` 2: its one-packet and whole-block lanes measured slower staged), unless
 * sl_kq_set_swz_stage_override forces it on or off (the benchmark's comparison rows, the
 * GPU tests). It applies only where it can (kernels/quant.c): MX/NV formats with swizzled scales
 * in the segment layout (seg > 0) at SL_KQ_SWZ_STAGE_WARPS warps per block (prefill); other
 * launches ignore it. Not thread-safe, as the unroll override. */
#define SL_KQ_SWZ_STAGE_TABLE (-1)
void sl_kq_set_swz_stage_override(int stage); /* SL_KQ_SWZ_STAGE_TABLE (the default), 0: off, 1: on */
int sl_kq_swz_stage(int arch, int fmt, int chunks, int pair);

/* Whether the quantizer of FP4 format `fmt` (SL_QFMT_*) on rows of `chunks` chunks gives each lane a
 * whole block (1; kernels/quant.cu QPAIR: NVFP4 16 elements, MXFP4 32) or, MXFP4 only, half a block
 * (2: two packets, two lanes per block) where the launch allows it (kernels/quant.c: 16-bit inputs,
 * the segment layout, whole groups of chunks per task): the table's nv_pair; for MXFP4 mx_quad past
 * SL_KQ_FP4Q_WIDE_CHUNKS chunks and mx_half up to them; unless sl_kq_set_qpair_override forces it
 * (SL_KQ_QPAIR_TABLE: the table; 0 / 1 / 2: one packet / whole block / half block, 2 meaning 1 for
 * NVFP4, whose half block is one packet's lane pair) -- the benchmark's comparison rows and the GPU
 * tests. Other formats: 0. Not thread-safe, as the unroll override. */
#define SL_KQ_QPAIR_TABLE (-1)
void sl_kq_set_qpair_override(int pair);
int sl_kq_qpair(int arch, int fmt, int chunks);

/* Whether SiLU-and-mul into FP8 takes e^-g by one ex2.approx (kernels/act.cu FASTEXP; the 16-bit
 * outputs always do, fp32 outputs and GELU never): the table's act8_fast_exp unless
 * sl_kq_set_act8_fast_exp_override forces it (SL_KQ_ACT8_EXP_TABLE: the table; 0 / 1: off / on)
 * -- the benchmark's comparison rows and the GPU tests. Not thread-safe, as the unroll override. */
#define SL_KQ_ACT8_EXP_TABLE (-1)
void sl_kq_set_act8_fast_exp_override(int fast);
int sl_kq_act8_fast_exp(int arch);
/* The same for GELU(tanh)-and-mul into 16-bit and FP8 outputs (1 + tanh(z) as 2 / (1 + e^-2z), e^-2z by one
 * ex2.approx; kernels/act.cu FASTEXP): the table's gelu_fast_exp unless sl_kq_set_gelu_fast_exp_override
 * forces it (SL_KQ_ACT8_EXP_TABLE: the table; 0 / 1: tanhf / ex2). Not thread-safe, as the unroll override. */
void sl_kq_set_gelu_fast_exp_override(int fast);
int sl_kq_gelu_fast_exp(int arch);
/* Bytes of gate and of up per lane in the one-item activation from and into 16-bit dtypes (kernels/act.cu PACK):
 * the table's act16_pack (16 where it is 0) where its blocks are <= SL_KQ_ACT16_PACK_PER_SM per SM (kernels/act.c),
 * unless sl_kq_set_act16_pack_override forces 16, 8 or 4 (0: the table) -- the benchmark's comparison rows and the
 * GPU tests; a forced width holds up to the one-item kernel's own bound. Not thread-safe, as the unroll override. */
void sl_kq_set_act16_pack_override(int bytes);
int sl_kq_act16_pack(int arch);
int sl_kq_act16_pack_forced(void); /* 1 while the override is set */

/* Blocks per SM the dequantizer is compiled for (__launch_bounds__; JIT constant DEQ_MIN_BLOCKS,
 * kernels/quant.cu): 0 = the kernel's own rule (the quantizer's MIN_BLOCKS); N > 0 forces N (8: the
 * FP4 table dequantizer's Hopper default of sessions 13-15, with its full-grid point of one wave,
 * kernels/quant.c deq_full_grid_waves). Set only by the benchmark's comparison rows and tests; not
 * thread-safe, as the unroll override. */
void sl_kq_set_deq_blocks_override(int blocks);
int sl_kq_deq_blocks_override(void);
/* The same for the quantizers and the activation (JIT constant MIN_BLOCKS of kernels/quant.cu and
 * act.cu; 0 = their own rule): the tune sweep's "mb" rows. Not thread-safe, as the unroll override. */
void sl_kq_set_min_blocks_override(int blocks);
int sl_kq_min_blocks_override(void);

/* Warps per block for `rows` rows on a device of `sm_count` SMs: the table's decode or prefill
 * value, unless a benchmark sweep has set an override for the act and quant kernels
 * (sl_kq_set_warps_override; not the router). Not thread-safe, as the unroll override. */
void sl_kq_set_warps_override(int warps); /* 0: the table; else 1..32 */
int sl_kq_warps(int arch, int sm_count, long rows);
static inline int sl_kq_table_warps(int arch, int sm_count, long rows) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  return rows < sm_count ? c->decode_warps : c->prefill_warps;
}

/* The same for the activation with a 16-bit output (act16) over `items` warp items: below
 * sm_count rows it takes the prefill warps once items >= the table's act16_wide_items per SM
 * (many rows of many chunks: T=128 at I >= 2048), half of them below SL_KQ_ACT16_HALF_ITEMS
 * items per SM, unless the override is set. */
int sl_kq_warps_act16(int arch, int sm_count, long rows, long items);

/* The decode launch of the quantizers and the FP8-out activation (the table's q8_decode, above): below sm_count rows,
 * where no warps or segment override is set, fills *warps (for `items` warp items; one warp per block below
 * `one_warp_items` items per SM, 0: never), *unroll (1, or the unroll override) and *seg (0, the item layout) and
 * returns true; false otherwise (the caller takes sl_kq_warps, its unroll and segment rules). */
bool sl_kq_q8_decode(int arch, int sm_count, long rows, long items, int one_warp_items, int *warps, int *unroll,
                     int *seg);
/* The small prefill launch of the FP8 group quantizer and the FP8-out activation (the table's q8_small, above): from
 * sm_count rows below `items_per_sm` warp items per SM (the caller passes the table's q8_small, or
 * SL_KQ_Q8_SMALL_GELU of it), where no warps, unroll or segment override is set, fills *warps (prefill_warps / 2),
 * *unroll (1), *seg (0, the item layout) and *min_blocks (the blocks of *warps that fill 2048 threads per SM: the
 * kernel's MIN_BLOCKS) and returns true; false otherwise (the caller takes its prefill launch). */
bool sl_kq_q8_small(int arch, int sm_count, long rows, long items, long items_per_sm, int *warps, int *unroll, int *seg,
                    int *min_blocks);
/* Whether the FP8 group quantizer's decode launch (sl_kq_q8_decode) takes the straight-line hot path (quant.cu QLINE):
 * the table's q8_line_rows and SL_KQ_Q8_LINE_MAX_HIDDEN bound `rows` and `hidden`, unless sl_kq_set_q8_line_override
 * forces it off (0) or on (1) -- the benchmark's comparison rows and the GPU tests; SL_KQ_Q8_LINE_TABLE: the table.
 * The caller checks the kernel's conditions (IEEE scales, 16-bit inputs, whole 256-element chunks). Not thread-safe,
 * as the other overrides. */
#define SL_KQ_Q8_LINE_TABLE (-1)
void sl_kq_set_q8_line_override(int line);
bool sl_kq_q8_line(int arch, long rows, int hidden);
/* That launch itself, whatever the shape and the overrides (the JIT points register it): false where the arch's table
 * has no q8_small. */
bool sl_kq_q8_small_launch(int arch, int *warps, int *unroll, int *seg, int *min_blocks);
/* The resident waves past which sl_kq_launch gives every group of items its own block:
 * SL_KQ_FULL_GRID_WAVES, unless a benchmark sweep has set an override (0: the default). */
void sl_kq_set_full_grid_waves_override(int waves);

/* Launch `k` with a grid no larger than the device keeps resident (the kernels loop over
 * their work items grid-stride): blocks = min(ceil(items / (warps * unroll)), resident).
 * The occupancy query is memoized per kernel (kernels/kq_launch.c): decode launches are
 * host-latency bound and the answer never changes for a loaded kernel. */
sl_status_t sl_kq_launch(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, bool pdl,
                         sl_stream_t *stream, void **args);
/* The same with the full-grid point at `waves` resident waves (0: SL_KQ_FULL_GRID_WAVES), for a
 * kernel compiled for more blocks per SM than the point was measured at; the benchmark's override
 * (sl_kq_set_full_grid_waves_override) still wins. */
sl_status_t sl_kq_launch_waves(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, int waves, bool pdl,
                               sl_stream_t *stream, void **args);
/* A launch as a programmatic dependent (the `pdl` argument of sl_act, sl_quant, sl_dequant, sl_router) where the
 * arch has it (sm_90+): its spec gets the JIT constant PDL=1 (kernels/moe_pdl.cuh sl_pdl_entry), the launch
 * the attribute (pass the result as sl_kq_launch's pdl). */
bool sl_kq_pdl(bool pdl, int arch);
sl_status_t sl_kq_pdl_define(sl_jit_spec_t *spec, bool pdl, int arch);

#endif
#endif
