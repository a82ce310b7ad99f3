/* The registry of JIT modules: add one line per kernel module. */
#include <string.h>

#include "engine/sl_jit_points.h"
#include "comm/allreduce.h"
#include "comm/proxy.h"
#include "runtime/sl_probe.h"
#include "kernels/embedding.h"
#include "kernels/qknorm.h"
#include "kernels/rmsnorm.h"
#include "kernels/act.h"
#include "kernels/quant.h"
#include "kernels/router.h"
#include "kernels/grid_barrier.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"
#include "comm/moe_ep.h"

static sl_status_t probe_points(int arch, sl_jit_point_fn fn, void *user) {
  (void)arch;
  sl_jit_spec_t spec;
  SL_CHECK(sl_probe_spec(&spec, 0.5f));
  SL_CHECK(fn(&spec, user));
  SL_CHECK(sl_probe_empty_spec(&spec));
  return fn(&spec, user);
}

static const sl_jit_module_t modules[] = {
    {"probe", probe_points},
    {"rmsnorm", sl_rmsnorm_jit_points},
    {"qknorm", sl_qknorm_jit_points},
    {"embedding", sl_embedding_jit_points},
    {"proxy", sl_proxy_jit_points},
    {"allreduce", sl_allreduce_jit_points},
    {"quant", sl_quant_jit_points},
    {"act", sl_act_jit_points},
    {"router", sl_router_jit_points},
    {"grid_barrier", sl_grid_barrier_jit_points},
    {"moe_dispatch", sl_moe_dispatch_jit_points},
    {"moe_combine", sl_moe_combine_jit_points},
    {"moe_ffn", sl_moe_ffn_jit_points},
    {"moe_layer", sl_moe_layer_jit_points},
    {"moe_comm", sl_moe_comm_jit_points},
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
