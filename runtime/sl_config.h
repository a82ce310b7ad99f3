/* Runtime configuration: every SL_* environment variable, parsed and validated in one place.
 * The README's configuration table lists the same variables; keep them in step. */
#ifndef SL_CONFIG_H
#define SL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "sl_log.h"
#include "sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_DEVICE_AUTO = 0, SL_DEVICE_CPU = 1, SL_DEVICE_CUDA = 2 } sl_device_kind_t;

typedef struct {
  sl_device_kind_t device;  /* SL_DEVICE=auto|cpu|cuda (auto: cuda when a GPU is usable) */
  sl_log_level_t log_level; /* SL_LOG_LEVEL=none|error|warn|info|debug|trace (warn) */
  bool log_all_ranks;       /* SL_LOG_ALL_RANKS=0|1: every rank prints info too (0) */
  char cache_dir[1024];     /* SL_CACHE_DIR (default $XDG_CACHE_HOME/sluice or ~/.cache/sluice) */
  bool jit_cache;           /* SL_JIT_CACHE=0|1: use the on-disk cubin cache (1) */
  long timeout_ms;          /* SL_TIMEOUT_MS: bound of every wait, 1..3600000 (10000) */
  int ranks_per_node;       /* SL_RANKS_PER_NODE: simulate nodes of k ranks; 0 = real nodes (0) */
  bool bind;                /* SL_BIND=0|1: bind CPU and memory to the GPU's NUMA node (0) */
  int cuda_device;          /* SL_CUDA_DEVICE: GPU index to use; -1 = local rank mod #GPUs (-1) */
  bool nvls;                /* SL_NVLS=0|1: allow NVLink multicast paths; never on shared
                               machines (0) */
  char cuda_home[512];      /* SL_CUDA_HOME (else CUDA_HOME, else the build's toolkit path):
                               NVRTC's -I<cuda>/include */
} sl_config_t;

/* Parse every SL_* variable from the environment into *cfg. An invalid value fails with
 * SL_ERR_INVALID and a message naming the variable and the accepted values. */
sl_status_t sl_config_load(sl_config_t *cfg);

/* Defaults, without reading the environment. */
void sl_config_defaults(sl_config_t *cfg);

/* The process-wide configuration: loaded on first use, once, safe from any thread (a failed
 * load logs and keeps the defaults for the invalid variables only after sl_config_load reported
 * them). */
const sl_config_t *sl_config(void);

/* Documentation of every variable: name, accepted values, default, meaning.
 * Terminated by an entry with name == NULL. Used by `sluice info --env`. */
typedef struct {
  const char *name;
  const char *values;
  const char *default_value;
  const char *meaning;
} sl_config_var_t;
const sl_config_var_t *sl_config_vars(void);

#ifdef __cplusplus
}
#endif
#endif
