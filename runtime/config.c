/* Every SL_* environment variable: documented, parsed and validated here and nowhere else. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_config.h"

static const sl_config_var_t config_vars[] = {
    {"SL_DEVICE", "auto|cpu|cuda", "auto", "backend; auto picks cuda when a GPU is usable, else cpu"},
    {"SL_LOG_LEVEL", "none|error|warn|info|debug|trace", "warn", "log verbosity (debug adds the error backtrace)"},
    {"SL_LOG_ALL_RANKS", "0|1", "0", "let every rank print info/debug lines, not only rank 0"},
    {"SL_CACHE_DIR", "a directory", "$XDG_CACHE_HOME/sluice or ~/.cache/sluice", "JIT cubin cache"},
    {"SL_JIT_CACHE", "0|1", "1", "read and write the on-disk cubin cache"},
    {"SL_TIMEOUT_MS", "1..3600000", "10000", "bound of every wait on a peer; expiry gives SL_ERR_TIMEOUT"},
    {"SL_RANKS_PER_NODE", "0..4096", "0", "simulate nodes of k ranks on one host (0: real nodes)"},
    {"SL_BIND", "0|1", "0", "bind each rank's CPU and memory to its GPU's NUMA node"},
    {"SL_CUDA_DEVICE", "-1..255", "-1", "GPU to use; -1: local rank modulo the GPU count"},
    {"SL_NVLS", "0|1", "0", "allow NVLink multicast (NVLS) paths; never on shared machines"},
    {"SL_CUDA_HOME", "a directory", "$CUDA_HOME or the build's toolkit", "CUDA headers for NVRTC"},
    {NULL, NULL, NULL, NULL},
};

const sl_config_var_t *sl_config_vars(void) { return config_vars; }

void sl_config_defaults(sl_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->device = SL_DEVICE_AUTO;
  cfg->log_level = SL_LOG_WARN;
  cfg->jit_cache = true;
  cfg->timeout_ms = 10000;
  cfg->cuda_device = -1;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg)
    snprintf(cfg->cache_dir, sizeof cfg->cache_dir, "%s/sluice", xdg);
  else
    snprintf(cfg->cache_dir, sizeof cfg->cache_dir, "%s/.cache/sluice", home && *home ? home : "/tmp");
  const char *cuda = getenv("CUDA_HOME");
#ifdef SLUICE_CUDA_HOME
  if (!cuda || !*cuda) cuda = SLUICE_CUDA_HOME;
#endif
  if (!cuda || !*cuda) cuda = "/usr/local/cuda";
  snprintf(cfg->cuda_home, sizeof cfg->cuda_home, "%s", cuda);
}

static sl_status_t bad_value(const char *name, const char *value) {
  for (const sl_config_var_t *v = config_vars; v->name; v++)
    if (strcmp(v->name, name) == 0)
      return SL_ERR(SL_ERR_INVALID, "%s='%s' is not valid; accepted: %s", name, value, v->values);
  return SL_ERR(SL_ERR_INTERNAL, "unknown variable %s", name);
}

static sl_status_t parse_choice(const char *name, const char *const *choices, int n, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) return SL_OK;
  for (int i = 0; i < n; i++)
    if (strcmp(v, choices[i]) == 0) {
      *out = i;
      return SL_OK;
    }
  return bad_value(name, v);
}

static sl_status_t parse_long(const char *name, long lo, long hi, long *out) {
  const char *v = getenv(name);
  if (!v || !*v) return SL_OK;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi) return bad_value(name, v);
  *out = x;
  return SL_OK;
}

static sl_status_t parse_bool(const char *name, bool *out) {
  static const char *const bools[] = {"0", "1"};
  int i = *out;
  SL_CHECK(parse_choice(name, bools, 2, &i));
  *out = i == 1;
  return SL_OK;
}

static sl_status_t parse_path(const char *name, char *out, size_t len) {
  const char *v = getenv(name);
  if (!v || !*v) return SL_OK;
  if (strlen(v) >= len) return bad_value(name, v);
  snprintf(out, len, "%s", v);
  return SL_OK;
}

sl_status_t sl_config_load(sl_config_t *cfg) {
  static const char *const devices[] = {"auto", "cpu", "cuda"};
  static const char *const levels[] = {"none", "error", "warn", "info", "debug", "trace"};
  sl_config_defaults(cfg);
  /* Parse every variable even after a failure, so one run reports all bad values. */
  sl_status_t first = SL_OK, s;
  int choice;
#define SL_KEEP_FIRST(call) \
  if ((s = (call)) != SL_OK && first == SL_OK) first = s
  choice = cfg->device;
  SL_KEEP_FIRST(parse_choice("SL_DEVICE", devices, 3, &choice));
  cfg->device = (sl_device_kind_t)choice;
  choice = cfg->log_level;
  SL_KEEP_FIRST(parse_choice("SL_LOG_LEVEL", levels, 6, &choice));
  cfg->log_level = (sl_log_level_t)choice;
  SL_KEEP_FIRST(parse_bool("SL_LOG_ALL_RANKS", &cfg->log_all_ranks));
  SL_KEEP_FIRST(parse_path("SL_CACHE_DIR", cfg->cache_dir, sizeof cfg->cache_dir));
  SL_KEEP_FIRST(parse_bool("SL_JIT_CACHE", &cfg->jit_cache));
  SL_KEEP_FIRST(parse_long("SL_TIMEOUT_MS", 1, 3600000, &cfg->timeout_ms));
  long x = cfg->ranks_per_node;
  SL_KEEP_FIRST(parse_long("SL_RANKS_PER_NODE", 0, 4096, &x));
  cfg->ranks_per_node = (int)x;
  SL_KEEP_FIRST(parse_bool("SL_BIND", &cfg->bind));
  x = cfg->cuda_device;
  SL_KEEP_FIRST(parse_long("SL_CUDA_DEVICE", -1, 255, &x));
  cfg->cuda_device = (int)x;
  SL_KEEP_FIRST(parse_bool("SL_NVLS", &cfg->nvls));
  SL_KEEP_FIRST(parse_path("SL_CUDA_HOME", cfg->cuda_home, sizeof cfg->cuda_home));
#undef SL_KEEP_FIRST
  sl_log_set_level(cfg->log_level);
  return first;
}

static sl_config_t process_cfg;
static pthread_once_t process_cfg_once = PTHREAD_ONCE_INIT;

static void process_cfg_load(void) {
  if (sl_config_load(&process_cfg) != SL_OK) {
    /* Already reported; fall back to defaults so library users keep going. */
    sl_config_t keep = process_cfg;
    sl_config_defaults(&process_cfg);
    process_cfg.log_level = keep.log_level;
  }
}

/* Loaded once, by whichever thread asks first; the others wait for it (`sluice jit warm`'s
 * compile threads used to read cuda_home while the first one was still filling it in, and
 * NVRTC then got "-I/include": a flaky "cannot open source file cuda_bf16.h"). */
const sl_config_t *sl_config(void) {
  pthread_once(&process_cfg_once, process_cfg_load);
  return &process_cfg;
}
