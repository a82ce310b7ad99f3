/* `sluice bench kernels`: the pieces that live in other files (quantization, activations and
 * router benches, launch/bench_quant.c) and are called from launch/bench_kernels.c. */
#ifndef SL_BENCH_KERNELS_H
#define SL_BENCH_KERNELS_H

#include "sl_bench.h"

/* Activation, quantization and router rows, printed after the norm rows (same ceilings). */
sl_status_t sl_bench_kernels_quant(sl_bench_t *b);

#endif
