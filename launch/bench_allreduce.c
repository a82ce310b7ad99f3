/* `sluice bench allreduce`: placeholder until issue 5 (all-reduce) lands. */
#include <stdio.h>

#include "sl_cmd.h"

int sl_cmd_bench_allreduce(sl_runtime_t *rt, int argc, char **argv) {
  if (rt->boot.rank == 0) fprintf(stderr, "sluice bench allreduce: not built yet (issue 5 (all-reduce))\n");
  return 2;
}
