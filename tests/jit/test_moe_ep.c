/* JIT tests of the node-level MoE dispatch/combine kernels (comm/moe_ep.cu, comm/moe_tp.cu):
 * the registered points cover every kernel for every payload (decode and prefill shapes),
 * the decode and prefill kernels compile for sm_90 and sm_100, and a missing constant fails
 * with the kernel's #error. (Compiling every registered point is test_jit_points.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_ep.h"
#include "engine/sl_jit_points.h"
#include "sl_test.h"

static const char *entries[] = {
    "sl_moe_ep_dispatch_fused", "sl_moe_ep_combine_fused", "sl_moe_ep_route", "sl_moe_ep_publish",
    "sl_moe_ep_send",           "sl_moe_ep_gather",        "sl_moe_ep_ack",   "sl_moe_ep_combine_send",
    "sl_moe_ep_combine_reduce"};
enum { NUM_EP = 9, NUM_TP = 4 };

typedef struct {
  int ep[SL_MOE_EP_NUM_PAYLOADS][NUM_EP];
  int tp, total;
} seen_t;

static sl_status_t note(const sl_jit_spec_t *spec, void *user) {
  seen_t *s = user;
  s->total++;
  if (strcmp(spec->source, "comm/moe_tp.cu") == 0) {
    s->tp++;
    return SL_OK;
  }
  int payload = -1;
  for (int i = 0; i < spec->num_defines; i++)
    if (strcmp(spec->defines[i].name, "SL_EP_PAYLOAD") == 0) payload = atoi(spec->defines[i].value);
  assert_in_range(payload, 0, SL_MOE_EP_NUM_PAYLOADS - 1);
  for (int e = 0; e < NUM_EP; e++)
    if (strcmp(spec->entry, entries[e]) == 0) s->ep[payload][e]++;
  return SL_OK;
}

static void test_points_cover_every_kernel(void **state) {
  for (int arch = 90; arch <= 100; arch += 10) {
    seen_t s;
    memset(&s, 0, sizeof s);
    SL_ASSERT_OK(sl_jit_points("moe_comm", arch, note, &s));
    for (int p = 0; p < SL_MOE_EP_NUM_PAYLOADS; p++)
      for (int e = 0; e < NUM_EP; e++)
        if (s.ep[p][e] != 1) fail_msg("sm_%d payload %d: %s registered %d times", arch, p, entries[e], s.ep[p][e]);
    assert_int_equal(s.tp, NUM_TP);
    assert_int_equal(s.total, SL_MOE_EP_NUM_PAYLOADS * NUM_EP + NUM_TP);
  }
}

static void compile_ok(const char *src, const char *entry, int payload, int threads, int arch) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, src, entry);
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_EP_PAYLOAD", "%d", payload));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_EP_THREADS", "%d", threads));
  void *cubin = NULL;
  size_t size = 0;
  sl_status_t s = sl_jit_compile(&spec, arch, &cubin, &size, NULL);
  if (s != SL_OK || size == 0) fail_msg("sm_%d %s payload %d: %s", arch, entry, payload, sl_last_error());
  free(cubin);
}

static void test_compile_decode_and_prefill(void **state) {
  if (!sl_jit_available()) skip();
  for (int arch = 90; arch <= 100; arch += 10) {
    compile_ok("comm/moe_ep.cu", "sl_moe_ep_dispatch_fused", SL_MOE_EP_PAYLOAD_NVFP4, 128, arch);
    compile_ok("comm/moe_ep.cu", "sl_moe_ep_gather", SL_MOE_EP_PAYLOAD_FP8, 256, arch);
    compile_ok("comm/moe_tp.cu", "sl_moe_tp_combine_fused", 0, 128, arch);
    /* a block size that is not a registered point still compiles (e.g. a tuned prefill) */
    compile_ok("comm/moe_ep.cu", "sl_moe_ep_combine_reduce", SL_MOE_EP_PAYLOAD_MXFP8, 512, arch);
  }
}

static void test_missing_constant(void **state) {
  if (!sl_jit_available()) skip();
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "comm/moe_ep.cu", "sl_moe_ep_send");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_EP_PAYLOAD", "0"));
  void *cubin = NULL;
  size_t size = 0;
  assert_int_equal(sl_jit_compile(&spec, 90, &cubin, &size, NULL), SL_ERR_JIT);
  assert_non_null(strstr(sl_last_error(), "SL_EP_THREADS"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_points_cover_every_kernel),
      cmocka_unit_test(test_compile_decode_and_prefill),
      cmocka_unit_test(test_missing_constant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
