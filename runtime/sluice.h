/* The runtime of one rank: configuration, MPI bootstrap, topology, device. */
#ifndef SLUICE_H
#define SLUICE_H

#include "sl_boot.h"
#include "sl_config.h"
#include "sl_device.h"
#include "sl_jit.h"
#include "sl_log.h"
#include "sl_status.h"
#include "sl_topo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  sl_config_t config;
  sl_boot_t boot;
  sl_topo_t topo;
  sl_device_t *dev;
} sl_runtime_t;

/* Load the configuration, boot MPI, open the device chosen by SL_DEVICE for this local
 * rank, discover the topology and bind if asked. */
sl_status_t sl_runtime_init(int *argc, char ***argv, sl_runtime_t *rt);
void sl_runtime_finalize(sl_runtime_t *rt);

#ifdef __cplusplus
}
#endif
#endif
