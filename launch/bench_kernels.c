/* `sluice bench kernels`: placeholder until issue 3 (kernel library) lands. */
#include <stdio.h>

#include "sl_cmd.h"

int sl_cmd_bench_kernels(sl_runtime_t *rt, int argc, char **argv) {
  if (rt->boot.rank == 0) fprintf(stderr, "sluice bench kernels: not built yet (issue 3 (kernel library))\n");
  return 2;
}
