/* `sluice bench kernels`, quantization part: placeholder until helper kquant's benches land. */
#include <stdio.h>

#include "bench_kernels.h"

sl_status_t sl_bench_kernels_quant(sl_bench_t *b) {
  if (b->rt->boot.rank == 0) printf("\n## quantization, activations, router\nquant benches not built\n");
  return SL_OK;
}
