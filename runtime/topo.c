/* Topology with hwloc: the GPU's PCI place, the nearest NIC, the NUMA node and cpuset. */
#include <hwloc.h>
#include <stdio.h>
#include <string.h>

#include "sl_log.h"
#include "sl_topo.h"

#ifdef SLUICE_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

static hwloc_topology_t topo_handle;

static sl_status_t load(void) {
  if (topo_handle) return SL_OK;
  if (hwloc_topology_init(&topo_handle) != 0) return SL_ERR(SL_ERR_INTERNAL, "hwloc_topology_init failed");
  hwloc_topology_set_io_types_filter(topo_handle, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo_handle) != 0) {
    hwloc_topology_destroy(topo_handle);
    topo_handle = NULL;
    return SL_ERR(SL_ERR_INTERNAL, "hwloc_topology_load failed");
  }
  return SL_OK;
}

/* Is `name` an ibverbs device here? Without libibverbs we trust hwloc's name. */
static int is_verbs_device(const char *name) {
#ifdef SLUICE_HAVE_IBVERBS
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  int found = 0;
  for (int i = 0; list && i < n; i++)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) found = 1;
  if (list) ibv_free_device_list(list);
  return found;
#else
  (void)name;
  return 1;
#endif
}

static int depth_of_common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t c = hwloc_get_common_ancestor_obj(topo_handle, a, b);
  return c ? c->depth : -1;
}

sl_status_t sl_topo_discover(const sl_device_info_t *dev, sl_topo_t *t) {
  memset(t, 0, sizeof *t);
  t->gpu = dev->backend == SL_BACKEND_CUDA ? dev->ordinal : -1;
  t->numa_node = -1;
  t->nic_distance = -1;
  SL_CHECK(load());
  t->num_numa_nodes = hwloc_get_nbobjs_by_type(topo_handle, HWLOC_OBJ_NUMANODE);
  t->num_cores = hwloc_get_nbobjs_by_type(topo_handle, HWLOC_OBJ_CORE);

  hwloc_obj_t gpu = NULL;
  if (dev->backend == SL_BACKEND_CUDA && dev->pci_bus_id[0]) {
    snprintf(t->gpu_pci, sizeof t->gpu_pci, "%s", dev->pci_bus_id);
    gpu = hwloc_get_pcidev_by_busidstring(topo_handle, dev->pci_bus_id);
  }

  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_obj_t anchor = gpu ? hwloc_get_non_io_ancestor_obj(topo_handle, gpu) : NULL;
  if (anchor && anchor->cpuset) {
    hwloc_bitmap_copy(set, anchor->cpuset);
  } else if (hwloc_get_cpubind(topo_handle, set, HWLOC_CPUBIND_PROCESS) != 0) {
    hwloc_bitmap_copy(set, hwloc_topology_get_topology_cpuset(topo_handle));
  }
  hwloc_bitmap_list_snprintf(t->cpuset, sizeof t->cpuset, set);
  hwloc_obj_t numa = hwloc_get_next_obj_covering_cpuset_by_type(topo_handle, set, HWLOC_OBJ_NUMANODE, NULL);
  if (!numa) numa = hwloc_get_obj_inside_cpuset_by_type(topo_handle, set, HWLOC_OBJ_NUMANODE, 0);
  if (numa) t->numa_node = (int)numa->os_index;

  /* Nearest NIC: the OpenFabrics device whose PCI path shares the deepest ancestor with
   * the GPU (same PCIe switch beats same socket beats across sockets). */
  hwloc_obj_t os = NULL, best = NULL;
  int best_depth = -2;
  while ((os = hwloc_get_next_osdev(topo_handle, os))) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !os->name || !is_verbs_device(os->name)) continue;
    hwloc_obj_t ref = gpu ? gpu : (anchor ? anchor : hwloc_get_root_obj(topo_handle));
    int d = depth_of_common_ancestor(os, ref);
    if (d > best_depth) {
      best_depth = d;
      best = os;
    }
  }
  if (best) {
    snprintf(t->nic, sizeof t->nic, "%s", best->name);
    hwloc_obj_t pci = best->parent;
    if (pci && pci->type == HWLOC_OBJ_PCI_DEVICE)
      snprintf(t->nic_pci, sizeof t->nic_pci, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
               pci->attr->pcidev.dev, pci->attr->pcidev.func);
    if (gpu) {
      /* hops from the GPU up to the common ancestor */
      hwloc_obj_t c = hwloc_get_common_ancestor_obj(topo_handle, best, gpu);
      int hops = 0;
      for (hwloc_obj_t o = gpu; o && o != c; o = o->parent) hops++;
      t->nic_distance = hops;
    }
  }
  hwloc_bitmap_free(set);
  return SL_OK;
}

sl_status_t sl_topo_bind(sl_topo_t *t) {
  SL_CHECK(load());
  if (t->numa_node < 0) {
    SL_LOG_WARN("SL_BIND=1 but the NUMA node is unknown: not binding");
    return SL_OK;
  }
  hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(topo_handle, (unsigned)t->numa_node);
  if (!numa) return SL_ERR(SL_ERR_NOT_FOUND, "NUMA node %d not in the topology", t->numa_node);
  if (hwloc_set_cpubind(topo_handle, numa->cpuset, HWLOC_CPUBIND_PROCESS) != 0)
    return SL_ERR(SL_ERR_UNSUPPORTED, "cannot bind to the cores of NUMA node %d", t->numa_node);
  if (hwloc_set_membind(topo_handle, numa->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) != 0)
    SL_LOG_WARN("memory binding to NUMA node %d not supported here; CPU binding applied", t->numa_node);
  hwloc_bitmap_list_snprintf(t->cpuset, sizeof t->cpuset, numa->cpuset);
  t->bound = true;
  return SL_OK;
}

void sl_topo_ucx_net_devices(const sl_topo_t *t, char *buf, size_t len) {
  if (t->nic[0])
    snprintf(buf, len, "%s:1", t->nic);
  else if (len)
    buf[0] = '\0';
}
