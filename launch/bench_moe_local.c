/* `sluice bench moe-local`: placeholder until issue 4 (local MoE layer) lands. */
#include <stdio.h>

#include "sl_cmd.h"

int sl_cmd_bench_moe_local(sl_runtime_t *rt, int argc, char **argv) {
  if (rt->boot.rank == 0) fprintf(stderr, "sluice bench moe-local: not built yet (issue 4 (local MoE layer))\n");
  return 2;
}
