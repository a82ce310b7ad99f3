/* `sluice jit list|clear|warm [--arch N] [--module NAME]`: the compiled-kernel cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sl_jit_points.h"
#include "sl_cmd.h"

static bool print_entry(const sl_jit_cache_entry_t *e, void *user) {
  int *n = user;
  printf("  %-40s sm_%-4d %8zu B  %s\n", e->valid ? e->entry : "(unreadable)", e->arch, e->bytes, e->file);
  (*n)++;
  return true;
}

typedef struct {
  int arch, compiled, hits, failed;
} warm_state_t;

static sl_status_t warm_one(const sl_jit_spec_t *spec, void *user) {
  warm_state_t *w = user;
  void *cubin;
  size_t size;
  sl_jit_result_t r;
  char desc[512];
  sl_jit_spec_describe(spec, desc, sizeof desc);
  if (sl_jit_compile(spec, w->arch, &cubin, &size, &r) != SL_OK) {
    w->failed++;
    printf("  FAILED %s\n", desc);
    return SL_OK; /* report every failure, not only the first */
  }
  free(cubin);
  if (r.cache_hit)
    w->hits++;
  else
    w->compiled++;
  printf("  %-9s %s\n", r.cache_hit ? "hit" : "compiled", desc);
  return SL_OK;
}

int sl_cmd_jit(sl_runtime_t *rt, int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sluice jit list|clear|warm [--arch N] [--module NAME]\n");
    return 2;
  }
  if (rt->boot.rank != 0) return 0;
  const char *module = NULL;
  int arch = sl_device_info(rt->dev)->arch ? sl_device_info(rt->dev)->arch : SL_ARCH_HOPPER;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--arch") == 0)
      arch = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--module") == 0)
      module = argv[i + 1];
    else {
      fprintf(stderr, "sluice jit: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (strcmp(argv[1], "list") == 0) {
    int n = 0;
    printf("JIT cache %s:\n", rt->config.cache_dir);
    if (sl_jit_cache_list(print_entry, &n) != SL_OK) return 1;
    printf("%d cubin(s)\n", n);
    return 0;
  }
  if (strcmp(argv[1], "clear") == 0) {
    int removed = 0;
    sl_status_t s = sl_jit_cache_clear(&removed);
    printf("removed %d cubin(s) from %s\n", removed, rt->config.cache_dir);
    return s == SL_OK ? 0 : 1;
  }
  if (strcmp(argv[1], "warm") == 0) {
    warm_state_t w = {.arch = arch};
    printf("warming the JIT cache for sm_%d%s%s:\n", arch, module ? ", module " : "", module ? module : "");
    if (sl_jit_points(module, arch, warm_one, &w) != SL_OK) return 1;
    printf("%d compiled, %d already cached, %d failed\n", w.compiled, w.hits, w.failed);
    return w.failed ? 1 : 0;
  }
  fprintf(stderr, "sluice jit: unknown action '%s' (list, clear, warm)\n", argv[1]);
  return 2;
}
