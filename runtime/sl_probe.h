/* Probe: a tiny JIT kernel and its CPU twin, used by `sluice selfcheck` and the tests to
 * show that compile, cache, load and launch work on this machine. */
#ifndef SL_PROBE_H
#define SL_PROBE_H

#include "sl_device.h"
#include "sl_jit.h"

typedef struct {
  bool ran_on_gpu;
  bool cache_hit;     /* the cubin came from the disk cache */
  double compile_ms;
  size_t mismatches;  /* elements differing from the CPU reference */
} sl_probe_result_t;

/* The spec of the probe kernel with the given shift constant. */
sl_status_t sl_probe_spec(sl_jit_spec_t *spec, float shift);
/* The spec of the empty kernel (launch-latency ceiling in benchmarks). */
sl_status_t sl_probe_empty_spec(sl_jit_spec_t *spec);
/* Run y = scale*x + shift over n random inputs on `dev` and compare with the CPU. */
sl_status_t sl_probe_run(sl_device_t *dev, int n, float scale, float shift, sl_probe_result_t *res);

#endif
