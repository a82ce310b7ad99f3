/* MoE dispatch and combine on the CPU backend against their direct definitions: random
 * routing, skewed routing, empty experts, T = 0 / 1 / odd sizes, capacity overflow, bad
 * ids, expert ranges, residual add. */
#include <math.h>

#include "kernels/quant.h"
#include "unit/moe_test_util.h"

static sl_device_t *cpu(void) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  return dev;
}

/* The definition: the pairs routed to local expert e, in pair order, take slots 0, 1, ...;
 * slots past capacity are dropped (slot -1); the rows hold the token; nothing else is
 * written. Combine: sum_k w * row (+ residual), checked in double to a bf16 ulp. */
static void check_definition(const moe_case_t *c) {
  const int local = c->end - c->begin;
  int *seen = calloc((size_t)local, sizeof *seen);
  unsigned char *row_used = calloc(moe_case_rows(c), 1);
  assert_true(seen && row_used);
  for (int t = 0; t < c->T; t++)
    for (int k = 0; k < c->K; k++) {
      const int id = c->ids[t * c->K + k], slot = c->slots[t * c->K + k];
      const int e = (id >= c->begin && id < c->end) ? id - c->begin : -1;
      if (e < 0 || id >= c->E) {
        assert_int_equal(slot, -1);
        continue;
      }
      const int j = seen[e]++;
      if (j >= c->capacity) {
        assert_int_equal(slot, -1);
        continue;
      }
      assert_int_equal(slot, e * c->capacity + j);
      if (c->payload == SL_MOE_PAYLOAD_BF16) {
        assert_memory_equal(c->expert_x + (size_t)slot * c->H, c->x + (size_t)t * c->H, (size_t)c->H * 2);
      } else {
        /* The row is the quantizer's reference applied to the token. */
        const size_t rb = moe_case_row_bytes(c), sb = moe_case_scale_row_bytes(c);
        uint8_t *codes = malloc(rb), *scales = malloc(sb);
        sl_quant_args_t q = {.format = (sl_quant_format_t)(c->payload - 1), .rule = (sl_quant_rule_t)c->rule,
                             .num_tokens = 1, .hidden = c->H, .in_dtype = SL_DTYPE_BF16,
                             .in = c->x + (size_t)t * c->H, .codes = codes, .scales = scales,
                             .global_scale = c->gscale};
        SL_ASSERT_OK(sl_quant_ref(&q));
        assert_memory_equal((uint8_t *)c->expert_x + (size_t)slot * rb, codes, rb);
        assert_memory_equal(c->scales + (size_t)slot * sb, scales, sb);
        free(codes);
        free(scales);
      }
      row_used[slot] = 1;
    }
  for (int e = 0; e < local; e++) assert_int_equal(c->counts[e], seen[e] < c->capacity ? seen[e] : c->capacity);
  const size_t rb = moe_case_row_bytes(c), sb = moe_case_scale_row_bytes(c);
  for (size_t r = 0; r < moe_case_rows(c); r++)
    if (!row_used[r]) {
      for (size_t i = 0; i < rb; i++) assert_int_equal(((uint8_t *)c->expert_x)[r * rb + i], 0xFF);
      for (size_t i = 0; i < sb; i++) assert_int_equal(c->scales[r * sb + i], 0xFF);
    }
  if (c->payload != SL_MOE_PAYLOAD_BF16) {
    free(seen);
    free(row_used);
    return;
  }
  for (int t = 0; t < c->T; t++)
    for (int h = 0; h < c->H; h++) {
      double want = 0;
      for (int k = 0; k < c->K; k++)
        if (c->slots[t * c->K + k] >= 0)
          want += (double)c->weights[t * c->K + k] * sl_bf16_to_f32(c->x[(size_t)t * c->H + h]);
      if (c->residual) want += sl_bf16_to_f32(c->residual[(size_t)t * c->H + h]);
      const float got = sl_bf16_to_f32(c->out[(size_t)t * c->H + h]);
      if (!(fabs(got - want) <= fabs(want) / 128.0 + 1e-6))
        fail_msg("combine t=%d h=%d: got %.9g want %.9g", t, h, (double)got, want);
    }
  free(seen);
  free(row_used);
}

static void run_random(int T, int H, int K, int E, int begin, int end, bool residual) {
  uint64_t rng = sl_test_seed() ^ ((uint64_t)T << 20) ^ ((uint64_t)H << 8) ^ (uint64_t)K;
  moe_case_t c = {.T = T, .H = H, .K = K, .E = E, .begin = begin, .end = end,
                  .capacity = sl_moe_dropless_capacity(T)};
  moe_case_alloc(&c);
  moe_rand_bf16(&rng, (size_t)T * H, c.x);
  moe_rand_routing(&rng, T, K, E, c.ids, c.weights);
  if (residual) {
    c.residual = calloc((size_t)(T ? T : 1) * H, 2);
    moe_rand_bf16(&rng, (size_t)T * H, c.residual);
  }
  sl_device_t *dev = cpu();
  moe_case_run(dev, &c, 0);
  SL_ASSERT_OK(c.check);
  assert_int_equal(c.path, SL_MOE_PATH_CPU);
  check_definition(&c);
  sl_device_close(dev);
  moe_case_free(&c);
}

static void test_random_shapes(void **state) {
  run_random(1, 8, 1, 8, 0, 8, false);
  run_random(1, 2048, 8, 128, 0, 128, false);
  run_random(7, 24, 2, 16, 0, 16, true);
  run_random(33, 264, 8, 64, 0, 64, false);
  run_random(300, 40, 4, 16, 0, 16, true);
}

static void test_tokens_zero(void **state) { run_random(0, 16, 4, 8, 0, 8, false); }

static void test_expert_range(void **state) {
  run_random(45, 32, 4, 16, 4, 12, false);
  run_random(9, 32, 8, 32, 0, 1, true);
  run_random(9, 32, 8, 32, 31, 32, false);
}

static void test_empty_experts(void **state) {
  /* 3 tokens x 2 of 64 experts: at least 58 experts get nothing. */
  run_random(3, 16, 2, 64, 0, 64, false);
}

static void run_fixed(moe_case_t *c, const int32_t *ids_pattern, int pattern_len) {
  uint64_t rng = sl_test_seed() + 7;
  moe_case_alloc(c);
  moe_rand_bf16(&rng, (size_t)c->T * c->H, c->x);
  for (int p = 0; p < c->T * c->K; p++) {
    c->ids[p] = ids_pattern[p % pattern_len];
    c->weights[p] = sl_test_rand_uniform(&rng, 0.1f, 1.0f);
  }
  sl_device_t *dev = cpu();
  moe_case_run(dev, c, 0);
  sl_device_close(dev);
}

static void test_skewed_all_to_one(void **state) {
  const int32_t one[] = {3};
  moe_case_t c = {.T = 77, .H = 16, .K = 1, .E = 8, .begin = 0, .end = 8, .capacity = 77};
  run_fixed(&c, one, 1);
  SL_ASSERT_OK(c.check);
  check_definition(&c);
  assert_int_equal(c.counts[3], 77);
  moe_case_free(&c);
  const int32_t four[] = {5, 3, 6, 4};
  moe_case_t d = {.T = 130, .H = 24, .K = 4, .E = 8, .begin = 0, .end = 8, .capacity = 130};
  run_fixed(&d, four, 4);
  SL_ASSERT_OK(d.check);
  check_definition(&d);
  for (int e = 3; e <= 6; e++) assert_int_equal(d.counts[e], 130);
  assert_int_equal(d.counts[0], 0);
  moe_case_free(&d);
}

static void test_capacity_overflow_reported(void **state) {
  const int32_t one[] = {2};
  moe_case_t c = {.T = 50, .H = 16, .K = 1, .E = 4, .begin = 0, .end = 4, .capacity = 16};
  run_fixed(&c, one, 1);
  assert_int_equal(c.check, SL_ERR_CAPACITY);
  assert_non_null(strstr(sl_last_error(), "expert 2 received 50 tokens but its capacity is 16"));
  check_definition(&c); /* dropped pairs have slot -1; guard rows untouched */
  assert_int_equal(c.counts[2], 16);
  moe_case_free(&c);
}

static void test_bad_ids_reported(void **state) {
  uint64_t rng = sl_test_seed() + 11;
  moe_case_t c = {.T = 20, .H = 8, .K = 2, .E = 8, .begin = 0, .end = 8, .capacity = 20};
  moe_case_alloc(&c);
  moe_rand_bf16(&rng, (size_t)c.T * c.H, c.x);
  moe_rand_routing(&rng, c.T, c.K, c.E, c.ids, c.weights);
  c.ids[5 * 2 + 1] = 8;
  c.ids[9 * 2 + 0] = -3;
  sl_device_t *dev = cpu();
  moe_case_run(dev, &c, 0);
  assert_int_equal(c.check, SL_ERR_RANGE);
  assert_non_null(strstr(sl_last_error(), "token 5 has expert id 8"));
  check_definition(&c);
  sl_device_close(dev);
  moe_case_free(&c);
}

static void run_payload(int T, int H, int K, int E, int begin, int end, sl_moe_payload_t payload, int rule,
                        int capacity, bool nan_token) {
  uint64_t rng = sl_test_seed() ^ ((uint64_t)payload << 40) ^ (uint64_t)T;
  moe_case_t c = {.T = T, .H = H, .K = K, .E = E, .begin = begin, .end = end,
                  .capacity = capacity ? capacity : sl_moe_dropless_capacity(T), .payload = payload, .rule = rule,
                  .gscale = 448.0f * 6.0f / 4.5f};
  moe_case_alloc(&c);
  moe_rand_bf16(&rng, (size_t)T * H, c.x);
  moe_rand_routing(&rng, T, K, E, c.ids, c.weights);
  if (nan_token) c.x[(size_t)(T / 2) * H + H - 3] = 0x7fc0; /* NaN in the last block of token T/2 */
  sl_device_t *dev = cpu();
  moe_case_run(dev, &c, 0);
  if (nan_token) {
    assert_int_equal(c.check, SL_ERR_NUMERIC);
    char want[64];
    snprintf(want, sizeof want, "token %d holds NaN/Inf", T / 2);
    assert_non_null(strstr(sl_last_error(), want));
  } else if (capacity) {
    assert_int_equal(c.check, SL_ERR_CAPACITY);
  } else {
    SL_ASSERT_OK(c.check);
  }
  check_definition(&c);
  sl_device_close(dev);
  moe_case_free(&c);
}

static void test_quantized_payloads(void **state) {
  run_payload(7, 256, 4, 16, 0, 16, SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_IEEE, 0, false);
  run_payload(33, 384, 8, 32, 0, 32, SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_CEIL, 0, false);
  run_payload(1, 128, 2, 8, 0, 8, SL_MOE_PAYLOAD_MXFP8, SL_QRULE_CEIL, 0, false);
  run_payload(20, 96, 3, 8, 2, 6, SL_MOE_PAYLOAD_MXFP8, SL_QRULE_FLOOR, 0, false);
  run_payload(20, 64, 2, 8, 0, 8, SL_MOE_PAYLOAD_MXFP4, SL_QRULE_CEIL, 0, false);
  run_payload(13, 48, 2, 8, 0, 8, SL_MOE_PAYLOAD_NVFP4, 0, 0, false);
  run_payload(40, 64, 2, 4, 0, 4, SL_MOE_PAYLOAD_NVFP4, 0, 8, false); /* overflow */
  run_payload(9, 256, 2, 8, 0, 8, SL_MOE_PAYLOAD_FP8_GROUP, SL_QRULE_IEEE, 0, true);
  run_payload(9, 64, 2, 8, 0, 8, SL_MOE_PAYLOAD_NVFP4, 0, 0, true);
}


/* Each of the n values in `bad` set into *field is refused (SL_ERR_INVALID naming `name`); *field is 0 after. */
static void refuse_each(sl_device_t *dev, sl_moe_dispatch_args_t *a, int *field, const int *bad, size_t n,
                        const char *name) {
  for (size_t i = 0; i < n; i++) {
    *field = bad[i];
    assert_int_equal(sl_moe_dispatch(dev, a, NULL), SL_ERR_INVALID);
    assert_non_null(strstr(sl_last_error(), name));
  }
  *field = 0;
}
static void test_bad_arguments(void **state) {
  sl_device_t *dev = cpu();
  int32_t ids[4] = {0}, counts[4], slots[4];
  uint16_t x[16] = {0}, ex[64];
  char ws[4096] = {0};
  sl_moe_dispatch_args_t a = {.num_tokens = 2, .hidden = 8, .top_k = 2, .num_experts = 4, .expert_begin = 0,
                              .expert_end = 4, .capacity = 2, .x = x, .topk_ids = ids, .expert_x = ex,
                              .expert_counts = counts, .slots = slots, .workspace = ws, .workspace_bytes = 16};
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID); /* workspace too small */
  assert_non_null(strstr(sl_last_error(), "workspace"));
  a.workspace_bytes = sizeof ws;
  a.hidden = 12;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  a.hidden = 8;
  a.expert_end = 5;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  a.expert_end = 4;
  a.payload = (sl_moe_payload_t)9;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_UNSUPPORTED);
  a.payload = SL_MOE_PAYLOAD_FP8_GROUP; /* H = 8 is not a multiple of 128 */
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  a.payload = SL_MOE_PAYLOAD_BF16;
  a.force_span = -1;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "force_span"));
  a.force_span = 3; /* a knob of the GPU split copy: the CPU result is the same */
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_span = 0;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  /* The split copy's knobs: force_copy 0..SL_MOE_COPY_DIRECT, the staged items a multiple of 512
   * dividing H, 2..4 stages; valid values give the reference result on the CPU. */
  const int bad_copy[] = {-1, SL_MOE_COPY_DIRECT + 1};
  refuse_each(dev, &a, &a.force_copy, bad_copy, 2, "force_copy");
  a.force_copy = SL_MOE_COPY_REGS;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_copy = SL_MOE_COPY_DIRECT;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_copy = 0;
  const int bad_seg[] = {-512, 256, 512}; /* 512 does not divide H = 8 */
  refuse_each(dev, &a, &a.force_staged_seg, bad_seg, 3, "force_staged_seg");
  a.force_staged_seg = 0;
  const int bad_stages[] = {-1, 1, 5};
  refuse_each(dev, &a, &a.force_staged_stages, bad_stages, 3, "force_staged_stages");
  a.force_staged_stages = 4;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  const int bad_bulk[] = {-1, 2};
  refuse_each(dev, &a, &a.staged_scale_bulk, bad_bulk, 2, "staged_scale_bulk");
  a.staged_scale_bulk = 1;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.staged_scale_bulk = 0;
  a.force_staged_stages = 0;
  /* Routing rounds 1, 2, 4, 8 (or 0, the default) and the two replicated rankings are GPU
   * knobs: out of range is refused, valid values give the reference result on the CPU. */
  const int bad_rounds[] = {-1, 3, 16};
  refuse_each(dev, &a, &a.force_route_rounds, bad_rounds, 3, "force_route_rounds");
  a.force_route_rounds = 8;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_route_rounds = 0;
  a.force_repl_rank = SL_MOE_REPL_RANK_SCAN + 1;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "force_repl_rank"));
  a.force_repl_rank = -1;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  a.force_repl_rank = SL_MOE_REPL_RANK_SCAN;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  /* Warps per replicated block: 0 (host choice) or 1..32; the scan ranking at 8 only. */
  const int bad_warps[] = {-1, 33};
  refuse_each(dev, &a, &a.force_repl_warps, bad_warps, 2, "force_repl_warps");
  a.force_repl_warps = 7; /* with the scan ranking */
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "scan ranking"));
  a.force_repl_warps = 8;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_repl_rank = 0;
  a.force_repl_warps = 3;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.force_repl_warps = 0;
  /* The host's choice: the largest of 8..4 dividing the row's 256-column chunks, else 8. */
  assert_int_equal(sl_moe_repl_warps(2048), 8); /* 8 chunks */
  assert_int_equal(sl_moe_repl_warps(7168), 7); /* 28 */
  assert_int_equal(sl_moe_repl_warps(5120), 5); /* 20 */
  assert_int_equal(sl_moe_repl_warps(2880), 6); /* 12 (the last one partial) */
  assert_int_equal(sl_moe_repl_warps(264), 8);  /* 2 */
  assert_int_equal(sl_moe_repl_warps(6144), 8); /* 24 */
  a.split_no_pdl = 2;
  assert_int_equal(sl_moe_dispatch(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "split_no_pdl"));
  a.split_no_pdl = 1;
  SL_ASSERT_OK(sl_moe_dispatch(dev, &a, NULL));
  a.split_no_pdl = 0;
  sl_device_close(dev);
}

/* Combine's force_unroll knob: out of range is refused; 1 and 2 give the reference result. */
static void test_combine_unroll_knob(void **state) {
  sl_device_t *dev = cpu();
  uint16_t eo[3 * 8], out0[8], out[8];
  int32_t slots[2] = {2, 0};
  float w[2] = {0.25f, 1.5f};
  for (int i = 0; i < 3 * 8; i++) eo[i] = sl_f32_to_bf16((float)(i % 7) - 2.5f);
  sl_moe_combine_args_t c = {.num_tokens = 1, .hidden = 8, .top_k = 2, .expert_out = eo, .slots = slots,
                             .topk_weights = w, .out = out0};
  SL_ASSERT_OK(sl_moe_combine(dev, &c, NULL));
  c.force_unroll = 3;
  assert_int_equal(sl_moe_combine(dev, &c, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "force_unroll"));
  for (int u = 1; u <= 2; u++) {
    memset(out, 0xff, sizeof out);
    c.force_unroll = u;
    c.out = out;
    SL_ASSERT_OK(sl_moe_combine(dev, &c, NULL));
    assert_memory_equal(out, out0, sizeof out);
  }
  /* The value itself: 0.25 * row 2 + 1.5 * row 0, element 0 = 0.25 * (16 % 7 - 2.5) + 1.5 * -2.5. */
  assert_int_equal(out0[0], sl_f32_to_bf16(fmaf(1.5f, -2.5f, 0.25f * -0.5f)));
  sl_device_close(dev);
}

static void test_device_error_messages(void **state) {
  const struct {
    sl_dev_error_t e;
    sl_status_t want;
    const char *text;
  } cases[] = {
      {{SL_DEV_ERR_NONE, 0, 0, 0}, SL_OK, ""},
      {{SL_DEV_ERR_TIMEOUT, 7, 100, 132}, SL_ERR_TIMEOUT, "timed out in block 7 (100 of 132 blocks arrived)"},
      {{SL_DEV_ERR_RANGE, 3, -1, 128}, SL_ERR_RANGE, "token 3 has expert id -1, outside [0, 128)"},
      {{SL_DEV_ERR_CAPACITY, 5, 90, 64}, SL_ERR_CAPACITY, "expert 5 received 90 tokens but its capacity is 64"},
      {{SL_DEV_ERR_NUMERIC, 4, 2, 128}, SL_ERR_NUMERIC, "token 4 holds NaN/Inf in block 2 (elements 256..383)"},
      {{SL_DEV_ERR_PIPE_TIMEOUT, 9, 4, 1}, SL_ERR_TIMEOUT, "timed out in block 9 at stage use 4"},
      {{SL_DEV_ERR_POLL_TIMEOUT, 6, 127, 128}, SL_ERR_TIMEOUT, "block 6 waited in vain for the values other blocks "
                                                               "publish (127 of 128 arrived)"},
      {{42, 1, 2, 3}, SL_ERR_INTERNAL, "unknown device error code 42"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sl_clear_error();
    assert_int_equal(sl_dev_error_status(&cases[i].e, "moe dispatch"), cases[i].want);
    assert_non_null(strstr(sl_last_error(), cases[i].text));
  }
}

static void test_path_rule(void **state) {
  (void)state;
  /* Replicated while T x K <= SL_MOE_REPL_MAX_PAIRS (1024); then fused while copy blocks
   * (T x chunks / 8 warps) <= SL_MOE_FUSED_MAX_WAVES (4) x SMs and the routing needs <= SMs
   * blocks of 256 pairs; else split. */
  sl_moe_dispatch_args_t a = {.hidden = 2048, .top_k = 8};
  a.num_tokens = 1;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_REPLICATED);
  a.num_tokens = 128; /* 1024 pairs */
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_REPLICATED);
  a.num_tokens = 129;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_FUSED);
  a.num_tokens = 528; /* 528 blocks = 4 x 132 */
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_FUSED);
  a.num_tokens = 529;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_SPLIT);
  a.hidden = 7168;
  a.num_tokens = 128; /* DeepSeek-V3 decode at T=128: one launch */
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_REPLICATED);
  a.num_tokens = 150; /* 150 x 28 / 8 = 525 blocks */
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_FUSED);
  a.num_tokens = 151; /* 151 x 28 / 8 = 529 */
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_SPLIT);
  a.hidden = 256;
  a.top_k = 32; /* routing bound: T x 32 / 256 <= 132 blocks -> T <= 1056 */
  a.num_tokens = 32;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_REPLICATED);
  a.num_tokens = 1056;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_FUSED);
  a.num_tokens = 1057;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_SPLIT);
  a.num_tokens = 0;
  assert_int_equal(sl_moe_dispatch_choose_path(&a, 132), SL_MOE_PATH_NONE);
}

/* The host's choice of the staged copy (no GPU needed): where it applies, its default shapes and shared
 * memory, the forced shapes, and where it does not (pre-Hopper, bf16, H not a multiple of 512, misaligned). */
static void test_staged_choice(void **state) {
  (void)state;
  static uint8_t buf[64] __attribute__((aligned(16)));
  sl_moe_dispatch_args_t a = {.hidden = 2048, .payload = SL_MOE_PAYLOAD_FP8_GROUP, .x = buf, .expert_x = buf,
                              .expert_scales = buf};
  int seg = 0, stages = 0;
  size_t smem = 0;
  assert_true(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
  /* FP8 at H=2048: 2048 columns x 2 stages; per warp 2 x 4096 B of x + 2 x (2048 codes + 16 x 4 B scales). */
  assert_int_equal(seg, 2048);
  assert_int_equal(stages, 2);
  assert_int_equal(smem, 4 * (2 * 4096 + 2 * (2048 + 64)));
  a.hidden = 7168; /* DeepSeek-V3: 1024 x 4 */
  assert_true(sl_moe_staged_applies(&a, SL_ARCH_BLACKWELL, &seg, &stages, &smem));
  assert_int_equal(seg, 1024);
  assert_int_equal(stages, 4);
  a.payload = SL_MOE_PAYLOAD_MXFP4; /* FP4: 1024 x 3; 512 code bytes + 32 scale bytes per buffer */
  assert_true(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
  assert_int_equal(seg, 1024);
  assert_int_equal(stages, 3);
  assert_int_equal(smem, 4 * (3 * 2048 + 2 * (512 + 32)));
  a.payload = SL_MOE_PAYLOAD_NVFP4; /* E4M3 scale per 16: 64 scale bytes per 1024 columns */
  a.force_staged_seg = 512;
  a.force_staged_stages = 2;
  assert_true(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
  assert_int_equal(seg, 512);
  assert_int_equal(stages, 2);
  assert_int_equal(smem, 4 * (2 * 1024 + 2 * (256 + 32)));
  a.force_staged_seg = a.force_staged_stages = 0;
  assert_false(sl_moe_staged_applies(&a, SL_ARCH_HOPPER - 1, &seg, &stages, &smem)); /* no bulk-copy engine */
  a.payload = SL_MOE_PAYLOAD_BF16;
  assert_false(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
  a.payload = SL_MOE_PAYLOAD_MXFP8;
  a.hidden = 384;
  assert_false(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
  a.hidden = 2048;
  a.x = buf + 8;
  assert_false(sl_moe_staged_applies(&a, SL_ARCH_HOPPER, &seg, &stages, &smem));
}

/* The split path's routing rounds (no GPU needed): blocks <= SMs, and with a resident copy (staged, direct) up to 4
 * rounds the last block's scan in one batch (blocks x E_local <= 512 x 32). */
static void test_route_rounds(void **state) {
  (void)state;
  assert_int_equal(sl_moe_route_rounds(16384L * 8, 132, 128, true), 2);  /* Qwen3 T=16384: 128 blocks x 128 */
  assert_int_equal(sl_moe_route_rounds(16384L * 8, 132, 256, true), 4);  /* DeepSeek-V3: 128 x 256 > 512 x 32 */
  assert_int_equal(sl_moe_route_rounds(16384L * 8, 132, 256, false), 2); /* the register (and bf16) copy */
  assert_int_equal(sl_moe_route_rounds(4096L * 8, 132, 256, true), 1);   /* 64 blocks x 256: one batch */
  assert_int_equal(sl_moe_route_rounds(16384L * 8, 132, 32, true), 2);   /* an expert-parallel share: SMs decide */
  assert_int_equal(sl_moe_route_rounds(16384L * 8, 132, 384, true), 4);  /* E=384: the scan rule stops at 4 */
  assert_int_equal(sl_moe_route_rounds(1L << 20, 132, 128, false), 8);   /* more pairs than 132 blocks of 4096 */
  assert_int_equal(sl_moe_route_rounds(1L << 24, 132, 128, true), 8);    /* at most 8 */
  assert_int_equal(sl_moe_route_rounds(1000, 132, 512, true), 1);
}

/* The split path's copy of the quantized payloads (no GPU needed): the direct copy where it applies (a quantized
 * payload, H a multiple of 1024, aligned, no force_span) and the default per payload and size on 132 SMs (with
 * >= SL_MOE_DIRECT_MIN_ITEMS items per 32 warps per SM: DeepSeek-V3 T=16384), the forced ones, bf16. */
static void test_copy_choice(void **state) {
  (void)state;
  static uint8_t buf[64] __attribute__((aligned(16)));
  sl_moe_dispatch_args_t a = {.num_tokens = 16384, .hidden = 7168, .payload = SL_MOE_PAYLOAD_MXFP4, .x = buf,
                              .expert_x = buf, .expert_scales = buf};
  assert_true(sl_moe_direct_applies(&a));
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_DIRECT); /* 114688 items >= 67584 */
  a.payload = SL_MOE_PAYLOAD_NVFP4;
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_DIRECT);
  a.num_tokens = 4096; /* 28672 items: the staged copy's start after the routing wins */
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_STAGED);
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 32), SL_MOE_COPY_DIRECT); /* fewer SMs: a longer stream */
  a.num_tokens = 16384;
  a.hidden = 2048; /* Qwen3 T=16384: 32768 items */
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_STAGED);
  a.hidden = 7168;
  a.payload = SL_MOE_PAYLOAD_FP8_GROUP; /* FP8 as FP4: the direct copy on the long stream (session 26) */
  assert_true(sl_moe_direct_applies(&a));
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_DIRECT);
  a.num_tokens = 4096;
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_STAGED);
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER - 1, 132), SL_MOE_COPY_REGS); /* no bulk-copy engine */
  a.num_tokens = 16384;
  a.force_copy = SL_MOE_COPY_DIRECT;
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_DIRECT);
  a.force_copy = SL_MOE_COPY_REGS;
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_REGS);
  a.force_copy = 0;
  a.payload = SL_MOE_PAYLOAD_MXFP4;
  a.hidden = 1536; /* not a multiple of 1024: the staged copy on 512-column items */
  assert_false(sl_moe_direct_applies(&a));
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 8), SL_MOE_COPY_STAGED);
  a.hidden = 7168;
  a.force_span = 2; /* a forced span is the register copy's knob */
  assert_false(sl_moe_direct_applies(&a));
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_REGS);
  a.force_span = 0;
  a.expert_scales = buf + 4;
  assert_false(sl_moe_direct_applies(&a));
  a.expert_scales = buf;
  a.payload = SL_MOE_PAYLOAD_BF16; /* bf16: the register copy whatever is forced */
  assert_false(sl_moe_direct_applies(&a));
  a.force_copy = SL_MOE_COPY_DIRECT;
  assert_int_equal(sl_moe_split_copy(&a, SL_ARCH_HOPPER, 132), SL_MOE_COPY_REGS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_shapes),         cmocka_unit_test(test_tokens_zero),
      cmocka_unit_test(test_copy_choice), cmocka_unit_test(test_route_rounds),
      cmocka_unit_test(test_expert_range),          cmocka_unit_test(test_empty_experts),
      cmocka_unit_test(test_skewed_all_to_one),     cmocka_unit_test(test_capacity_overflow_reported),
      cmocka_unit_test(test_bad_ids_reported),      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_path_rule),            cmocka_unit_test(test_quantized_payloads),
      cmocka_unit_test(test_device_error_messages), cmocka_unit_test(test_combine_unroll_knob),
      cmocka_unit_test(test_staged_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
