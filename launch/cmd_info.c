/* `sluice info`: build, configuration, device, topology and JIT status of this rank. */
#include <stdio.h>
#include <string.h>

#include "sl_cmd.h"

int sl_cmd_info(sl_runtime_t *rt, int argc, char **argv) {
  int env = argc > 1 && strcmp(argv[1], "--env") == 0;
  if (rt->boot.rank != 0) return 0;
  const sl_device_info_t *d = sl_device_info(rt->dev);
  printf("sluice %s\n", SLUICE_VERSION);
#ifdef SLUICE_HAVE_CUDA
  printf("  build       CUDA backend, NVRTC %d", sl_jit_nvrtc_version());
#else
  printf("  build       CPU backend only");
#endif
#ifdef SLUICE_HAVE_UCX
  printf(", UCX");
#endif
#ifdef SLUICE_HAVE_IBVERBS
  printf(", ibverbs");
#endif
  printf("\n  ranks       %d on %d node(s)%s\n", rt->boot.size, rt->boot.num_nodes,
         rt->boot.simulated_nodes ? " (simulated)" : "");
  printf("  device      %s: %s%s%s\n", d->backend == SL_BACKEND_CUDA ? "cuda" : "cpu", d->name,
         d->backend == SL_BACKEND_CUDA ? " sm_" : "", "");
  if (d->backend == SL_BACKEND_CUDA)
    printf("              sm_%d, %d SMs, %.1f GiB, pci %s\n", d->arch, d->sm_count, d->total_mem / 1073741824.0,
           d->pci_bus_id);
  else if (sl_device_cuda_unavailable_reason()[0])
    printf("              (no GPU: %s)\n", sl_device_cuda_unavailable_reason());
  printf("  topology    numa %d of %d, cpus %s, nic %s\n", rt->topo.numa_node, rt->topo.num_numa_nodes,
         rt->topo.cpuset, rt->topo.nic[0] ? rt->topo.nic : "none");
  printf("  jit cache   %s%s\n", rt->config.cache_dir, rt->config.jit_cache ? "" : " (disabled)");
  if (env) {
    printf("\nconfiguration (environment):\n");
    for (const sl_config_var_t *v = sl_config_vars(); v->name; v++)
      printf("  %-18s %-34s default %s\n      %s\n", v->name, v->values, v->default_value, v->meaning);
  }
  return 0;
}
