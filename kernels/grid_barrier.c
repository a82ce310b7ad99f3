/* Grid barrier: the device error record's messages, and the barrier benchmark launcher. */
#include <stdio.h>

#include "kernels/grid_barrier.h"
#include "runtime/sl_config.h"

enum { GB_THREADS = 32 };

sl_status_t sl_dev_error_status(const sl_dev_error_t *e, const char *what) {
  switch (e->code) {
  case SL_DEV_ERR_NONE: return SL_OK;
  case SL_DEV_ERR_TIMEOUT:
    return SL_ERR(SL_ERR_TIMEOUT,
                  "%s: grid barrier timed out in block %d (%d of %d blocks arrived); a block never "
                  "arrived (grid larger than co-resident blocks, or a stuck block). Raise SL_TIMEOUT_MS "
                  "if the device is shared; the barrier state must be zeroed before the next launch",
                  what, e->a, e->b, e->c);
  case SL_DEV_ERR_RANGE:
    return SL_ERR(SL_ERR_RANGE, "%s: token %d has expert id %d, outside [0, %d): check the router output",
                  what, e->a, e->b, e->c);
  case SL_DEV_ERR_CAPACITY:
    return SL_ERR(SL_ERR_CAPACITY,
                  "%s: expert %d received %d tokens but its capacity is %d; the overflowing tokens were not "
                  "dispatched. Use the dropless capacity (max tokens per call) or raise the capacity",
                  what, e->a, e->b, e->c);
  case SL_DEV_ERR_NUMERIC:
    return SL_ERR(SL_ERR_NUMERIC,
                  "%s: token %d holds NaN/Inf in block %d (elements %d..%d); its quantized payload carries the "
                  "format's NaN marker. Check the layer that produced the activations",
                  what, e->a, e->b, e->b * e->c, e->b * e->c + e->c - 1);
  case SL_DEV_ERR_PIPE_TIMEOUT:
    return SL_ERR(SL_ERR_TIMEOUT,
                  "%s: a bulk-copy pipeline wait timed out in block %d at stage use %d (%s); a copy never "
                  "completed or a warp stopped consuming (expected bytes out of step with the copies?). Raise "
                  "SL_TIMEOUT_MS if the device is shared; outputs of this call are invalid",
                  what, e->a, e->b, e->c ? "waiting for a stage to be released" : "waiting for a stage's data");
  case SL_DEV_ERR_POLL_TIMEOUT:
    return SL_ERR(SL_ERR_TIMEOUT,
                  "%s: block %d waited in vain for the values other blocks publish (%d of %d arrived); a block "
                  "never ran or stopped. Raise SL_TIMEOUT_MS if the device is shared; outputs of this call are "
                  "invalid",
                  what, e->a, e->b, e->c);
  default: return SL_ERR(SL_ERR_INTERNAL, "%s: unknown device error code %d (%d %d %d)", what, e->code, e->a, e->b, e->c);
  }
}

sl_status_t sl_grid_barrier_bench_variant_spec(int variant, sl_jit_spec_t *spec) {
  if (variant < 0 || variant > 2)
    return SL_ERR(SL_ERR_INVALID, "grid barrier bench: variant %d (0, 1, or 2: cooperative_groups)", variant);
  sl_jit_spec_init(spec, "kernels/grid_barrier.cu", "sl_grid_barrier_bench");
  SL_CHECK(sl_jit_spec_define(spec, "GB_THREADS", "%d", GB_THREADS));
  SL_CHECK(sl_jit_spec_define(spec, "GB_VARIANT", "%d", variant));
  return SL_OK;
}

/* Variant 1 (acquire polls) is the one kernels compile (SL_GRID_BARRIER_ACQUIRE_POLL's default). */
sl_status_t sl_grid_barrier_bench_spec(sl_jit_spec_t *spec) { return sl_grid_barrier_bench_variant_spec(1, spec); }

sl_status_t sl_grid_barrier_bench(sl_device_t *dev, sl_grid_barrier_state_t *state, int blocks, int rounds,
                                  int absent_block, long timeout_ms, sl_stream_t *stream, double *us_per_barrier) {
  return sl_grid_barrier_bench_variant(dev, state, 1, blocks, rounds, absent_block, timeout_ms, stream,
                                       us_per_barrier);
}

sl_status_t sl_grid_barrier_bench_variant(sl_device_t *dev, sl_grid_barrier_state_t *state, int variant, int blocks,
                                          int rounds, int absent_block, long timeout_ms, sl_stream_t *stream,
                                          double *us_per_barrier) {
  *us_per_barrier = 0;
  if (sl_device_backend(dev) != SL_BACKEND_CUDA)
    return SL_ERR(SL_ERR_UNSUPPORTED, "grid barrier benchmark: needs the CUDA backend");
  if (blocks <= 0 || rounds <= 0) return SL_ERR(SL_ERR_INVALID, "grid barrier bench: blocks %d rounds %d", blocks, rounds);
  if (variant == 2 && absent_block >= 0) /* grid.sync has no timeout: it would wait forever */
    return SL_ERR(SL_ERR_INVALID, "grid barrier bench: an absent block needs the bounded barrier (variant 0 or 1)");
  sl_jit_spec_t spec;
  SL_CHECK(sl_grid_barrier_bench_variant_spec(variant, &spec));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  sl_status_t s = SL_OK;
  int *round_of_block = NULL;
  sl_event_t *e0 = NULL, *e1 = NULL;
  SL_CHECK_GOTO(sl_device_malloc(dev, (size_t)blocks * sizeof(int), (void **)&round_of_block), s, out);
  SL_CHECK_GOTO(sl_memset(dev, round_of_block, 0, (size_t)blocks * sizeof(int), stream), s, out);
  SL_CHECK_GOTO(sl_event_create(dev, &e0), s, out);
  SL_CHECK_GOTO(sl_event_create(dev, &e1), s, out);
  unsigned long long timeout_ns = (unsigned long long)(timeout_ms > 0 ? timeout_ms : sl_config()->timeout_ms) * 1000000ull;
  sl_launch_t l = {.grid = {(unsigned)blocks}, .block = {GB_THREADS}, .stream = stream, .cooperative = true};
  /* 1. Checked run: each block publishes its round before every barrier and checks its
   *    neighbour's after it (the tests' absent block applies here). 2. Timed run: the same
   *    number of barriers with nothing else in the loop, comparable with a loop of
   *    cooperative_groups grid.sync. */
  int check = 1, nocheck = 0, nobody = -1;
  void *cargs[] = {&state, &round_of_block, &rounds, &absent_block, &check, &timeout_ns};
  void *targs[] = {&state, &round_of_block, &rounds, &nobody, &nocheck, &timeout_ns};
  SL_CHECK_GOTO(sl_kernel_launch(k, &l, cargs), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  SL_CHECK_GOTO(sl_device_check(dev, "grid barrier bench"), s, out);
  sl_dev_error_t err;
  SL_CHECK_GOTO(sl_memcpy(dev, &err, &state->error, sizeof err, stream), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  if (err.code != SL_DEV_ERR_NONE) { /* nothing runs now: reset for the next launch */
    SL_CHECK_GOTO(sl_memset(dev, state, 0, sizeof *state, stream), s, out);
    SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  }
  if (err.code == SL_DEV_ERR_RANGE) {
    s = SL_ERR(SL_ERR_INTERNAL, "grid barrier: block %d saw its neighbour at round %d after barrier %d",
               err.a, err.b, err.c);
    goto out;
  }
  SL_CHECK_GOTO(sl_dev_error_status(&err, "grid barrier bench"), s, out);
  SL_CHECK_GOTO(sl_event_record(dev, e0, stream), s, out);
  SL_CHECK_GOTO(sl_kernel_launch(k, &l, targs), s, out);
  SL_CHECK_GOTO(sl_event_record(dev, e1, stream), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  SL_CHECK_GOTO(sl_device_check(dev, "grid barrier bench"), s, out);
  SL_CHECK_GOTO(sl_memcpy(dev, &err, &state->error, sizeof err, stream), s, out);
  SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
  if (err.code != SL_DEV_ERR_NONE) {
    SL_CHECK_GOTO(sl_memset(dev, state, 0, sizeof *state, stream), s, out);
    SL_CHECK_GOTO(sl_stream_sync(dev, stream), s, out);
    SL_CHECK_GOTO(sl_dev_error_status(&err, "grid barrier bench (timed run)"), s, out);
  }
  float ms = 0;
  SL_CHECK_GOTO(sl_event_elapsed_ms(dev, e0, e1, &ms), s, out);
  *us_per_barrier = (double)ms * 1000.0 / rounds;
out:
  if (e0) sl_event_destroy(dev, e0);
  if (e1) sl_event_destroy(dev, e1);
  sl_device_free(dev, round_of_block);
  return s;
}

sl_status_t sl_grid_barrier_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  (void)arch;
  sl_jit_spec_t spec;
  for (int variant = 0; variant < 3; variant++) {
    SL_CHECK(sl_grid_barrier_bench_variant_spec(variant, &spec));
    SL_CHECK(fn(&spec, user));
  }
  return SL_OK;
}
