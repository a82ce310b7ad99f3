/* One rank's runtime: configuration, MPI bootstrap, device, topology. */
#include <string.h>

#include "sluice.h"

sl_status_t sl_runtime_init(int *argc, char ***argv, sl_runtime_t *rt) {
  memset(rt, 0, sizeof *rt);
  SL_CHECK(sl_config_load(&rt->config));
  SL_CHECK(sl_boot_init(argc, argv, rt->config.ranks_per_node, &rt->boot));
  SL_CHECK(sl_device_open(rt->config.device, rt->boot.local_rank, &rt->dev));
  SL_CHECK(sl_topo_discover(sl_device_info(rt->dev), &rt->topo));
  if (rt->config.bind) SL_CHECK(sl_topo_bind(&rt->topo));
  return SL_OK;
}

void sl_runtime_finalize(sl_runtime_t *rt) {
  sl_device_close(rt->dev);
  rt->dev = NULL;
  sl_boot_finalize(&rt->boot);
}
