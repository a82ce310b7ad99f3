/* Probe: launch the JIT probe kernel and check it against the same formula in C. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sl_log.h"
#include "sl_probe.h"

enum { PROBE_THREADS = 256 };

sl_status_t sl_probe_spec(sl_jit_spec_t *spec, float shift) {
  sl_jit_spec_init(spec, "runtime/probe.cu", "sl_probe_axpb");
  SL_CHECK(sl_jit_spec_define_f32(spec, "PROBE_SHIFT", shift));
  SL_CHECK(sl_jit_spec_define(spec, "PROBE_THREADS", "%d", PROBE_THREADS));
  return SL_OK;
}

sl_status_t sl_probe_empty_spec(sl_jit_spec_t *spec) {
  sl_jit_spec_init(spec, "runtime/probe.cu", "sl_probe_empty");
  SL_CHECK(sl_jit_spec_define(spec, "PROBE_SHIFT", "0.0f"));
  SL_CHECK(sl_jit_spec_define(spec, "PROBE_THREADS", "%d", 32));
  return SL_OK;
}

static float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

sl_status_t sl_probe_run(sl_device_t *dev, int n, float scale, float shift, sl_probe_result_t *res) {
  memset(res, 0, sizeof *res);
  if (n <= 0) return SL_ERR(SL_ERR_INVALID, "probe size %d", n);
  uint16_t *hx = malloc((size_t)n * 2);
  float *hy = malloc((size_t)n * 4), *want = malloc((size_t)n * 4);
  sl_status_t s = SL_OK;
  void *dx = NULL, *dy = NULL;
  if (!hx || !hy || !want) {
    s = SL_ERR(SL_ERR_NOMEM, "probe buffers");
    goto out;
  }
  uint32_t state = 12345u + (uint32_t)n;
  for (int i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    hx[i] = (uint16_t)(0x3c00 + (state >> 22)); /* bf16 in [0.0078, 2) */
    want[i] = scale * bf16_to_f32(hx[i]) + shift;
  }
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)n * 2, &dx), s, out);
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)n * 4, &dy), s, out);
  SL_CHECK_GOTO(sl_memcpy(dev, dx, hx, (size_t)n * 2, NULL), s, out);
  SL_CHECK_GOTO(sl_memset(dev, dy, 0xFF, (size_t)n * 4, NULL), s, out);
  if (sl_device_backend(dev) == SL_BACKEND_CUDA) {
    sl_jit_spec_t spec;
    SL_CHECK_GOTO(sl_probe_spec(&spec, shift), s, out);
    void *cubin;
    size_t size;
    sl_jit_result_t jr;
    /* Compile first on its own to learn hit/miss, then load (a memo/cache hit). */
    SL_CHECK_GOTO(sl_jit_compile(&spec, sl_device_info(dev)->arch, &cubin, &size, &jr), s, out);
    free(cubin);
    res->cache_hit = jr.cache_hit;
    res->compile_ms = jr.compile_ms;
    sl_kernel_t *k;
    SL_CHECK_GOTO(sl_jit_get_kernel(dev, &spec, &k), s, out);
    sl_launch_t l = {.grid = {(unsigned)((n + PROBE_THREADS - 1) / PROBE_THREADS)}, .block = {PROBE_THREADS}};
    void *args[] = {&dx, &dy, &scale, &n};
    SL_CHECK_GOTO(sl_kernel_launch(k, &l, args), s, out);
    SL_CHECK_GOTO(sl_device_check(dev, "probe kernel"), s, out);
    res->ran_on_gpu = true;
  } else {
    const uint16_t *x = dx;
    float *y = dy;
    for (int i = 0; i < n; i++) y[i] = scale * bf16_to_f32(x[i]) + shift;
  }
  SL_CHECK_GOTO(sl_memcpy(dev, hy, dy, (size_t)n * 4, NULL), s, out);
  SL_CHECK_GOTO(sl_device_sync(dev), s, out);
  for (int i = 0; i < n; i++)
    if (!(fabsf(hy[i] - want[i]) <= 1e-6f * fabsf(want[i]))) res->mismatches++;
out:
  sl_device_free(dev, dx);
  sl_device_free(dev, dy);
  free(hx);
  free(hy);
  free(want);
  return s;
}
