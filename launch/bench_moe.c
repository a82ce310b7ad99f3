/* `sluice bench moe`: placeholder until issue 6 (multi-rank MoE) lands. */
#include <stdio.h>

#include "sl_cmd.h"

int sl_cmd_bench_moe(sl_runtime_t *rt, int argc, char **argv) {
  if (rt->boot.rank == 0) fprintf(stderr, "sluice bench moe: not built yet (issue 6 (multi-rank MoE))\n");
  return 2;
}
