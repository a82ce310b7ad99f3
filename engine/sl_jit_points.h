/* Every JIT configuration point the build knows (kernels/ and comm/), for `sluice jit warm`
 * and the jit tests that compile each point with NVRTC. */
#ifndef SL_JIT_POINTS_H
#define SL_JIT_POINTS_H

#include "runtime/sl_jit.h"

/* Called once per point; a non-OK return stops the walk and is returned. */
typedef sl_status_t (*sl_jit_point_fn)(const sl_jit_spec_t *spec, void *user);

/* Each module enumerates its own points; `arch` lets a module skip points an arch lacks. */
typedef sl_status_t (*sl_jit_points_enum_fn)(int arch, sl_jit_point_fn fn, void *user);

typedef struct {
  const char *module;            /* "probe", "rmsnorm", ... */
  sl_jit_points_enum_fn enumerate;
} sl_jit_module_t;

/* The table of modules, terminated by {NULL, NULL}. */
const sl_jit_module_t *sl_jit_modules(void);

/* Walk every point of every module (or only `module` when not NULL). */
sl_status_t sl_jit_points(const char *module, int arch, sl_jit_point_fn fn, void *user);

#endif
