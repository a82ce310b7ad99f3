/* Grid barrier state and the device error record: plain-C layout shared by the host and
 * the kernels that use kernels/grid_barrier.cuh (one 16-byte record the host can read). */
#ifndef SL_GRID_BARRIER_H
#define SL_GRID_BARRIER_H

#ifndef __CUDACC_RTC__
#include <stdint.h>
#else
typedef int int32_t; /* NVRTC has no <stdint.h>; identical redefinitions are legal C++ */
typedef unsigned int uint32_t;
#endif

/* What a kernel found wrong, written once (first writer wins the CAS on `code`) and read
 * by the host after the launch completes. The meaning of a, b, c depends on the code. */
typedef enum {
  SL_DEV_ERR_NONE = 0,
  SL_DEV_ERR_TIMEOUT = 1,  /* a = block, b = arrivals seen (low bits), c = blocks expected */
  SL_DEV_ERR_RANGE = 2,    /* a = token, b = expert id, c = number of experts */
  SL_DEV_ERR_CAPACITY = 3, /* a = expert, b = tokens routed to it, c = capacity */
  SL_DEV_ERR_NUMERIC = 4,  /* a = token, b = block of the row, c = block size */
  SL_DEV_ERR_PIPE_TIMEOUT = 5, /* a shared-memory pipeline (bulk copies + mbarriers) stalled:
                                * a = block, b = stage use, c = 0 data wait / 1 release wait */
  SL_DEV_ERR_POLL_TIMEOUT = 6, /* values published by other blocks never all came (the decode
                                * layer's router logits): a = block, b = values seen, c = expected */
} sl_dev_error_code_t;

typedef struct {
  int32_t code;
  int32_t a, b, c;
} sl_dev_error_t;

/* The barrier's global state: one word. Bit 31 is the epoch (phase), bits 0..30 count the
 * arrivals of the current phase. Zero-initialise once; it returns to "count 0" after every
 * completed barrier, so it never needs resetting between launches (only after a timeout). */
typedef struct {
  uint32_t word;
  uint32_t reserved[3];
  sl_dev_error_t error;
} sl_grid_barrier_state_t;

#define SL_GRID_BARRIER_EPOCH_BIT 0x80000000u

#ifndef __CUDACC_RTC__
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"
#include "runtime/sl_status.h"

/* Turn a device error record into a status with its message (SL_OK when code is NONE);
 * `what` names the operation ("moe dispatch"). */
sl_status_t sl_dev_error_status(const sl_dev_error_t *e, const char *what);

/* The barrier benchmark kernel: `blocks` blocks (each 32 threads) doing `rounds` barriers. */
sl_status_t sl_grid_barrier_bench_spec(sl_jit_spec_t *spec);
/* Run it on `state` (device memory, zeroed by the caller once): a checked launch, then a
 * timed barrier-only launch; *us_per_barrier is the timed kernel's time / rounds. Returns
 * SL_ERR_TIMEOUT if a barrier timed out, SL_ERR_INTERNAL if the kernel's own check (every block sees its neighbour's pre-barrier write) failed.
 * For tests: absent_block >= 0 makes that block skip the barriers (the others must time
 * out after timeout_ms; 0 = SL_TIMEOUT_MS); the state is zeroed again afterwards. */
sl_status_t sl_grid_barrier_bench(sl_device_t *dev, sl_grid_barrier_state_t *state, int blocks, int rounds,
                                  int absent_block, long timeout_ms, sl_stream_t *stream, double *us_per_barrier);
/* The same for polling variant `variant` of kernels/grid_barrier.cuh (1: the default, acquire
 * polls; 0: relaxed polls + fence) or, variant 2, cooperative_groups' grid.sync (the ceiling, for
 * the benchmark's comparison rows; no absent block: it cannot time out). */
sl_status_t sl_grid_barrier_bench_variant_spec(int variant, sl_jit_spec_t *spec);
sl_status_t sl_grid_barrier_bench_variant(sl_device_t *dev, sl_grid_barrier_state_t *state, int variant, int blocks,
                                          int rounds, int absent_block, long timeout_ms, sl_stream_t *stream,
                                          double *us_per_barrier);
sl_status_t sl_grid_barrier_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);
#endif

#endif
