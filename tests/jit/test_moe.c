/* MoE JIT points (grid barrier, dispatch incl. replicated and its top-k variant, combine incl.
 * the PDL build, FFN plan and GEMV)
 * compile for sm_90 and sm_100; odd shapes compile too; out-of-range constants fail with a
 * message naming them. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sl_jit_points.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_ffn.h"
#include "kernels/moe_layer.h"
#include "kernels/router.h"
#include "sl_test.h"

typedef struct {
  int arch, ok;
} walk_t;

static sl_status_t compile_point(const sl_jit_spec_t *spec, void *user) {
  walk_t *w = user;
  void *cubin = NULL;
  size_t size = 0;
  char desc[512];
  sl_jit_spec_describe(spec, desc, sizeof desc);
  sl_status_t s = sl_jit_compile(spec, w->arch, &cubin, &size, NULL);
  if (s != SL_OK) fail_msg("sm_%d %s: %s", w->arch, desc, sl_last_error());
  /* The entry is in the cubin's symbol table. */
  assert_non_null(memmem(cubin, size, spec->entry, strlen(spec->entry)));
  free(cubin);
  w->ok++;
  return SL_OK;
}

static void walk(int arch) {
  static const char *modules[] = {"grid_barrier", "moe_dispatch", "moe_combine", "moe_ffn", "moe_layer"};
  static const int min_points[] = {1, 32, 4, 7, 4};
  for (int i = 0; i < 5; i++) {
    walk_t w = {.arch = arch};
    SL_ASSERT_OK(sl_jit_points(modules[i], arch, compile_point, &w));
    printf("  sm_%d %-14s %d point(s)\n", arch, modules[i], w.ok);
    assert_true(w.ok >= min_points[i]);
  }
}

static void test_points_sm90(void **state) { walk(SL_ARCH_HOPPER); }
static void test_points_sm100(void **state) { walk(SL_ARCH_BLACKWELL); }

static void test_odd_shapes(void **state) {
  walk_t w = {.arch = SL_ARCH_HOPPER};
  sl_jit_spec_t spec;
  /* The one-kernel decode layer: H and I not multiples of 256 (ragged lanes), 3 of 40 experts. */
  sl_moe_layer_config_t dc = {.num_experts = 40, .top_k = 3, .hidden = 264, .inter = 200, .expert_end = 40,
                              .router_kind = SL_ROUTER_SOFTMAX_TOPK};
  for (int v = 0; v < SL_MOE_DECODE_VARIANTS; v++) {
    const bool mma = v == SL_MOE_DECODE_15X1_XS_TAG_MMA;
    dc.inter = 200;
    if (mma) { /* the tensor-core down phase walks I in windows of 64: refused at 200, compiled at 192 */
      assert_int_equal(sl_moe_layer_decode_spec(&dc, v, &spec), SL_ERR_UNSUPPORTED);
      sl_clear_error();
      dc.inter = 192;
    }
    SL_ASSERT_OK(sl_moe_layer_decode_spec(&dc, v, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  /* The benchmark's timing-only CUT builds of the default shape (every valid mask); masks
   * outside the rules are refused. */
  dc.inter = 200;
  for (int cut = 1; cut <= 15; cut++) {
    const bool valid = !(cut & 8) || (cut & 4);
    assert_int_equal(sl_moe_layer_set_decode_cut(cut), valid);
    if (!valid) continue;
    SL_ASSERT_OK(sl_moe_layer_decode_spec(&dc, SL_MOE_DECODE_15X1_XS_TAG_PR_IF_DL, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  assert_false(sl_moe_layer_set_decode_cut(16));
  assert_false(sl_moe_layer_set_decode_cut(-1));
  assert_true(sl_moe_layer_set_decode_cut(0));
  for (int which = 0; which < 4; which++) {
    SL_ASSERT_OK(sl_moe_dispatch_spec(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, which, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  /* Dispatch variants: every routing round count (odd E_local: 16 scan ranges of 5 experts;
   * 512 local experts: one range), both replicated rankings. */
  const int rounds[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    SL_ASSERT_OK(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 1, rounds[i], &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  SL_ASSERT_OK(sl_moe_dispatch_spec_variant(264, 3, 512, SL_MOE_PAYLOAD_BF16, 0, 1, 1, &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  assert_int_equal(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 1, 3, &spec), SL_ERR_INVALID);
  for (int rank = SL_MOE_REPL_RANK_HIST; rank <= SL_MOE_REPL_RANK_SCAN; rank++) {
    SL_ASSERT_OK(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 3, rank, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
    SL_ASSERT_OK(sl_moe_dispatch_spec_variant(128, 32, 512, SL_MOE_PAYLOAD_NVFP4, 0, 3, rank, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  /* The direct copy (kernel 5) of every quantized payload at odd shapes: K=3 of 5 local experts, K=32 of 512 (the
   * scale pieces of 32 rows take several lanes' rounds); refused for bf16 and H not a multiple of 1024. */
  static const int dq[][2] = {{SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_IEEE}, {SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_CEIL},
                              {SL_MOE_PAYLOAD_MXFP8, SL_QRULE_FLOOR},    {SL_MOE_PAYLOAD_MXFP4, SL_QRULE_CEIL},
                              {SL_MOE_PAYLOAD_NVFP4, 0}};
  for (int i = 0; i < 5; i++) {
    SL_ASSERT_OK(sl_moe_dispatch_spec(1024, 3, 5, (sl_moe_payload_t)dq[i][0], dq[i][1], 5, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
    SL_ASSERT_OK(sl_moe_dispatch_spec(3072, 32, 512, (sl_moe_payload_t)dq[i][0], dq[i][1], 5, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  assert_int_equal(sl_moe_dispatch_spec(1536, 8, 16, SL_MOE_PAYLOAD_MXFP4, SL_QRULE_CEIL, 5, &spec), SL_ERR_INVALID);
  assert_int_equal(sl_moe_dispatch_spec(2048, 8, 16, SL_MOE_PAYLOAD_BF16, 0, 5, &spec), SL_ERR_INVALID);
  assert_int_equal(sl_moe_dispatch_spec(2048, 8, 16, SL_MOE_PAYLOAD_BF16, 0, 6, &spec), SL_ERR_INVALID);
  sl_clear_error();
  /* Forced warps per replicated block (SL_MOE_REPL_WARPS): 1, 3 and 7 at odd shapes (K = 32 x
   * 512 local experts: 7 warps stage 1024 ids in 5 guarded rounds, 28 in 2); the scan ranking at 8
   * only, more than 32 refused. */
  const int warps[] = {1, 3, 7, 28};
  for (int i = 0; i < 4; i++) {
    SL_ASSERT_OK(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 3,
                                              SL_MOE_REPL_RANK_HIST | SL_MOE_REPL_WARPS(warps[i]), &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
    SL_ASSERT_OK(sl_moe_dispatch_spec_variant(7168, 32, 512, SL_MOE_PAYLOAD_MXFP8, SL_QRULE_FLOOR, 3,
                                              SL_MOE_REPL_WARPS(warps[i]), &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  SL_ASSERT_OK(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 3,
                                            SL_MOE_REPL_RANK_SCAN | SL_MOE_REPL_WARPS(8), &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  assert_int_equal(sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 3,
                                                SL_MOE_REPL_RANK_SCAN | SL_MOE_REPL_WARPS(7), &spec),
                   SL_ERR_INVALID);
  assert_int_equal(
      sl_moe_dispatch_spec_variant(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 3, SL_MOE_REPL_WARPS(33), &spec),
      SL_ERR_INVALID);
  /* The balanced replicated kernel: both block sizes, odd shapes, K = 32 x 512 local experts
   * with a quantized payload; a balance that is not one is rejected. */
  for (int bal = 1; bal <= SL_MOE_REPL_BAL_LAST; bal++) {
    SL_ASSERT_OK(sl_moe_dispatch_bal_spec(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, bal, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  SL_ASSERT_OK(sl_moe_dispatch_bal_spec(128, 32, 512, SL_MOE_PAYLOAD_NVFP4, 0, SL_MOE_REPL_BAL_512X1, &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  SL_ASSERT_OK(sl_moe_dispatch_bal_spec(128, 32, 512, SL_MOE_PAYLOAD_MXFP8, SL_QRULE_FLOOR, SL_MOE_REPL_BAL_256X2,
                                        &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  assert_int_equal(sl_moe_dispatch_bal_spec(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, 0, &spec), SL_ERR_INVALID);
  assert_int_equal(sl_moe_dispatch_bal_spec(264, 3, 5, SL_MOE_PAYLOAD_BF16, 0, SL_MOE_REPL_BAL_LAST + 1, &spec),
                   SL_ERR_INVALID);
  SL_ASSERT_OK(sl_moe_combine_spec(264, 3, 1, 132, &spec, NULL));
  SL_ASSERT_OK(compile_point(&spec, &w));
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "MOE_PDL", "1")); /* the small-T layer's PDL build */
  SL_ASSERT_OK(compile_point(&spec, &w));
  /* The replicated dispatch with the router top-k inside (MOE_ROUTE): odd softmax (60 experts,
   * top 3, bf16 logits) and a grouped sigmoid (64 experts, 4 groups, top 2 groups, f16). */
  const sl_router_args_t soft = {.kind = SL_ROUTER_SOFTMAX_TOPK, .num_experts = 60, .top_k = 3,
                                 .logits_dtype = SL_DTYPE_BF16},
                         grp = {.kind = SL_ROUTER_SIGMOID_GROUPED, .num_experts = 64, .top_k = 3, .num_groups = 4,
                                .topk_groups = 2, .logits_dtype = SL_DTYPE_F16};
  SL_ASSERT_OK(sl_moe_dispatch_route_spec(264, 3, 5, 0, &soft, &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  SL_ASSERT_OK(sl_moe_dispatch_route_spec(264, 3, 64, SL_MOE_REPL_RANK_SCAN, &grp, &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  assert_int_equal(sl_moe_dispatch_route_spec(264, 4, 5, 0, &soft, &spec), SL_ERR_INVALID); /* top_k differs */
  sl_clear_error();
  SL_ASSERT_OK(sl_moe_combine_spec(8, 32, 100000, 132, &spec, NULL));
  SL_ASSERT_OK(compile_point(&spec, &w));
  SL_ASSERT_OK(sl_moe_ffn_plan_spec(5, &spec));
  SL_ASSERT_OK(compile_point(&spec, &w));
  for (int which = 0; which < 3; which++) {
    SL_ASSERT_OK(sl_moe_ffn_gemv_spec(which, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  for (int which = 0; which < 2; which++) {
    SL_ASSERT_OK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_SPLIT, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  /* The L2 prefetch path (FFN_PF > 0: off by default, kept for the benchmark sweep). */
  sl_moe_ffn_set_pf_override(4);
  for (int which = 0; which < 2; which++) {
    SL_ASSERT_OK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_WIDE, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
    SL_ASSERT_OK(sl_moe_ffn_gemv_variant_spec(which, SL_MOE_FFN_GEMV_SPLIT, &spec));
    SL_ASSERT_OK(compile_point(&spec, &w));
  }
  sl_moe_ffn_set_pf_override(-1);
}

static void test_bad_constants_named(void **state) {
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_moe_dispatch_spec(2048, 33, 128, SL_MOE_PAYLOAD_BF16, 0, 0, &spec));
  void *cubin = NULL;
  size_t size = 0;
  assert_int_equal(sl_jit_compile(&spec, SL_ARCH_HOPPER, &cubin, &size, NULL), SL_ERR_JIT);
  assert_non_null(strstr(sl_last_error(), "MoE dispatch constants out of range"));
  assert_null(cubin);
}

int main(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    return SL_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_points_sm90),
      cmocka_unit_test(test_points_sm100),
      cmocka_unit_test(test_odd_shapes),
      cmocka_unit_test(test_bad_constants_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
