/* Host-only launch-shape choice shared by the quant, act and router kernels (kernels/quant.c,
 * act.c, router.c): the per-arch table of warps per block and the resident-grid rule. */
#ifndef SL_KQ_LAUNCH_H
#define SL_KQ_LAUNCH_H

/* Past this many resident waves of work, launch one block per group of items. */
#define SL_KQ_FULL_GRID_WAVES 4
#ifndef __CUDACC_RTC__

#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

/* Per-arch warps per block (compile-time constants of the kernels).
 * decode (rows < SMs): one warp per block, so the few rows spread over as many SMs as
 *   possible and no warp waits for a sibling's rows; latency is one row's load + store.
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
               * increments and the per-warp prologue is paid once per N chunks. 0 until a GPU
               * run (`SL_KQ_TUNE=1 sluice bench kernels`, rows w8u2s<N>) shows N faster. */
} sl_kq_arch_cfg_t;

static const sl_kq_arch_cfg_t sl_kq_arch_table[] = {
    {SL_ARCH_HOPPER, 1, 8, 2, 0},
    {SL_ARCH_BLACKWELL, 1, 8, 2, 0},
    {0, 1, 8, 2, 0},
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
int sl_kq_seg(int arch, int warps);
/* The prefill segment lengths to register as JIT points: the table's and SL_KQ_SEG_POINT
 * (one entry when equal); returns the count. */
static inline int sl_kq_seg_points(int arch, int segs[2]) {
  int n = 0;
  segs[n++] = sl_kq_arch_cfg(arch)->seg;
  if (segs[0] != SL_KQ_SEG_POINT) segs[n++] = SL_KQ_SEG_POINT;
  return n;
}
/* Warp tasks of the segment layout: rows x segments per row (a segment is min(seg, chunks)
 * chunks; the row's last one may be shorter). */
static inline long sl_kq_seg_tasks(long rows, int chunks, int seg) {
  int s = seg < chunks ? seg : chunks;
  return s > 0 ? rows * ((chunks + s - 1) / s) : 0;
}

/* Warps per block for `rows` rows on a device of `sm_count` SMs. */
static inline int sl_kq_warps(int arch, int sm_count, long rows) {
  const sl_kq_arch_cfg_t *c = sl_kq_arch_cfg(arch);
  return rows < sm_count ? c->decode_warps : c->prefill_warps;
}

/* Launch `k` with a grid no larger than the device keeps resident (the kernels loop over
 * their work items grid-stride): blocks = min(ceil(items / (warps * unroll)), resident).
 * The occupancy query is memoized per kernel (kernels/kq_launch.c): decode launches are
 * host-latency bound and the answer never changes for a loaded kernel. */
sl_status_t sl_kq_launch(sl_device_t *dev, sl_kernel_t *k, int warps, int unroll, long items, sl_stream_t *stream,
                         void **args);

#endif
#endif
