/* GPU test of the library's small kernels launched as programmatic dependents (the `pdl` argument, sm_90+;
 * kernels/moe_pdl.cuh sl_pdl_entry): a decode-shaped chain in which every stage reads what the stage before wrote --
 *   embedding -> RMSNorm + residual -> router (the normed rows as [36 T, 128] logits) -> FP8 group quant ->
 *   FP8 dequant -> QK-norm + RoPE in place (32 + 4 heads x 128) -> SiLU-and-mul into FP8 groups ->
 *   NVFP4 quant (swizzled) -> NVFP4 dequant
 * -- run with every stage pdl = false, then, on poisoned outputs and poisoned intermediates, with every stage pdl =
 * true, on a stream and captured in a CUDA graph. Each stage's kernel is the same code either way (the PDL entry
 * only adds the wait and the trigger), so every buffer must come out bit for bit the same: a stage that read its
 * input before its predecessor had finished would read the poison (NaN for the floats, 0xFF codes). Fresh random
 * inputs per case; T = 1, 16 (decode) and 200 (more rows than SMs); each kernel's own values against the CPU are
 * the other gpu tests'. Without the wait (trigger only) the graph case failed at T=1 (session 33 call 10: the router's
 * ids). Skipped before sm_90 (no PDL there; the flag is ignored). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/act.h"
#include "kernels/embedding.h"
#include "kernels/qknorm.h"
#include "kernels/quant.h"
#include "kernels/rmsnorm.h"
#include "kernels/router.h"
#include "sl_test.h"

static sl_device_t *dev;

enum { H = 4608, HEADS = 36, QH = 32, HD = 128, VOCAB = 1000, MAXPOS = 4096, I = H / 2, EXPERTS = 128, TOPK = 8 };

/* Every device buffer of the chain, in one table so both runs can poison and read them all. */
enum {
  B_IDS,
  B_TABLE,
  B_RES0,
  B_W,
  B_QW,
  B_KW,
  B_POS,
  B_COS,
  B_SIN,   /* inputs */
  B_BLOCK, /* scratch the stream works on first */
  B_ERR,
  B_X,
  B_RES,
  B_Y,
  B_RIDS,
  B_RW,
  B_C8,
  B_S8,
  B_Z,
  B_A8,
  B_AS,
  B_C4,
  B_S4,
  B_Z4, /* written by the chain */
  NBUF
};
#define FIRST_OUT B_ERR

typedef struct {
  int T;
  size_t bytes[NBUF];
  void *d[NBUF];
} chain_t;

static size_t swz_bytes(int T, int blocks) {
  return (size_t)((T + 127) / 128 * 128) * (size_t)((blocks + 3) / 4 * 4);
}

static void chain_alloc(chain_t *c, int T) {
  memset(c, 0, sizeof *c);
  c->T = T;
  size_t *b = c->bytes;
  b[B_IDS] = (size_t)T * 4, b[B_TABLE] = (size_t)VOCAB * H * 2, b[B_RES0] = (size_t)T * H * 2, b[B_W] = H * 2;
  b[B_QW] = b[B_KW] = HD * 2, b[B_POS] = (size_t)T * 4, b[B_COS] = b[B_SIN] = (size_t)MAXPOS * (HD / 2) * 4;
  b[B_ERR] = 8, b[B_X] = b[B_RES] = b[B_Y] = b[B_Z] = b[B_Z4] = (size_t)T * H * 2;
  b[B_RIDS] = b[B_RW] = (size_t)T * HEADS * TOPK * 4;
  b[B_C8] = (size_t)T * H, b[B_S8] = (size_t)T * (H / 128) * 4, b[B_A8] = (size_t)T * I,
  b[B_AS] = (size_t)T * (I / 128) * 4;
  b[B_C4] = (size_t)T * H / 2, b[B_S4] = swz_bytes(T, H / 16), b[B_BLOCK] = (size_t)64 << 20;
  for (int i = 0; i < NBUF; i++)
    SL_ASSERT_OK(sl_device_malloc(dev, b[i], &c->d[i]));
}

static void chain_free(chain_t *c) {
  for (int i = 0; i < NBUF; i++)
    sl_device_free(dev, c->d[i]);
}

/* Fresh inputs: random bf16 table rows, residual and weights, ids in range, positions, a RoPE cache. */
static void chain_inputs(chain_t *c, uint64_t *rng) {
  for (int i = B_IDS; i < FIRST_OUT; i++) {
    if (i == B_BLOCK) continue;
    const size_t n = c->bytes[i];
    void *h = malloc(n);
    assert_non_null(h);
    if (i == B_IDS || i == B_POS)
      for (int t = 0; t < c->T; t++)
        ((int32_t *)h)[t] = (int32_t)(sl_test_rand_u64(rng) % (i == B_IDS ? VOCAB : MAXPOS));
    else if (i == B_COS || i == B_SIN)
      for (size_t k = 0; k < n / 4; k++)
        ((float *)h)[k] = sl_test_rand_uniform(rng, -1.0f, 1.0f);
    else
      for (size_t k = 0; k < n / 2; k++)
        sl_store_f32(h, SL_DTYPE_BF16, k,
                     i == B_W || i == B_QW || i == B_KW ? sl_test_rand_uniform(rng, 0.5f, 1.5f)
                                                        : 2.0f * sl_test_rand_normal(rng));
    SL_ASSERT_OK(sl_memcpy(dev, c->d[i], h, n, NULL));
    free(h);
  }
  SL_ASSERT_OK(sl_device_sync(dev));
}

/* Poison everything the chain writes, and the residual it updates is reset from its input copy. */
static void chain_reset(chain_t *c) {
  for (int i = FIRST_OUT; i < NBUF; i++)
    sl_test_poison(dev, c->d[i], c->bytes[i]);
  SL_ASSERT_OK(sl_memcpy(dev, c->d[B_RES], c->d[B_RES0], c->bytes[B_RES], NULL));
  SL_ASSERT_OK(sl_embedding_error_reset(dev, c->d[B_ERR], NULL));
  SL_ASSERT_OK(sl_device_sync(dev));
}

static void chain_run(chain_t *c, bool pdl, sl_stream_t *st) {
  void **d = c->d;
  const int T = c->T;
  sl_embedding_args_t e = {.ids = d[B_IDS],
                           .table = d[B_TABLE],
                           .out = d[B_X],
                           .error = d[B_ERR],
                           .tokens = T,
                           .vocab = VOCAB,
                           .hidden = H,
                           .dtype = SL_DTYPE_BF16,
                           .pdl = pdl};
  SL_ASSERT_OK(sl_embedding(dev, &e, st));
  sl_rmsnorm_args_t n = {.x = d[B_X],
                         .y = d[B_Y],
                         .residual = d[B_RES],
                         .weight = d[B_W],
                         .rows = T,
                         .hidden = H,
                         .in_dtype = SL_DTYPE_BF16,
                         .out_dtype = SL_DTYPE_BF16,
                         .w_dtype = SL_DTYPE_BF16,
                         .res_dtype = SL_DTYPE_BF16,
                         .eps = 1e-6f,
                         .pdl = pdl};
  SL_ASSERT_OK(sl_rmsnorm(dev, &n, st));
  sl_router_args_t r = {.kind = SL_ROUTER_SOFTMAX_TOPK,
                        .num_tokens = T * HEADS,
                        .num_experts = EXPERTS,
                        .top_k = TOPK,
                        .renormalize = true,
                        .routed_scaling = 1.0f,
                        .logits_dtype = SL_DTYPE_BF16,
                        .logits = d[B_Y],
                        .topk_ids = d[B_RIDS],
                        .topk_weights = d[B_RW],
                        .pdl = pdl};
  SL_ASSERT_OK(sl_router(dev, &r, st));
  sl_quant_args_t q8 = {.format = SL_QUANT_FP8_GROUP,
                        .rule = SL_QUANT_RULE_IEEE,
                        .layout = SL_QUANT_LAYOUT_LINEAR,
                        .num_tokens = T,
                        .hidden = H,
                        .in_dtype = SL_DTYPE_BF16,
                        .in = d[B_Y],
                        .codes = d[B_C8],
                        .scales = d[B_S8],
                        .global_scale = 1.0f,
                        .pdl = pdl};
  SL_ASSERT_OK(sl_quant(dev, &q8, st));
  sl_dequant_args_t d8 = {.format = SL_QUANT_FP8_GROUP,
                          .layout = SL_QUANT_LAYOUT_LINEAR,
                          .num_tokens = T,
                          .hidden = H,
                          .codes = d[B_C8],
                          .scales = d[B_S8],
                          .global_scale = 1.0f,
                          .out_dtype = SL_DTYPE_BF16,
                          .out = d[B_Z],
                          .pdl = pdl};
  SL_ASSERT_OK(sl_dequant(dev, &d8, st));
  sl_qknorm_args_t k = {.q = d[B_Z],
                        .k = (char *)d[B_Z] + QH * HD * 2,
                        .q_row_stride = H,
                        .k_row_stride = H,
                        .tokens = T,
                        .q_heads = QH,
                        .kv_heads = HEADS - QH,
                        .head_dim = HD,
                        .q_weight = d[B_QW],
                        .k_weight = d[B_KW],
                        .dtype = SL_DTYPE_BF16,
                        .w_dtype = SL_DTYPE_BF16,
                        .eps = 1e-6f,
                        .rope = true,
                        .rot_dim = HD,
                        .positions = d[B_POS],
                        .cos_cache = d[B_COS],
                        .sin_cache = d[B_SIN],
                        .max_pos = MAXPOS,
                        .pdl = pdl};
  SL_ASSERT_OK(sl_qknorm(dev, &k, st));
  sl_act_args_t a = {.kind = SL_ACT_SILU_MUL,
                     .num_tokens = T,
                     .inter = I,
                     .in_dtype = SL_DTYPE_BF16,
                     .out_dtype = SL_DTYPE_FP8_E4M3,
                     .in = d[B_Z],
                     .out = d[B_A8],
                     .out_scales = d[B_AS],
                     .pdl = pdl};
  SL_ASSERT_OK(sl_act(dev, &a, st));
  sl_quant_args_t q4 = {.format = SL_QUANT_NVFP4,
                        .layout = SL_QUANT_LAYOUT_SWIZZLED,
                        .num_tokens = T,
                        .hidden = H,
                        .in_dtype = SL_DTYPE_BF16,
                        .in = d[B_Z],
                        .codes = d[B_C4],
                        .scales = d[B_S4],
                        .global_scale = 448.0f * 6.0f / 16.0f,
                        .pdl = pdl};
  SL_ASSERT_OK(sl_quant(dev, &q4, st));
  sl_dequant_args_t d4 = {.format = SL_QUANT_NVFP4,
                          .layout = SL_QUANT_LAYOUT_SWIZZLED,
                          .num_tokens = T,
                          .hidden = H,
                          .codes = d[B_C4],
                          .scales = d[B_S4],
                          .global_scale = q4.global_scale,
                          .out_dtype = SL_DTYPE_BF16,
                          .out = d[B_Z4],
                          .pdl = pdl};
  SL_ASSERT_OK(sl_dequant(dev, &d4, st));
}

/* Every written buffer to the host. */
static void **chain_read(chain_t *c) {
  void **h = calloc(NBUF, sizeof *h);
  assert_non_null(h);
  for (int i = FIRST_OUT; i < NBUF; i++) {
    h[i] = malloc(c->bytes[i]);
    assert_non_null(h[i]);
    SL_ASSERT_OK(sl_memcpy(dev, h[i], c->d[i], c->bytes[i], NULL));
  }
  SL_ASSERT_OK(sl_device_sync(dev));
  return h;
}

static void free_read(void **h) {
  for (int i = FIRST_OUT; i < NBUF; i++)
    free(h[i]);
  free(h);
}

static const char *const names[NBUF] = {
    [B_ERR] = "embedding error", [B_X] = "embedding",       [B_RES] = "residual",      [B_Y] = "rmsnorm",
    [B_RIDS] = "router ids",     [B_RW] = "router weights", [B_C8] = "fp8 codes",      [B_S8] = "fp8 scales",
    [B_Z] = "dequant + qknorm",  [B_A8] = "act fp8 codes",  [B_AS] = "act fp8 scales", [B_C4] = "nvfp4 codes",
    [B_S4] = "nvfp4 scales",     [B_Z4] = "nvfp4 dequant"};

/* Bytes per element of each written buffer for the "nothing left poisoned" check (0: not checked -- the
 * embedding's error word reads all ones when no id was bad, and 0xFF is a valid pair of NVFP4 codes). */
static const int elem_bytes[NBUF] = {[B_X] = 2,  [B_RES] = 2, [B_Y] = 2,  [B_RIDS] = 4, [B_RW] = 4, [B_C8] = 1,
                                     [B_S8] = 4, [B_Z] = 2,   [B_A8] = 1, [B_AS] = 4,   [B_S4] = 1, [B_Z4] = 2};

/* The run without PDL wrote every element: no element is the poison's all-ones pattern (a NaN, an id of -1, an
 * E4M3 NaN code or scale), so the comparison below cannot pass on buffers no kernel wrote. */
static void check_written(void **h, const chain_t *c) {
  for (int i = FIRST_OUT; i < NBUF; i++) {
    const int eb = elem_bytes[i];
    for (size_t k = 0; eb && k < c->bytes[i]; k += (size_t)eb) {
      const unsigned char *p = (const unsigned char *)h[i] + k;
      bool ones = true;
      for (int j = 0; j < eb; j++)
        ones = ones && p[j] == 0xff;
      if (ones) fail_msg("T=%d: %s element %zu was not written by the chain without PDL", c->T, names[i], k / eb);
    }
  }
}

static void run_case(uint64_t *rng, int T, bool graph) {
  chain_t c;
  chain_alloc(&c, T);
  sl_stream_t *st;
  SL_ASSERT_OK(sl_stream_create(dev, &st));
  chain_inputs(&c, rng);
  chain_reset(&c);
  chain_run(&c, false, st);
  SL_ASSERT_OK(sl_stream_sync(dev, st));
  SL_ASSERT_OK(sl_device_check(dev, "the chain without PDL"));
  SL_ASSERT_OK(sl_embedding_check(dev, c.d[B_ERR], VOCAB, NULL));
  void **want = chain_read(&c);
  check_written(want, &c);
  sl_graph_t *g = NULL;
  if (graph) { /* captured once (programmatic edges between the nodes), replayed on poisoned buffers */
    SL_ASSERT_OK(sl_graph_begin_capture(dev, st));
    chain_run(&c, true, st);
    SL_ASSERT_OK(sl_graph_end_capture(dev, st, &g));
  }
  for (int rep = 0; rep < 3; rep++) {
    chain_reset(&c);
    /* ~0.5 ms of work ahead on the stream: the host's launches queue behind it and the stages then run back to back
     * as in a graph (launched one by one from an idle stream, each stage would find its predecessor done) */
    for (int i = 0; i < 16; i++)
      SL_ASSERT_OK(sl_memset(dev, c.d[B_BLOCK], i, c.bytes[B_BLOCK], st));
    if (graph)
      SL_ASSERT_OK(sl_graph_launch(dev, g, st));
    else
      chain_run(&c, true, st);
    SL_ASSERT_OK(sl_stream_sync(dev, st));
    SL_ASSERT_OK(sl_device_check(dev, "the chain with PDL"));
    void **got = chain_read(&c);
    for (int i = FIRST_OUT; i < NBUF; i++)
      if (memcmp(got[i], want[i], c.bytes[i]) != 0) {
        size_t k = 0;
        while (((unsigned char *)got[i])[k] == ((unsigned char *)want[i])[k])
          k++;
        fail_msg("T=%d %s rep %d: %s differs with PDL (first at byte %zu of %zu: %02x vs %02x)", T,
                 graph ? "graph" : "stream", rep, names[i], k, c.bytes[i], ((unsigned char *)got[i])[k],
                 ((unsigned char *)want[i])[k]);
      }
    free_read(got);
  }
  sl_graph_destroy(dev, g);
  free_read(want);
  sl_stream_destroy(dev, st);
  chain_free(&c);
}

static void test_pdl_chain_matches(void **state) {
  (void)state;
  uint64_t rng = sl_test_seed();
  static const int Ts[] = {1, 16, 200};
  for (int i = 0; i < 3; i++)
    for (int graph = 0; graph < 2; graph++)
      for (int draw = 0; draw < 3; draw++)
        run_case(&rng, Ts[i], graph);
}

int main(void) {
  dev = sl_test_open_gpu_or_skip(0);
  if (sl_device_info(dev)->arch < SL_ARCH_HOPPER) {
    printf("SKIPPED: programmatic dependent launch needs sm_90+ (this GPU is sm_%d)\n", sl_device_info(dev)->arch);
    return SL_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_pdl_chain_matches)};
  int rc = SL_RUN_SELECTED(tests, NULL, NULL);
  sl_device_close(dev);
  return rc;
}
