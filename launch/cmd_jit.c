/* `sluice jit list|clear|warm [--arch N] [--module NAME] [--jobs N]`: the compiled-kernel cache. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sl_jit_points.h"
#include "sl_cmd.h"

static bool print_entry(const sl_jit_cache_entry_t *e, void *user) {
  int *n = user;
  printf("  %-40s sm_%-4d %8zu B  %s\n", e->valid ? e->entry : "(unreadable)", e->arch, e->bytes, e->file);
  (*n)++;
  return true;
}

/* Warming: the registered points are collected first, then compiled by `jobs` threads (NVRTC
 * and the cache are thread-safe: tests/jit/test_jit_cache.c writes concurrently), each
 * taking every jobs-th point; the lines are printed afterwards in registry order. */
typedef struct {
  int arch, n, cap;
  sl_jit_spec_t *specs;
  signed char *state; /* 0 compiled, 1 cache hit, -1 failed */
} warm_state_t;

static sl_status_t collect_one(const sl_jit_spec_t *spec, void *user) {
  warm_state_t *w = user;
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 256;
    sl_jit_spec_t *grown = realloc(w->specs, (size_t)cap * sizeof *grown);
    if (!grown) return SL_ERR(SL_ERR_NOMEM, "jit warm: %d points", cap);
    w->specs = grown, w->cap = cap;
  }
  w->specs[w->n++] = *spec;
  return SL_OK;
}

typedef struct {
  warm_state_t *w;
  int first, step;
} warm_job_t;

static void *warm_some(void *p) {
  warm_job_t *j = p;
  for (int i = j->first; i < j->w->n; i += j->step) {
    void *cubin;
    size_t size;
    sl_jit_result_t r;
    if (sl_jit_compile(&j->w->specs[i], j->w->arch, &cubin, &size, &r) != SL_OK) {
      j->w->state[i] = -1;
      continue;
    }
    free(cubin);
    j->w->state[i] = r.cache_hit ? 1 : 0;
  }
  return NULL;
}

static int warm(int arch, const char *module, int jobs) {
  warm_state_t w = {.arch = arch};
  printf("warming the JIT cache for sm_%d%s%s (%d threads):\n", arch, module ? ", module " : "", module ? module : "",
         jobs);
  if (sl_jit_points(module, arch, collect_one, &w) != SL_OK || !(w.state = calloc((size_t)w.n + 1, 1))) {
    fprintf(stderr, "sluice jit warm: %s\n", sl_last_error());
    free(w.specs);
    return 1;
  }
  if (jobs > 64) jobs = 64;
  pthread_t tid[64];
  warm_job_t job[64];
  bool started[64];
  for (int t = 0; t < jobs; t++) {
    job[t] = (warm_job_t){.w = &w, .first = t, .step = jobs};
    started[t] = pthread_create(&tid[t], NULL, warm_some, &job[t]) == 0;
  }
  for (int t = 0; t < jobs; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      warm_some(&job[t]); /* no thread: this share is compiled here */
  }
  int compiled = 0, hits = 0, failed = 0;
  for (int i = 0; i < w.n; i++) {
    char desc[512];
    sl_jit_spec_describe(&w.specs[i], desc, sizeof desc);
    const char *what = w.state[i] < 0 ? "FAILED" : w.state[i] ? "hit" : "compiled";
    printf("  %-9s %s\n", what, desc);
    compiled += w.state[i] == 0, hits += w.state[i] == 1, failed += w.state[i] < 0;
  }
  printf("%d compiled, %d already cached, %d failed\n", compiled, hits, failed);
  free(w.specs);
  free(w.state);
  return failed ? 1 : 0;
}

int sl_cmd_jit(sl_runtime_t *rt, int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sluice jit list|clear|warm [--arch N] [--module NAME] [--jobs N]\n");
    return 2;
  }
  if (rt->boot.rank != 0) return 0;
  const char *module = NULL;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int jobs = cores > 0 ? (int)cores : 1;
  int arch = sl_device_info(rt->dev)->arch ? sl_device_info(rt->dev)->arch : SL_ARCH_HOPPER;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--arch") == 0)
      arch = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--module") == 0)
      module = argv[i + 1];
    else if (strcmp(argv[i], "--jobs") == 0 && atoi(argv[i + 1]) > 0)
      jobs = atoi(argv[i + 1]);
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
  if (strcmp(argv[1], "warm") == 0) return warm(arch, module, jobs);
  fprintf(stderr, "sluice jit: unknown action '%s' (list, clear, warm)\n", argv[1]);
  return 2;
}
