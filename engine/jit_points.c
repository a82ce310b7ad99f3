/* The registry of JIT modules: add one line per kernel module. */
#include <string.h>

#include "engine/sl_jit_points.h"
#include "comm/proxy.h"
#include "runtime/sl_probe.h"

static sl_status_t probe_points(int arch, sl_jit_point_fn fn, void *user) {
  (void)arch;
  sl_jit_spec_t spec;
  SL_CHECK(sl_probe_spec(&spec, 0.5f));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_probe_empty_spec(&spec));
  return fn(&spec, user);
}

static sl_status_t proxy_points(int arch, sl_jit_point_fn fn, void *user) {
  (void)arch;
  sl_jit_spec_t spec;
  SL_CHECK(sl_proxy_post_kernel_spec(&spec, 128));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_proxy_check_kernel_spec(&spec, 128));
  return fn(&spec, user);
}

static const sl_jit_module_t modules[] = {
    {"probe", probe_points},
    {"proxy", proxy_points},
    {NULL, NULL},
};

const sl_jit_module_t *sl_jit_modules(void) { return modules; }

sl_status_t sl_jit_points(const char *module, int arch, sl_jit_point_fn fn, void *user) {
  for (const sl_jit_module_t *m = modules; m->module; m++) {
    if (module && strcmp(module, m->module) != 0) continue;
    SL_CHECK(m->enumerate(arch, fn, user));
  }
  return SL_OK;
}
