/* RMSNorm, optionally fused with a residual add:  y = x / sqrt(mean(x^2) + eps) * (bias + w).
 * Fused:  residual = x + residual (stored in the residual dtype);  y = norm(residual).
 * One entry for both backends (sl_rmsnorm) and the CPU reference (sl_rmsnorm_cpu).
 * The row-to-thread layout macros below are shared by the host and kernels/rmsnorm.cu. */
#ifndef SL_RMSNORM_H
#define SL_RMSNORM_H

#include "kernels/sl_dtype.h"

/* Sizes the kernels are built for: any multiple of 8 in [64, 16384] (the design range is
 * 512..16384; 64..504 is allowed so per-head norms can use it as a baseline). */
#define SL_RMSNORM_MIN_HIDDEN 64
#define SL_RMSNORM_MAX_HIDDEN 16384
/* Each thread keeps at most ELTS elements of its row in registers (16-byte packets): 8, 16 or
 * 32, a JIT constant (the point's `elts`). 32 was the only layout up to v2 (4 bf16 packets in
 * flight per thread); 16 is a Triton row kernel's at h = 2048/4096 (4 or 8 warps per row). */
#define SL_RMSNORM_ELTS_PER_THREAD 32 /* the largest ELTS (and the v2 layout) */
/* Warps that share one row at ELTS elements per thread: the fewest that keep <= ELTS elements
 * per thread (ELTS 32: 1 warp up to 1024, 4 at 4096, 7 at 7168, 16 at 16384; ELTS 16: 4 at
 * 2048, 14 at 7168). Beyond one warp the row's sum of squares crosses warps through one float
 * per warp in shared memory. At most 32 (so ELTS 8 serves hidden <= 8192). */
#define SL_RMSNORM_ROW_WARPS_E(hidden, elts) (((hidden) + 32 * (elts) - 1) / (32 * (elts)))
#define SL_RMSNORM_ROW_WARPS(hidden) SL_RMSNORM_ROW_WARPS_E(hidden, SL_RMSNORM_ELTS_PER_THREAD)

#ifndef __CUDACC_RTC__
#include <stdbool.h>

#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"

typedef struct {
  const void *x;      /* [rows, hidden] in_dtype */
  void *y;            /* [rows, hidden] out_dtype; must not overlap x or residual */
  void *residual;     /* fused variant: [rows, hidden] res_dtype, read and overwritten by
                         x + residual; NULL for the plain norm */
  const void *weight; /* [hidden] w_dtype */
  int rows, hidden;
  sl_dtype_t in_dtype, out_dtype, w_dtype, res_dtype; /* each f32, bf16 or f16 */
  float eps;                                          /* compile-time constant of the kernel */
  float weight_bias; /* compile-time: scale is (weight_bias + w); 1.0 for Gemma, 0.0 else */
  int warps;         /* warps per block, a multiple of the row's warps at `elts`; 0 = the
                        per-architecture table (tune with `sluice bench kernels --tune`) */
  int elts;          /* most elements of a row per thread: 8, 16 or 32 (sets the row's warps,
                        SL_RMSNORM_ROW_WARPS_E); 0 = the table's, or 32 when warps is given */
  int weight_regs;   /* SL_RMSNORM_WEIGHT_AUTO (0: the table's), _REGS (kept in registers,
                        loaded once per block) or _RELOAD (re-read per row: more resident warps) */
  int grid_policy;   /* SL_RMSNORM_GRID_AUTO (0), _RESIDENT (a grid capped at the resident
                        blocks that strides over rows) or _FULL (one block per group of rows) */
  int fast_rsqrt;    /* SL_RMSNORM_RSQ_AUTO (0: on at decode, rows < SMs), _OFF (1/sqrtf of the
                        mean, as the CPU reference) or _ON (rsqrtf of mean * (1/hidden): <= 3 fp32
                        ulp from the reference's factor, far below a 16-bit output's ulp) */
  int row_loop;      /* SL_RMSNORM_LOOP_AUTO (0: the one-row kernel at decode, and at prefill on
                        full grids of one row per block of the plain norm at hidden <= 4096, where
                        it measured faster), _ON (the grid-stride row loop always; a comparison),
                        _OFF (the one-row kernel wherever the launch gives a block per row) */
  bool pdl;          /* as sl_act_args_t's (kernels/act.h) */
} sl_rmsnorm_args_t;

/* Grid policies. AUTO takes the table's (kernels/rmsnorm.c: per hidden size, variant and row
 * count). Measured on the H200 (bench/results/2026-11-29-h200-final/rmsnorm-grid.txt): many
 * short-lived blocks beat a resident strided grid by 3-8 points of copy bandwidth at T >= 8192
 * (e.g. h=2048 T=32768: 91.4% vs 84.3%), while at T = 1024 the two are within noise or the
 * resident grid wins. */
enum { SL_RMSNORM_GRID_AUTO = 0, SL_RMSNORM_GRID_RESIDENT = 1, SL_RMSNORM_GRID_FULL = 2 };
/* Where the weight lives (JIT constant WREG; see kernels/rmsnorm.cu "Occupancy"). */
enum { SL_RMSNORM_WEIGHT_AUTO = 0, SL_RMSNORM_WEIGHT_REGS = 1, SL_RMSNORM_WEIGHT_RELOAD = 2 };
/* The row's factor (JIT constant RSQ; see kernels/rmsnorm.cu "The row's factor"). */
enum { SL_RMSNORM_RSQ_AUTO = 0, SL_RMSNORM_RSQ_OFF = 1, SL_RMSNORM_RSQ_ON = 2 };
/* The kernel's shape (JIT constant ONEROW; see kernels/rmsnorm.cu "One row, one block"). */
enum { SL_RMSNORM_LOOP_AUTO = 0, SL_RMSNORM_LOOP_ON = 1, SL_RMSNORM_LOOP_OFF = 2 };

/* The compile-time point of one kernel. */
typedef struct {
  int hidden;
  sl_dtype_t in_dtype, out_dtype, w_dtype, res_dtype;
  float eps, weight_bias;
  bool residual;
  int elts;  /* elements per thread (JIT constant ELTS): 8, 16 or 32 */
  bool wreg; /* weight kept in registers (JIT constant WREG) */
  bool rsq;  /* the factor by rsqrtf (JIT constant RSQ) */
  bool one_row; /* one row per block, a block per row: no row loop (JIT constant ONEROW) */
  int warps; /* a multiple of SL_RMSNORM_ROW_WARPS_E(hidden, elts), <= 32 */
  bool full_grid; /* launch shape, not a JIT constant: one block per group of rows */
  bool pdl;       /* JIT constant PDL and the launch attribute (the args' pdl on sm_90+; set by the launcher) */
} sl_rmsnorm_point_t;

sl_status_t sl_rmsnorm(sl_device_t *dev, const sl_rmsnorm_args_t *args, sl_stream_t *stream);
/* CPU reference (also the CPU backend); host pointers. */
sl_status_t sl_rmsnorm_cpu(const sl_rmsnorm_args_t *args);

/* Check arguments (sizes, dtypes, alignment) without running anything. */
sl_status_t sl_rmsnorm_validate(const sl_rmsnorm_args_t *args);
/* The point (and so the kernel) sl_rmsnorm would use for args on a device of `arch` with
 * `sm_count` SMs: warps from args->warps or the table. */
sl_status_t sl_rmsnorm_choose(const sl_rmsnorm_args_t *args, int arch, int sm_count, sl_rmsnorm_point_t *pt);
/* Warps-per-block candidates for a hidden size at 32 elements per thread (row_warps x 1, 2, 4,
 * ... <= 32); returns the count. */
int sl_rmsnorm_warp_candidates(int hidden, int out[8]);
/* Warps-per-block candidates at `elts` elements per thread (8, 16, 32): row_warps x 1, 2, 4, 8
 * while <= 32; 0 when a row needs more than 32 warps at that elts. What --tune sweeps. */
int sl_rmsnorm_warp_candidates_e(int hidden, int elts, int out[8]);
sl_status_t sl_rmsnorm_spec(sl_jit_spec_t *spec, const sl_rmsnorm_point_t *pt);
/* Every point registered for `sluice jit warm` and the jit tests. */
sl_status_t sl_rmsnorm_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);
#endif

#endif
