/* JIT tests of the quant / act / router kernels: the specs the host picks for decode and prefill
 * shapes are registered points (so `sluice jit warm` covers them) and compile for sm_90 and
 * sm_100 at other sizes too; a missing constant fails with the kernel's #error. (Compiling every
 * registered point is tests/jit/test_jit_points.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sl_jit_points.h"
#include "kernels/act.h"
#include "kernels/kq_launch.h"
#include "kernels/quant.h"
#include "kernels/router.h"
#include "sl_test.h"

enum { SMS = 132 };

typedef struct {
  const sl_jit_spec_t *want;
  bool found;
} find_t;

static bool same_spec(const sl_jit_spec_t *a, const sl_jit_spec_t *b) {
  char da[512], db[512];
  sl_jit_spec_describe(a, da, sizeof da);
  sl_jit_spec_describe(b, db, sizeof db);
  return strcmp(a->source, b->source) == 0 && strcmp(da, db) == 0;
}
static sl_status_t find_point(const sl_jit_spec_t *spec, void *user) {
  find_t *f = user;
  if (same_spec(spec, f->want)) f->found = true;
  return SL_OK;
}
static void assert_registered(const char *module, int arch, const sl_jit_spec_t *spec) {
  find_t f = {.want = spec};
  SL_ASSERT_OK(sl_jit_points(module, arch, find_point, &f));
  if (!f.found) {
    char d[512];
    sl_jit_spec_describe(spec, d, sizeof d);
    fail_msg("sm_%d: %s is not a registered point of module %s", arch, d, module);
  }
}
static void assert_compiles(const sl_jit_spec_t *spec, int arch) {
  void *cubin = NULL;
  size_t size = 0;
  sl_status_t s = sl_jit_compile(spec, arch, &cubin, &size, NULL);
  if (s != SL_OK || size == 0) fail_msg("sm_%d: compile failed: %s", arch, sl_last_error());
  free(cubin);
}

static const int archs[] = {SL_ARCH_HOPPER, SL_ARCH_BLACKWELL};

/* The spec carries the define `want` (e.g. "UNROLL=4"), else the test fails naming both. */
static void assert_define(const sl_jit_spec_t *spec, const char *want) {
  char desc[512];
  sl_jit_spec_describe(spec, desc, sizeof desc);
  if (!strstr(desc, want)) fail_msg("%s: want %s", desc, want);
}
static void assert_quant_define(const sl_quant_args_t *q, int arch, const char *want) {
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_quant_spec(q, arch, SMS, &spec));
  assert_define(&spec, want);
}

static void test_quant_specs(void **state) {
  const sl_quant_format_t fmts[] = {SL_QUANT_FP8_GROUP, SL_QUANT_MXFP8, SL_QUANT_MXFP4, SL_QUANT_NVFP4};
  const sl_quant_rule_t rules[] = {SL_QUANT_RULE_CEIL, SL_QUANT_RULE_FLOOR, SL_QUANT_RULE_FLOOR, SL_QUANT_RULE_IEEE};
  for (int a = 0; a < 2; a++)
    for (int f = 0; f < 4; f++)
      for (int T = 1; T <= 8192; T *= 8192) { /* decode (1 row) and prefill (8192 rows) */
        sl_quant_args_t q = {.format = fmts[f],
                             .rule = rules[f],
                             .layout = SL_QUANT_LAYOUT_LINEAR,
                             .num_tokens = T,
                             .hidden = 7168,
                             .in_dtype = SL_DTYPE_BF16};
        sl_jit_spec_t spec;
        SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
        assert_registered("quant", archs[a], &spec);
        sl_dequant_args_t d = {.format = fmts[f], .num_tokens = T, .hidden = 7168, .out_dtype = SL_DTYPE_F16};
        SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
        assert_registered("quant", archs[a], &spec);
        /* the warps of the per-arch table: one per block for decode */
        char desc[512];
        sl_jit_spec_describe(&spec, desc, sizeof desc);
        char want[32];
        snprintf(want, sizeof want, "WARPS=%d", sl_kq_warps(archs[a], SMS, T));
        assert_non_null(strstr(desc, want));
      }
  /* an unregistered size still compiles (a deployment's own hidden size) */
  sl_quant_args_t q = {.format = SL_QUANT_NVFP4,
                       .layout = SL_QUANT_LAYOUT_SWIZZLED,
                       .num_tokens = 4,
                       .hidden = 2880,
                       .in_dtype = SL_DTYPE_F32};
  sl_jit_spec_t spec;
  for (int a = 0; a < 2; a++) {
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_compiles(&spec, archs[a]);
  }
}

static void test_act_router_specs(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                       .num_tokens = 4096,
                       .inter = 768,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_FP8_E4M3,
                       .scale_ue8m0 = true};
    sl_jit_spec_t spec;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_registered("act", archs[a], &spec);
    x.inter = 1536; /* Qwen3-235B's experts: not registered, compiles on demand */
    x.out_dtype = SL_DTYPE_BF16;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_compiles(&spec, archs[a]);
    sl_router_args_t r = {.kind = SL_ROUTER_SIGMOID_GROUPED,
                          .num_tokens = 16,
                          .num_experts = 256,
                          .top_k = 8,
                          .num_groups = 8,
                          .topk_groups = 4,
                          .logits_dtype = SL_DTYPE_F32};
    SL_ASSERT_OK(sl_router_spec(&r, archs[a], SMS, &spec));
    assert_registered("router", archs[a], &spec);
    r.kind = SL_ROUTER_SOFTMAX_TOPK;
    r.num_experts = 128;
    r.logits_dtype = SL_DTYPE_BF16;
    r.num_tokens = 4096;
    SL_ASSERT_OK(sl_router_spec(&r, archs[a], SMS, &spec));
    assert_registered("router", archs[a], &spec);
  }
}

/* The software E4M3 fallback (SL_KQ_HW_E4M3=0, kernels/quant_dev.cuh) and the fp32 E2M1 encoder
 * (SL_KQ_E2M1_BF16X2=0) compile too. */
static void test_software_e4m3_fallback(void **state) {
  sl_quant_args_t q = {.format = SL_QUANT_MXFP8,
                       .rule = SL_QUANT_RULE_FLOOR,
                       .num_tokens = 4,
                       .hidden = 7168,
                       .in_dtype = SL_DTYPE_BF16};
  sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = 4,
                     .inter = 768,
                     .in_dtype = SL_DTYPE_BF16,
                     .out_dtype = SL_DTYPE_FP8_E4M3};
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_KQ_HW_E4M3", "0"));
    assert_compiles(&spec, archs[a]);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_KQ_HW_E4M3", "0"));
    assert_compiles(&spec, archs[a]);
    /* and the fp32 E2M1 encoder in place of the packed bf16x2 one (SL_KQ_E2M1_BF16X2=0) */
    sl_quant_args_t m = {.format = SL_QUANT_MXFP4,
                         .rule = SL_QUANT_RULE_FLOOR,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .in_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_quant_spec(&m, archs[a], SMS, &spec));
    SL_ASSERT_OK(sl_jit_spec_define(&spec, "SL_KQ_E2M1_BF16X2", "0"));
    assert_compiles(&spec, archs[a]);
  }
}

/* The segment layout (SEG > 0, kernels/kq_launch.h): the registered point's specs at the
 * prefill shape, and unregistered shapes that take the kernels' uneven paths (a segment length
 * that does not divide the row, an odd one against UNROLL 2, ragged rows, f32 / f16) compile
 * for both archs; the override changes the spec's SEG and SL_KQ_SEG_TABLE restores the table. */
static void test_segment_layout_specs(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    char desc[512];
    sl_quant_args_t q = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .in_dtype = SL_DTYPE_BF16};
    sl_kq_set_seg_override(SL_KQ_SEG_POINT);
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_non_null(strstr(desc, "SEG=8"));
    assert_registered("quant", archs[a], &spec);
    sl_dequant_args_t d = {.format = SL_QUANT_MXFP4,
                           .layout = SL_QUANT_LAYOUT_SWIZZLED,
                           .num_tokens = 8192,
                           .hidden = 7168,
                           .out_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_registered("quant", archs[a], &spec);
    sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                       .num_tokens = 8192,
                       .inter = 768,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_FP8_E4M3};
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_registered("act", archs[a], &spec);
    sl_kq_set_seg_override(3); /* 2944 bf16 = 11.5 chunks: 4 segments, the last of 3 chunks, half a chunk */
    q.hidden = 2944;
    q.format = SL_QUANT_FP8_GROUP;
    q.layout = SL_QUANT_LAYOUT_LINEAR;
    q.rule = SL_QUANT_RULE_IEEE;
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_non_null(strstr(desc, "SEG=3"));
    assert_compiles(&spec, archs[a]);
    d.hidden = 2944;
    d.format = SL_QUANT_NVFP4;
    d.out_dtype = SL_DTYPE_F32;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_compiles(&spec, archs[a]);
    x.inter = 640;
    x.in_dtype = SL_DTYPE_F16;
    x.out_dtype = SL_DTYPE_F16;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_compiles(&spec, archs[a]);
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    char want[16];
    snprintf(want, sizeof want, "SEG=%d", sl_kq_arch_cfg(archs[a])->seg);
    assert_non_null(strstr(desc, want));
  }
}

/* The FP4 quantizers' whole block per lane (quant.cu QPAIR, kq_launch.h sl_kq_qpair: NVFP4 16
 * elements, MXFP4 32): on by the Hopper table where the launch allows it (16-bit inputs, the
 * segment layout, whole groups of 2 / 4 chunks per task; MXFP4 on rows of more than 16 chunks
 * only) and then a registered point; never at
 * decode, for fp32 inputs, ragged rows (2080), segments not a whole group, or an 8-bit format; the
 * override forces it off, or on where it applies (Blackwell's table has the item layout: there
 * with a segment override, compiled). */
/* SiLU's e^-g by ex2.approx (kernels/act.cu FASTEXP): 16-bit outputs always, fp32 outputs never,
 * the FP8 output as the arch table says (kq_launch.h act8_fast_exp) unless the override forces it;
 * both FP8 choices are registered JIT points at prefill, at the FP8-out activation's own segment
 * length (seg_act8). GELU follows its own entry (gelu_fast_exp), not SiLU's FP8 override. */
static void test_act8_fast_exp_specs(void **state) {
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                       .num_tokens = 32768, /* the prefill launch (8192 rows of 768 are q8_small's) */
                       .inter = 768,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "FASTEXP=1");
    x.out_dtype = SL_DTYPE_F32;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "FASTEXP=0");
    x.out_dtype = SL_DTYPE_FP8_E4M3;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, sl_kq_arch_cfg(archs[a])->act8_fast_exp ? "FASTEXP=1" : "FASTEXP=0");
    /* its own segment length (seg_act8): Hopper 2, Blackwell's item layout */
    assert_define(&spec, archs[a] == SL_ARCH_HOPPER ? "SEG=2" : "SEG=0");
    assert_registered("act", archs[a], &spec);
    for (int f = 0; f < 2; f++) {
      sl_kq_set_act8_fast_exp_override(f);
      SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
      assert_define(&spec, f ? "FASTEXP=1" : "FASTEXP=0");
      assert_registered("act", archs[a], &spec);
      x.kind = SL_ACT_GELU_TANH_MUL; /* GELU: its own table entry, whatever SiLU's override */
      SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
      assert_define(&spec, sl_kq_arch_cfg(archs[a])->gelu_fast_exp ? "FASTEXP=1" : "FASTEXP=0");
      x.kind = SL_ACT_SILU_MUL;
    }
    sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
  }
}

/* GELU(tanh)'s 1 + tanh(z) as 2 / (1 + e^-2z) by ex2.approx (kernels/act.cu FASTEXP): into 16-bit and
 * FP8 outputs as the arch table's gelu_fast_exp says unless its override forces it, fp32 outputs never;
 * both choices are registered JIT points at decode (the one-item kernel), at prefill and at the FP8-out
 * activation's own segment length. */
static void test_gelu_fast_exp_specs(void **state) {
  static const sl_dtype_t outs[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_FP8_E4M3};
  for (int a = 0; a < 2; a++)
    for (int t = 0; t < 2; t++)
      for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
        sl_jit_spec_t spec;
        sl_act_args_t x = {.kind = SL_ACT_GELU_TANH_MUL,
                           .num_tokens = t ? 8192 : 1,
                           .inter = 768,
                           .in_dtype = outs[o] == SL_DTYPE_F16 ? SL_DTYPE_F16 : SL_DTYPE_BF16,
                           .out_dtype = outs[o]};
        SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
        assert_define(&spec, sl_kq_arch_cfg(archs[a])->gelu_fast_exp ? "FASTEXP=1" : "FASTEXP=0");
        assert_registered("act", archs[a], &spec);
        for (int f = 0; f < 2; f++) {
          sl_kq_set_gelu_fast_exp_override(f);
          SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
          assert_define(&spec, f ? "FASTEXP=1" : "FASTEXP=0");
          assert_registered("act", archs[a], &spec);
          sl_kq_set_act8_fast_exp_override(!f); /* SiLU's FP8 override does not move GELU */
          SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
          assert_define(&spec, f ? "FASTEXP=1" : "FASTEXP=0");
          sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
          x.out_dtype = SL_DTYPE_F32; /* fp32 outputs: tanhf always */
          SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
          assert_define(&spec, "FASTEXP=0");
          x.out_dtype = outs[o];
        }
        sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
      }
}

/* The one-item activation's lane width (kernels/act.cu PACK, kq_launch.h act16_pack): the table's at decode from and
 * into 16-bit dtypes (registered, compiles), each override too; 16 where the kernel is not the one-item one (T=8192)
 * and for fp32 and FP8 outputs. */
static void test_act16_pack_specs(void **state) {
  for (int a = 0; a < 2; a++)
    for (int kind = 0; kind < 2; kind++) {
      sl_jit_spec_t spec;
      sl_act_args_t x = {.kind = (sl_act_kind_t)kind,
                         .num_tokens = 1,
                         .inter = 768,
                         .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_BF16};
      const int table = sl_kq_act16_pack(archs[a]);
      char want[16], desc[512];
      SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
      sl_jit_spec_describe(&spec, desc, sizeof desc);
      const bool one = strstr(desc, "ONEITEM=1") != NULL; /* sm_100's table: no one-item kernel (unroll 2) */
      assert_true(one || archs[a] == SL_ARCH_BLACKWELL);
      snprintf(want, sizeof want, "PACK=%d", one ? table : 16);
      assert_define(&spec, want);
      assert_registered("act", archs[a], &spec);
      static const int packs[] = {16, 8, 4};
      for (int p = 0; p < 3; p++) {
        sl_kq_set_act16_pack_override(packs[p]);
        assert_int_equal(sl_kq_act16_pack(archs[a]), packs[p]);
        for (int d = 0; d < 2; d++) {
          x.in_dtype = x.out_dtype = d ? SL_DTYPE_F16 : SL_DTYPE_BF16;
          snprintf(want, sizeof want, "PACK=%d", one ? packs[p] : 16);
          SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
          assert_define(&spec, want);
          assert_registered("act", archs[a], &spec);
          assert_compiles(&spec, archs[a]);
        }
        x.in_dtype = SL_DTYPE_BF16;
        x.out_dtype = SL_DTYPE_F32; /* not a 16-bit output: the 16-byte lane */
        SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
        assert_define(&spec, "PACK=16");
        x.out_dtype = SL_DTYPE_FP8_E4M3;
        SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
        assert_define(&spec, "PACK=16");
        x.out_dtype = SL_DTYPE_BF16;
        x.num_tokens = 8192; /* prefill: not the one-item kernel */
        SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
        assert_define(&spec, "PACK=16");
        x.num_tokens = 1;
      }
      sl_kq_set_act16_pack_override(0);
      assert_int_equal(sl_kq_act16_pack(archs[a]), table);
    }
  assert_int_equal(sl_kq_act16_pack(SL_ARCH_HOPPER), 8);
  assert_int_equal(sl_kq_act16_pack(SL_ARCH_BLACKWELL), 16);
  /* The table's width only while its blocks are <= SL_KQ_ACT16_PACK_PER_SM per SM; a forced one up to the one-item
   * bound: T=100 x 768 columns is 300 one-item blocks at 16 bytes (one warp each), 600 at 8 (> 2 x 132) */
  sl_act_args_t x = {.kind = SL_ACT_SILU_MUL, .num_tokens = 100, .inter = 768, .in_dtype = SL_DTYPE_BF16,
                     .out_dtype = SL_DTYPE_BF16};
  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_act_spec(&x, SL_ARCH_HOPPER, SMS, &spec));
  assert_define(&spec, "ONEITEM=1");
  assert_define(&spec, "PACK=16");
  x.num_tokens = 44; /* 264 blocks at 8 bytes: 2 per SM */
  SL_ASSERT_OK(sl_act_spec(&x, SL_ARCH_HOPPER, SMS, &spec));
  assert_define(&spec, "PACK=8");
  x.num_tokens = 100;
  sl_kq_set_act16_pack_override(8);
  assert_true(sl_kq_act16_pack_forced());
  SL_ASSERT_OK(sl_act_spec(&x, SL_ARCH_HOPPER, SMS, &spec));
  assert_define(&spec, "PACK=8");
  sl_kq_set_act16_pack_override(0);
  assert_false(sl_kq_act16_pack_forced());
}

static void test_qpair_specs(void **state) {
  for (int a = 0; a < 2; a++) {
    const bool hopper = archs[a] == SL_ARCH_HOPPER;
    sl_quant_args_t q = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 2048,
                         .in_dtype = SL_DTYPE_BF16};
    sl_jit_spec_t spec;
    assert_quant_define(&q, archs[a], hopper ? "QPAIR=1" : "QPAIR=0");
    q.hidden = 7168; /* 28 chunks, unroll 4: whole 4-chunk tasks */
    assert_quant_define(&q, archs[a], hopper ? "QPAIR=1" : "QPAIR=0");
    if (hopper) {
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_registered("quant", archs[a], &spec);
    }
    q.num_tokens = 1;
    assert_quant_define(&q, archs[a], "QPAIR=0");
    q.num_tokens = 8192;
    q.in_dtype = SL_DTYPE_F32;
    assert_quant_define(&q, archs[a], "QPAIR=0");
    q.in_dtype = SL_DTYPE_BF16;
    q.hidden = 2080;
    assert_quant_define(&q, archs[a], "QPAIR=0");
    q.hidden = 2048;
    q.format = SL_QUANT_MXFP4;
    q.rule = SL_QUANT_RULE_FLOOR;
    assert_quant_define(&q, archs[a], hopper ? "QPAIR=2" : "QPAIR=0"); /* MXFP4: the half block up to 16 chunks */
    q.hidden = 4096;
    assert_quant_define(&q, archs[a], hopper ? "QPAIR=2" : "QPAIR=0");
    if (hopper) {
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_define(&spec, "UNROLL=4");
      assert_compiles(&spec, archs[a]);
    }
    q.hidden = 7168; /* MXFP4, 28 chunks, unroll 4 */
    assert_quant_define(&q, archs[a], hopper ? "QPAIR=1" : "QPAIR=0");
    if (hopper) {
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_registered("quant", archs[a], &spec);
    }
    sl_kq_set_seg_override(2); /* 2-chunk tasks: half a group of four */
    assert_quant_define(&q, archs[a], "QPAIR=0");
    q.hidden = 2048;
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    q.format = SL_QUANT_MXFP8;
    sl_kq_set_qpair_override(1);
    assert_quant_define(&q, archs[a], "QPAIR=0");
    sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
    q.format = SL_QUANT_NVFP4;
    q.rule = SL_QUANT_RULE_IEEE;
    sl_kq_set_seg_override(3);
    assert_quant_define(&q, archs[a], "QPAIR=0");
    sl_kq_set_seg_override(4);
    sl_kq_set_qpair_override(0);
    assert_quant_define(&q, archs[a], "QPAIR=0");
    sl_kq_set_qpair_override(1);
    q.in_dtype = SL_DTYPE_F16;
    q.layout = SL_QUANT_LAYOUT_LINEAR;
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, "QPAIR=1");
    assert_compiles(&spec, archs[a]);
    q.format = SL_QUANT_MXFP4; /* both MX rules, both layouts, f16 and bf16 */
    for (int r = 0; r < 2; r++) {
      q.rule = r ? SL_QUANT_RULE_CEIL : SL_QUANT_RULE_FLOOR;
      q.layout = r ? SL_QUANT_LAYOUT_SWIZZLED : SL_QUANT_LAYOUT_LINEAR;
      q.in_dtype = r ? SL_DTYPE_BF16 : SL_DTYPE_F16;
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_define(&spec, "QPAIR=1");
      assert_compiles(&spec, archs[a]);
    }
    sl_kq_set_qpair_override(2); /* MXFP4's half block per lane: both rules and layouts, staged too */
    for (int r = 0; r < 3; r++) {
      q.rule = r ? SL_QUANT_RULE_CEIL : SL_QUANT_RULE_FLOOR;
      q.layout = r ? SL_QUANT_LAYOUT_SWIZZLED : SL_QUANT_LAYOUT_LINEAR;
      q.in_dtype = r ? SL_DTYPE_BF16 : SL_DTYPE_F16;
      sl_kq_set_swz_stage_override(r == 2);
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_define(&spec, "QPAIR=2");
      assert_define(&spec, r == 2 ? "SWZ_STAGE=1" : "SWZ_STAGE=0");
      assert_compiles(&spec, archs[a]);
    }
    sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
    q.hidden = 7168; /* a registered point (the jit points' hidden size) */
    if (hopper) {
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_define(&spec, "QPAIR=2");
      assert_registered("quant", archs[a], &spec);
    }
    q.hidden = 2048;
    q.format = SL_QUANT_NVFP4; /* NVFP4's half block is the one-packet lane pair: 2 means the whole block */
    assert_quant_define(&q, archs[a], "QPAIR=1");
    q.rule = SL_QUANT_RULE_IEEE;
    sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
  }
}

/* The dequantizer's occupancy (quant.cu DEQ_MIN_BLOCKS): the kernel's own rule unless the
 * benchmark's override names a count, which then reaches the spec (and compiles). */
static void test_deq_blocks_spec(void **state) {
  sl_dequant_args_t d = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .out_dtype = SL_DTYPE_BF16};
  char desc[1024];
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "DEQ_MIN_BLOCKS"));
    sl_kq_set_deq_blocks_override(8);
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, "DEQ_MIN_BLOCKS=8");
    assert_compiles(&spec, archs[a]);
    sl_kq_set_deq_blocks_override(0);
  }
}

/* The quantizers' and the activation's occupancy override (the tune sweep's "mb" rows): absent, the
 * kernels' own MIN_BLOCKS rule (no define); set, MIN_BLOCKS reaches the quantizer's spec and the
 * prefill activation's (not decode's one-warp launch), and the dequantizer keeps its own knob. */
static void test_min_blocks_spec(void **state) {
  (void)state;
  sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                       .layout = SL_QUANT_LAYOUT_LINEAR,
                       .num_tokens = 8192,
                       .hidden = 2048,
                       .in_dtype = SL_DTYPE_BF16};
  sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = 32768, /* 745 items per SM: the prefill launch, not q8_small */
                     .inter = 768,
                     .in_dtype = SL_DTYPE_BF16,
                     .out_dtype = SL_DTYPE_FP8_E4M3};
  sl_dequant_args_t d = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 2048,
                         .out_dtype = SL_DTYPE_BF16};
  char desc[1024];
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    sl_kq_set_min_blocks_override(8);
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, "MIN_BLOCKS=8");
    assert_compiles(&spec, archs[a]);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "MIN_BLOCKS=8");
    assert_compiles(&spec, archs[a]);
    x.num_tokens = 1; /* decode: one warp per block, no bound */
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    x.num_tokens = 32768;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    sl_kq_set_min_blocks_override(0);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
  }
}

/* The small prefill launch of the FP8 group quantizer and the FP8-out activation (kq_launch.h q8_small, Hopper 256
 * items per SM, GELU 192): from SMS rows below the point 4 warps, unroll 1, the item layout, MIN_BLOCKS 16, a
 * registered point; at and past it (and for GELU from 192, and the other formats, and Blackwell) the prefill
 * launch; any launch override turns it off (the benchmark's rows take the table's prefill launch). */
static void test_q8_small_specs(void **state) {
  (void)state;
  static const char *small[] = {"WARPS=4", "UNROLL=1", "SEG=0", "MIN_BLOCKS=16"};
  char desc[1024];
  for (int a = 0; a < 2; a++) {
    const bool hopper = archs[a] == SL_ARCH_HOPPER;
    sl_jit_spec_t spec;
    /* T=1024 H=7168: 28 chunks, 28672 items = 217 per SM */
    sl_quant_args_t q = {.format = SL_QUANT_FP8_GROUP,
                         .rule = SL_QUANT_RULE_CEIL,
                         .layout = SL_QUANT_LAYOUT_LINEAR,
                         .num_tokens = 1024,
                         .hidden = 7168,
                         .in_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    for (int i = 0; i < 4 && hopper; i++)
      assert_define(&spec, small[i]);
    assert_registered("quant", archs[a], &spec);
    q.in_dtype = SL_DTYPE_F32, q.rule = SL_QUANT_RULE_IEEE; /* 56 chunks: 434 items per SM, prefill */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    assert_define(&spec, "WARPS=8");
    q.num_tokens = 500; /* 214 per SM: small for fp32 inputs too */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "MIN_BLOCKS=16" : "WARPS=8");
    assert_registered("quant", archs[a], &spec);
    q.in_dtype = SL_DTYPE_BF16, q.num_tokens = 1207; /* 33796 items: 256.03 per SM, the point */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=8");
    q.num_tokens = 1206; /* 33768: 255.8 per SM */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "WARPS=4" : "WARPS=8");
    q.format = SL_QUANT_MXFP8, q.rule = SL_QUANT_RULE_FLOOR; /* only the FP8 group format */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=8");
    sl_dequant_args_t d = {.format = SL_QUANT_FP8_GROUP, .num_tokens = 1024, .hidden = 7168, .out_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec)); /* and not the dequantizer */
    assert_define(&spec, "WARPS=8");
    /* the activation into FP8: SiLU at I=7168 (217 per SM) small, GELU there prefill, at I=4096 (124) small */
    sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                       .num_tokens = 1024,
                       .inter = 7168,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_FP8_E4M3};
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    for (int i = 0; i < 4 && hopper; i++)
      assert_define(&spec, small[i]);
    assert_define(&spec, "ONEITEM=0");
    x.kind = SL_ACT_GELU_TANH_MUL;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=8");
    x.inter = 4096;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "MIN_BLOCKS=16" : "WARPS=8");
    x.inter = 768, x.scale_ue8m0 = true; /* the registered size, both kinds, either exp / tanh */
    for (int k = 0; k < 2; k++)
      for (int f = 0; f < 2; f++) {
        x.kind = k ? SL_ACT_GELU_TANH_MUL : SL_ACT_SILU_MUL;
        sl_kq_set_act8_fast_exp_override(f);
        sl_kq_set_gelu_fast_exp_override(f);
        SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
        assert_define(&spec, hopper ? "MIN_BLOCKS=16" : "WARPS=8");
        assert_define(&spec, f ? "FASTEXP=1" : "FASTEXP=0");
        assert_registered("act", archs[a], &spec);
      }
    sl_kq_set_act8_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
    sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
    x.out_dtype = SL_DTYPE_BF16; /* the 16-bit outputs keep their launch */
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    x.out_dtype = SL_DTYPE_FP8_E4M3;
    q.format = SL_QUANT_FP8_GROUP, q.num_tokens = 1024;
    sl_kq_set_warps_override(8); /* an override: the prefill launch with it */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    sl_jit_spec_describe(&spec, desc, sizeof desc);
    assert_null(strstr(desc, "MIN_BLOCKS"));
    sl_kq_set_warps_override(0);
    sl_kq_set_unroll_override(2);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "UNROLL=2");
    assert_define(&spec, "WARPS=8");
    sl_kq_set_unroll_override(0);
    sl_kq_set_min_blocks_override(12); /* the tune rows' occupancy wins over the point's */
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "MIN_BLOCKS=12" : "WARPS=8");
    sl_kq_set_min_blocks_override(0);
  }
}

/* GELU into FP8 with IEEE scales at prefill compiled for the table's gelu8_blocks (Hopper 8; kq_launch.h), either
 * form of tanh, a registered point at the activation's sizes; SiLU, UE8M0 scales, decode and Blackwell keep the
 * kernel's rule (no MIN_BLOCKS define). */
static void test_gelu8_blocks_specs(void **state) {
  (void)state;
  char desc[1024];
  for (int a = 0; a < 2; a++) {
    const bool hopper = archs[a] == SL_ARCH_HOPPER;
    sl_jit_spec_t spec;
    sl_act_args_t x = {.kind = SL_ACT_GELU_TANH_MUL,
                       .num_tokens = 32768, /* prefill */
                       .inter = 768,
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_FP8_E4M3};
    for (int f = 0; f < 2; f++) {
      sl_kq_set_gelu_fast_exp_override(f);
      SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
      sl_jit_spec_describe(&spec, desc, sizeof desc);
      if (hopper)
        assert_define(&spec, "MIN_BLOCKS=8");
      else
        assert_null(strstr(desc, "MIN_BLOCKS"));
      assert_registered("act", archs[a], &spec);
    }
    sl_kq_set_gelu_fast_exp_override(SL_KQ_ACT8_EXP_TABLE);
    x.in_dtype = SL_DTYPE_F32;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "MIN_BLOCKS=8" : "WARPS=8");
    assert_registered("act", archs[a], &spec);
    x.in_dtype = SL_DTYPE_BF16;
    const sl_act_args_t others[] = {
        {.kind = SL_ACT_GELU_TANH_MUL, .num_tokens = 32768, .inter = 768, .in_dtype = SL_DTYPE_BF16,
         .out_dtype = SL_DTYPE_FP8_E4M3, .scale_ue8m0 = true},
        {.kind = SL_ACT_SILU_MUL, .num_tokens = 32768, .inter = 768, .in_dtype = SL_DTYPE_BF16,
         .out_dtype = SL_DTYPE_FP8_E4M3},
        {.kind = SL_ACT_GELU_TANH_MUL, .num_tokens = 32768, .inter = 768, .in_dtype = SL_DTYPE_BF16,
         .out_dtype = SL_DTYPE_BF16},
        {.kind = SL_ACT_GELU_TANH_MUL, .num_tokens = 1, .inter = 768, .in_dtype = SL_DTYPE_BF16,
         .out_dtype = SL_DTYPE_FP8_E4M3},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
      SL_ASSERT_OK(sl_act_spec(&others[i], archs[a], SMS, &spec));
      sl_jit_spec_describe(&spec, desc, sizeof desc);
      assert_null(strstr(desc, "MIN_BLOCKS"));
      assert_registered("act", archs[a], &spec);
    }
  }
}

/* The dequantizers' segment lengths (kq_launch.h seg_deq8): on Hopper the FP8 group format's
 * prefill launch walks 2-chunk tasks (SEG=2, a registered point), the FP4 table dequantizer and
 * MXFP8 keep the table's seg (4); decode keeps the item layout; Blackwell's table has the item
 * layout for every kind; the override still wins. */
static void test_deq_seg_specs(void **state) {
  (void)state;
  sl_dequant_args_t d = {.format = SL_QUANT_FP8_GROUP,
                         .layout = SL_QUANT_LAYOUT_LINEAR,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .out_dtype = SL_DTYPE_BF16};
  for (int a = 0; a < 2; a++) {
    const bool hopper = archs[a] == SL_ARCH_HOPPER;
    sl_jit_spec_t spec;
    d.format = SL_QUANT_FP8_GROUP;
    d.layout = SL_QUANT_LAYOUT_LINEAR;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "SEG=2" : "SEG=0");
    assert_registered("quant", archs[a], &spec);
    d.num_tokens = 1;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, "SEG=0");
    d.num_tokens = 8192;
    sl_kq_set_seg_override(4);
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, "SEG=4");
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
    d.format = SL_QUANT_NVFP4;
    d.layout = SL_QUANT_LAYOUT_SWIZZLED;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "SEG=4" : "SEG=0");
    d.format = SL_QUANT_MXFP8;
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, hopper ? "SEG=4" : "SEG=0");
    assert_registered("quant", archs[a], &spec);
  }
}

/* Staged swizzled scales (kernels/kq_launch.h sl_kq_swz_stage, quant.cu SWZ_STAGE): by default
 * (the table's swz_stage_fmts) on Hopper for MXFP8 at every hidden size and NVFP4 on rows of <= 16
 * chunks, or wider with its whole block per lane (QPAIR: h=7168 staged; without it not), MXFP4 with
 * its half-block lane only (QPAIR 2: rows of <= 16 chunks), never Blackwell (whose table has the
 * item layout); the override forces it off or on. Forced
 * on, the prefill specs of the MX/NV swizzled formats in the segment layout carry SWZ_STAGE=1 and
 * are registered points (at the table's
 * segment length, and at the registered SL_KQ_SEG_POINT where the table has none), while
 * decode, linear scales and FP8 group stay at 0; shapes off the registered size (ragged rows, a
 * partial column tile: 2080 / 16 = 130 columns, f32, a segment length that does not divide the
 * row) compile for both archs. */
static void test_swz_stage_specs(void **state) {
  const sl_quant_format_t fmts[] = {SL_QUANT_MXFP8, SL_QUANT_MXFP4, SL_QUANT_NVFP4};
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    bool hopper = archs[a] == SL_ARCH_HOPPER;
    if (sl_kq_arch_cfg(archs[a])->seg <= 0) sl_kq_set_seg_override(SL_KQ_SEG_POINT);
    for (int f = 0; f < 3; f++) {
      sl_quant_args_t q = {.format = fmts[f],
                           .rule = SL_QUANT_RULE_CEIL,
                           .layout = SL_QUANT_LAYOUT_SWIZZLED,
                           .num_tokens = 8192,
                           .hidden = 4096,
                           .in_dtype = SL_DTYPE_BF16};
      /* the table: MXFP8, MXFP4 (its half-block lane) and NVFP4 at 16 chunks on Hopper */
      assert_quant_define(&q, archs[a], hopper ? "SWZ_STAGE=1" : "SWZ_STAGE=0");
      if (hopper && fmts[f] == SL_QUANT_MXFP4) { /* MXFP4's one-packet lane is not staged */
        sl_kq_set_qpair_override(0);
        assert_quant_define(&q, archs[a], "SWZ_STAGE=0");
        sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
      }
      q.hidden = 7168; /* 28 chunks: MXFP8, and NVFP4 with its whole block per lane (QPAIR) */
      assert_quant_define(&q, archs[a], hopper && fmts[f] != SL_QUANT_MXFP4 ? "SWZ_STAGE=1" : "SWZ_STAGE=0");
      if (hopper && fmts[f] == SL_QUANT_NVFP4) { /* without QPAIR the wide rows are not staged */
        sl_kq_set_qpair_override(0);
        assert_quant_define(&q, archs[a], "SWZ_STAGE=0");
        sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
      }
      sl_kq_set_swz_stage_override(0);
      assert_quant_define(&q, archs[a], "SWZ_STAGE=0");
      sl_kq_set_swz_stage_override(1);
      SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
      assert_define(&spec, "SWZ_STAGE=1");
      assert_define(&spec, "WARPS=8");
      assert_registered("quant", archs[a], &spec);
      q.num_tokens = 1; /* decode: one warp per block, the item layout */
      assert_quant_define(&q, archs[a], "SWZ_STAGE=0");
      q.num_tokens = 8192;
      q.layout = SL_QUANT_LAYOUT_LINEAR;
      assert_quant_define(&q, archs[a], "SWZ_STAGE=0");
      sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
    }
    sl_kq_set_swz_stage_override(1);
    sl_quant_args_t g = {.format = SL_QUANT_FP8_GROUP,
                         .rule = SL_QUANT_RULE_IEEE,
                         .layout = SL_QUANT_LAYOUT_LINEAR,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .in_dtype = SL_DTYPE_BF16};
    assert_quant_define(&g, archs[a], "SWZ_STAGE=0");
    sl_kq_set_seg_override(3);
    sl_quant_args_t r = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 2080,
                         .in_dtype = SL_DTYPE_F32};
    SL_ASSERT_OK(sl_quant_spec(&r, archs[a], SMS, &spec));
    assert_define(&spec, "SWZ_STAGE=1");
    assert_compiles(&spec, archs[a]);
    r.format = SL_QUANT_MXFP8;
    r.rule = SL_QUANT_RULE_FLOOR;
    r.in_dtype = SL_DTYPE_BF16;
    SL_ASSERT_OK(sl_quant_spec(&r, archs[a], SMS, &spec));
    assert_compiles(&spec, archs[a]);
    sl_kq_set_swz_stage_override(SL_KQ_SWZ_STAGE_TABLE);
    sl_kq_set_seg_override(SL_KQ_SEG_TABLE);
  }
}

/* The per-kind launch choices of kernels/kq_launch.h reach the specs: on Hopper the activation
 * with a 16-bit output at UNROLL 1 (unroll_act16) and its FP8-output form at the table's 2; the
 * FP4 quantizers at UNROLL 4 (unroll_fp4q) past 16 chunks per row in the segment layout only --
 * not at 4096 (16 chunks), not for MXFP8, not at decode, not for dequantization; Blackwell
 * (unmeasured) keeps 2 everywhere. The benchmark's overrides win over each, and the warps
 * override reaches the act and quant kernels but not the router. */
static void test_unroll_and_override_choices(void **state) {
  const bool hopper[2] = {true, false};
  for (int a = 0; a < 2; a++) {
    sl_jit_spec_t spec;
    sl_act_args_t x = {.kind = SL_ACT_SILU_MUL,
                       .num_tokens = 8192,
                       .inter = 768, /* the registered size */
                       .in_dtype = SL_DTYPE_BF16,
                       .out_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "UNROLL=1" : "UNROLL=2");
    assert_define(&spec, "ONEITEM=0");
    assert_registered("act", archs[a], &spec);
    x.num_tokens = 1;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "UNROLL=1" : "UNROLL=2");
    /* decode: a block per item where one warp, unroll 1 and the item layout make it one (kernels/act.c) */
    assert_define(&spec, hopper[a] ? "ONEITEM=1" : "ONEITEM=0");
    assert_registered("act", archs[a], &spec);
    /* below SMS rows: one warp per block, except (act16_wide_items, Hopper) a 16-bit output over
     * >= 4 warp items per SM: T=128 at I=2048 is 1024 items (< 8 per SM: 4 warps), at I=4096
     * 2048 (8 warps); T=16 is 128 (1 warp) */
    assert_define(&spec, "WARPS=1");
    x.inter = 4096;
    x.num_tokens = 128;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "WARPS=8" : "WARPS=1");
    x.inter = 2048;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "WARPS=4" : "WARPS=1");
    x.num_tokens = 16;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=1");
    assert_define(&spec, hopper[a] ? "ONEITEM=1" : "ONEITEM=0");
    x.num_tokens = 128;
    /* the FP8 output below SMS rows (kq_launch.h q8_decode, Hopper): one item per warp, the item layout, 4 warps
     * below 8 items per SM (T=128 I=2048: 1024 items), 8 from there (I=7168: 3584), one warp -- the one-item
     * kernel -- below 2 (T=1 I=768: 3 items); Blackwell keeps one warp and unroll 2 */
    x.out_dtype = SL_DTYPE_FP8_E4M3;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "WARPS=4" : "WARPS=1");
    assert_define(&spec, hopper[a] ? "UNROLL=1" : "UNROLL=2");
    assert_define(&spec, "SEG=0");
    assert_define(&spec, "ONEITEM=0");
    x.inter = 7168;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "WARPS=8" : "WARPS=1");
    x.num_tokens = 1;
    x.inter = 768;
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "UNROLL=1" : "UNROLL=2");
    assert_define(&spec, "WARPS=1");
    assert_define(&spec, hopper[a] ? "ONEITEM=1" : "ONEITEM=0");
    assert_registered("act", archs[a], &spec);
    x.num_tokens = 100; /* 300 items (>= 2 per SM): 4 warps, registered */
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "WARPS=4" : "WARPS=1");
    assert_registered("act", archs[a], &spec);
    /* the quantizers below SMS rows take the same launch without the one-warp case (FP8 group, T=1 H=7168: 28
     * items, 4 warps; T=128: 3584, 8 warps); the dequantizer keeps one warp and the table's unroll */
    for (int qt = 1; qt <= 128; qt *= 128) {
      sl_quant_args_t q8 = {.format = SL_QUANT_FP8_GROUP,
                            .layout = SL_QUANT_LAYOUT_LINEAR,
                            .num_tokens = qt,
                            .hidden = 7168,
                            .in_dtype = SL_DTYPE_BF16};
      SL_ASSERT_OK(sl_quant_spec(&q8, archs[a], SMS, &spec));
      assert_define(&spec, hopper[a] ? (qt == 1 ? "WARPS=4" : "WARPS=8") : "WARPS=1");
      assert_define(&spec, hopper[a] ? "UNROLL=1" : "UNROLL=2");
      assert_define(&spec, "SEG=0");
      assert_registered("quant", archs[a], &spec);
      q8.format = SL_QUANT_MXFP4, q8.layout = SL_QUANT_LAYOUT_SWIZZLED, q8.rule = SL_QUANT_RULE_CEIL;
      SL_ASSERT_OK(sl_quant_spec(&q8, archs[a], SMS, &spec));
      assert_define(&spec, "SWZ_STAGE=0");
      assert_define(&spec, "QPAIR=0");
      assert_registered("quant", archs[a], &spec);
      sl_dequant_args_t dq = {.format = SL_QUANT_FP8_GROUP, .num_tokens = qt, .hidden = 7168,
                              .out_dtype = SL_DTYPE_BF16};
      SL_ASSERT_OK(sl_dequant_spec(&dq, archs[a], SMS, &spec));
      assert_define(&spec, "WARPS=1");
      assert_define(&spec, "UNROLL=2");
    }
    sl_quant_args_t q = {.format = SL_QUANT_NVFP4,
                         .layout = SL_QUANT_LAYOUT_SWIZZLED,
                         .num_tokens = 8192,
                         .hidden = 7168,
                         .in_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "UNROLL=4" : "UNROLL=2");
    assert_registered("quant", archs[a], &spec);
    /* the whole-block NVFP4 lane takes unroll 4 on narrow rows too; the one-packet lane keeps 2 */
    q.hidden = 2048;
    SL_ASSERT_OK(sl_quant_spec(&q, archs[a], SMS, &spec));
    assert_define(&spec, hopper[a] ? "UNROLL=4" : "UNROLL=2");
    assert_define(&spec, hopper[a] ? "QPAIR=1" : "QPAIR=0");
    assert_compiles(&spec, archs[a]);
    sl_kq_set_qpair_override(0);
    assert_quant_define(&q, archs[a], "UNROLL=2");
    sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
    q.in_dtype = SL_DTYPE_F32; /* no whole-block lane for fp32 inputs */
    assert_quant_define(&q, archs[a], "UNROLL=2");
    q.in_dtype = SL_DTYPE_BF16;
    q.format = SL_QUANT_MXFP4; /* MXFP4's half-block lane: unroll 4 too; its one-packet lane 2 */
    assert_quant_define(&q, archs[a], hopper[a] ? "UNROLL=4" : "UNROLL=2");
    sl_kq_set_qpair_override(0);
    assert_quant_define(&q, archs[a], "UNROLL=2");
    sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
    q.hidden = 7168;
    q.layout = SL_QUANT_LAYOUT_LINEAR;
    q.rule = SL_QUANT_RULE_FLOOR;
    assert_quant_define(&q, archs[a], hopper[a] ? "UNROLL=4" : "UNROLL=2");
    q.hidden = 4096;
    assert_quant_define(&q, archs[a], hopper[a] ? "UNROLL=4" : "UNROLL=2");
    sl_kq_set_qpair_override(0);
    assert_quant_define(&q, archs[a], "UNROLL=2");
    sl_kq_set_qpair_override(SL_KQ_QPAIR_TABLE);
    q.hidden = 7168;
    q.num_tokens = 1; /* decode: the item layout, one item per warp on Hopper (q8_decode) */
    assert_quant_define(&q, archs[a], hopper[a] ? "UNROLL=1" : "UNROLL=2");
    assert_quant_define(&q, archs[a], "SEG=0");
    q.num_tokens = 8192;
    q.format = SL_QUANT_MXFP8;
    assert_quant_define(&q, archs[a], "UNROLL=2");
    sl_dequant_args_t d = {.format = SL_QUANT_NVFP4, .num_tokens = 8192, .hidden = 7168, .out_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_dequant_spec(&d, archs[a], SMS, &spec));
    assert_define(&spec, "UNROLL=2");
    /* overrides (the benchmark sweep's), then the table again */
    sl_kq_set_unroll_override(1);
    q.format = SL_QUANT_NVFP4;
    assert_quant_define(&q, archs[a], "UNROLL=1");
    x.out_dtype = SL_DTYPE_BF16;
    sl_kq_set_unroll_override(4);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "UNROLL=4");
    sl_kq_set_unroll_override(0);
    sl_kq_set_warps_override(4);
    SL_ASSERT_OK(sl_act_spec(&x, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=4");
    assert_quant_define(&q, archs[a], "WARPS=4");
    sl_router_args_t r = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                          .num_tokens = 1,
                          .num_experts = 128,
                          .top_k = 8,
                          .logits_dtype = SL_DTYPE_BF16};
    SL_ASSERT_OK(sl_router_spec(&r, archs[a], SMS, &spec));
    assert_define(&spec, "WARPS=1"); /* the router keeps the table's */
    sl_kq_set_warps_override(0);
    assert_quant_define(&q, archs[a], "WARPS=8");
  }
}

/* The GPU self-test of quant_dev.cuh's reciprocals (kernels/quant_selftest.cu: sl_kq_rcp_rn / sl_kq_rcp_rd against
 * __frcp_rn / __frcp_rd, run by tests/gpu/test_quant.c) compiles for both archs: its inline PTX (rcp.approx.ftz,
 * fma.rm) assembles. */
static void test_rcp_selftest_compiles(void **state) {
  (void)state;
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    sl_jit_spec_t spec;
    sl_jit_spec_init(&spec, "kernels/quant_selftest.cu", "sl_rcp_selftest");
    assert_compiles(&spec, archs[a]);
  }
}

static void test_missing_constant_fails_loudly(void **state) {
  sl_jit_spec_t spec;
  sl_jit_spec_init(&spec, "kernels/quant.cu", "sl_quant_kernel");
  SL_ASSERT_OK(sl_jit_spec_define(&spec, "QFMT", "%d", SL_QFMT_MXFP8));
  void *cubin = NULL;
  size_t size = 0;
  assert_int_equal(sl_jit_compile(&spec, SL_ARCH_HOPPER, &cubin, &size, NULL), SL_ERR_JIT);
  assert_non_null(strstr(sl_last_error(), "QRULE"));
  free(cubin);
}

int main(void) {
  if (!sl_jit_available()) {
    printf("SKIPPED: this build has no NVRTC\n");
    return SL_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quant_specs),
      cmocka_unit_test(test_act_router_specs),
      cmocka_unit_test(test_software_e4m3_fallback),
      cmocka_unit_test(test_segment_layout_specs),
      cmocka_unit_test(test_swz_stage_specs),
      cmocka_unit_test(test_deq_blocks_spec),
      cmocka_unit_test(test_min_blocks_spec),
      cmocka_unit_test(test_deq_seg_specs),
      cmocka_unit_test(test_qpair_specs),
      cmocka_unit_test(test_act8_fast_exp_specs),
      cmocka_unit_test(test_gelu_fast_exp_specs),
      cmocka_unit_test(test_act16_pack_specs),
      cmocka_unit_test(test_unroll_and_override_choices),
      cmocka_unit_test(test_q8_small_specs),
      cmocka_unit_test(test_rcp_selftest_compiles),
      cmocka_unit_test(test_gelu8_blocks_specs),
      cmocka_unit_test(test_missing_constant_fails_loudly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
