/* Topology (hwloc): this rank's GPU, nearest NIC, NUMA node and cpuset; optional binding. */
#ifndef SL_TOPO_H
#define SL_TOPO_H

#include <stdbool.h>

#include "sl_device.h"
#include "sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int gpu;                /* CUDA ordinal, -1 on the CPU backend */
  char gpu_pci[32];       /* "0000:19:00.0" or "" */
  char nic[64];           /* ibverbs device name ("mlx5_0") or OS name; "" if none */
  char nic_pci[32];
  int nic_distance;       /* hops to the GPU's common ancestor; -1 unknown */
  int numa_node;          /* of the GPU if known, else of the rank's cpuset; -1 unknown */
  char cpuset[256];       /* hwloc list syntax, e.g. "0-15" */
  bool bound;             /* SL_BIND=1 applied */
  int num_numa_nodes;
  int num_cores;
} sl_topo_t;

/* Discover this rank's placement. Graceful without GPU or NIC (fields left empty). */
sl_status_t sl_topo_discover(const sl_device_info_t *dev, sl_topo_t *topo);
/* Bind the calling thread's CPU and memory to topo->numa_node (SL_BIND=1). */
sl_status_t sl_topo_bind(sl_topo_t *topo);
/* Environment for UCX naming the NIC, e.g. "mlx5_0:1"; "" when no NIC is known. */
void sl_topo_ucx_net_devices(const sl_topo_t *topo, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
