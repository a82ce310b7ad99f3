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
} sl_kq_arch_cfg_t;

static const sl_kq_arch_cfg_t sl_kq_arch_table[] = {
    {SL_ARCH_HOPPER, 1, 8, 2},
    {SL_ARCH_BLACKWELL, 1, 8, 2},
    {0, 1, 8, 2},
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
