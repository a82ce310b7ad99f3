/* The `sluice` command: info, selfcheck, jit, bench. Run under mpirun/srun or alone. */
#include <stdio.h>
#include <string.h>

#include "sl_cmd.h"

static const struct {
  const char *name;
  sl_cmd_fn fn;
  const char *help;
} commands[] = {
    {"info", sl_cmd_info, "print this rank's runtime: build, configuration, device, topology, JIT"},
    {"selfcheck", sl_cmd_selfcheck, "multi-rank self-check: ranks, nodes, topology, backend, JIT (use under mpirun)"},
    {"jit", sl_cmd_jit, "jit list|clear|warm [--arch N]: inspect and fill the compiled-kernel cache"},
};

static const struct {
  const char *name;
  sl_cmd_fn fn;
  const char *help;
} benches[] = {
    {"kernels", sl_cmd_bench_kernels, "RMSNorm, QK-norm, activations, quantization, router, embedding"},
    {"moe-local", sl_cmd_bench_moe_local, "one-GPU MoE dispatch, combine and layer"},
    {"allreduce", sl_cmd_bench_allreduce, "all-reduce sweep 8 B .. 256 MiB, NCCL alongside"},
    {"moe", sl_cmd_bench_moe, "multi-rank MoE dispatch/combine (add --nodes-sim for simulated nodes)"},
};

static void usage(void) {
  fprintf(stderr, "usage: sluice <command> [args]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(stderr, "  bench      bench <what>:\n");
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    fprintf(stderr, "    %-10s %s\n", benches[i].name, benches[i].help);
  fprintf(stderr, "\nConfiguration comes from SL_* environment variables (`sluice info --env`).\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  sl_cmd_fn fn = NULL;
  int sub = 1;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) fn = commands[i].fn;
  if (!fn && strcmp(argv[1], "bench") == 0 && argc >= 3) {
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
      if (strcmp(argv[2], benches[i].name) == 0) fn = benches[i].fn;
    sub = 2;
  }
  if (!fn) {
    fprintf(stderr, "sluice: unknown command '%s%s%s'\n\n", argv[1], sub == 2 ? " " : "", sub == 2 ? argv[2] : "");
    usage();
    return 2;
  }
  sl_runtime_t rt;
  sl_status_t s = sl_runtime_init(&argc, &argv, &rt);
  if (s != SL_OK) {
    fprintf(stderr, "sluice: start-up failed: %s: %s\n", sl_status_str(s), sl_last_error());
    return 1;
  }
  int rc = fn(&rt, argc - sub, argv + sub);
  sl_runtime_finalize(&rt);
  return rc;
}
