/* `sluice selfcheck`: every rank reports placement, backend and a JIT probe; rank 0
 * prints the table and the verdict. The main job until the engine exists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sl_probe.h"
#include "sl_cmd.h"

typedef struct {
  int rank, node, local_rank, local_size;
  char host[64];
  char backend[8];
  char device[64];
  char nic[32];
  int numa;
  char cpus[48];
  int probe_ok;       /* 1 pass, 0 fail */
  int probe_gpu;      /* ran on the GPU */
  int jit_state;      /* 0 not tried, 1 hit, 2 compiled, -1 failed, -2 unavailable */
  double jit_ms;
  char error[96];
} rank_report_t;

static void jit_probe_cpu(rank_report_t *r) {
  /* No GPU: still show that NVRTC compiles the probe for Hopper (and caches it). */
  if (!sl_jit_available()) {
    r->jit_state = -2;
    return;
  }
  sl_jit_spec_t spec;
  void *cubin = NULL;
  size_t size;
  sl_jit_result_t jr;
  if (sl_probe_spec(&spec, 0.5f) != SL_OK || sl_jit_compile(&spec, SL_ARCH_HOPPER, &cubin, &size, &jr) != SL_OK) {
    r->jit_state = -1;
    snprintf(r->error, sizeof r->error, "%s", sl_last_error());
    return;
  }
  free(cubin);
  r->jit_state = jr.cache_hit ? 1 : 2;
  r->jit_ms = jr.compile_ms;
}

int sl_cmd_selfcheck(sl_runtime_t *rt, int argc, char **argv) {
  rank_report_t me;
  memset(&me, 0, sizeof me);
  const sl_device_info_t *d = sl_device_info(rt->dev);
  me.rank = rt->boot.rank;
  me.node = rt->boot.node;
  me.local_rank = rt->boot.local_rank;
  me.local_size = rt->boot.local_size;
  snprintf(me.host, sizeof me.host, "%s", rt->boot.hostname);
  snprintf(me.backend, sizeof me.backend, "%s", d->backend == SL_BACKEND_CUDA ? "cuda" : "cpu");
  snprintf(me.device, sizeof me.device, "%s", d->name);
  snprintf(me.nic, sizeof me.nic, "%s", rt->topo.nic[0] ? rt->topo.nic : "-");
  me.numa = rt->topo.numa_node;
  snprintf(me.cpus, sizeof me.cpus, "%s", rt->topo.cpuset);

  sl_probe_result_t pr;
  sl_status_t s = sl_probe_run(rt->dev, 100003, 1.5f, 0.25f, &pr);
  me.probe_ok = s == SL_OK && pr.mismatches == 0;
  me.probe_gpu = pr.ran_on_gpu;
  if (s != SL_OK) snprintf(me.error, sizeof me.error, "%s", sl_last_error());
  if (d->backend == SL_BACKEND_CUDA) {
    me.jit_state = s == SL_OK ? (pr.cache_hit ? 1 : 2) : -1;
    me.jit_ms = pr.compile_ms;
  } else if (rt->boot.rank == 0) {
    jit_probe_cpu(&me);
  }

  /* MPI sanity: a sum every rank can predict. */
  long sum = me.rank, want = (long)rt->boot.size * (rt->boot.size - 1) / 2;
  int mpi_ok = MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG, MPI_SUM, rt->boot.world) == MPI_SUCCESS && sum == want;

  rank_report_t *all = rt->boot.rank == 0 ? calloc((size_t)rt->boot.size, sizeof *all) : NULL;
  MPI_Gather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, 0, rt->boot.world);
  int fail = !mpi_ok;
  if (rt->boot.rank == 0) {
    printf("sluice selfcheck: %d rank(s) on %d node(s)%s, MPI allreduce %s\n", rt->boot.size, rt->boot.num_nodes,
           rt->boot.simulated_nodes ? " (simulated)" : "", mpi_ok ? "ok" : "FAILED");
    printf("%-5s %-5s %-6s %-16s %-5s %-28s %-8s %-5s %-12s %-6s %s\n", "rank", "node", "local", "host", "back",
           "device", "nic", "numa", "cpus", "probe", "jit");
    for (int i = 0; i < rt->boot.size; i++) {
      rank_report_t *r = &all[i];
      char jit[64];
      switch (r->jit_state) {
      case 1: snprintf(jit, sizeof jit, "cache hit"); break;
      case 2: snprintf(jit, sizeof jit, "compiled %.0f ms", r->jit_ms); break;
      case -1: snprintf(jit, sizeof jit, "FAILED"); break;
      case -2: snprintf(jit, sizeof jit, "no NVRTC in build"); break;
      default: snprintf(jit, sizeof jit, "-"); break;
      }
      printf("%-5d %-5d %d/%-4d %-16.16s %-5s %-28.28s %-8.8s %-5d %-12.12s %-6s %s%s\n", r->rank, r->node,
             r->local_rank, r->local_size, r->host, r->backend, r->device, r->nic, r->numa, r->cpus,
             r->probe_ok ? (r->probe_gpu ? "gpu ok" : "cpu ok") : "FAIL", jit, r->jit_state == -1 ? "" : "");
      if (!r->probe_ok || r->jit_state == -1) {
        fail = 1;
        printf("      error: %s\n", r->error);
      }
    }
    if (strcmp(all[0].backend, "cpu") == 0 && all[0].jit_state > 0)
      printf("JIT: NVRTC %d compiled the probe for sm_%d without a GPU (%s)\n", sl_jit_nvrtc_version(),
             SL_ARCH_HOPPER, all[0].jit_state == 1 ? "cache hit" : "cache miss, now cached");
    printf("selfcheck %s\n", fail ? "FAILED" : "passed");
    free(all);
  }
  MPI_Bcast(&fail, 1, MPI_INT, 0, rt->boot.world);
  return fail ? 1 : 0;
}
