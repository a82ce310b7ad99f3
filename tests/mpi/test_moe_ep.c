/* MoE EP dispatch/combine on the CPU backend under mpirun: results equal the single-rank
 * MoE layer bit for bit, for every payload (bf16, FP8, MXFP8, NVFP4), random routing,
 * everything routed to one rank, top-k all on one rank, ranks with T = 0 while others have
 * tokens, invalid expert ids (reported, skipped), rows over capacity (reported, zero, no
 * hang), several calls per handle (epochs grow).
 * With SL_RANKS_PER_NODE (simulated nodes) the EP group is the node; the inter-node path
 * (peers on other nodes through the UCX proxy) is tests/mpi/test_moe_internode.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_ep_check.h"

static sl_runtime_t rt;
static moe_harness_t H;

static sl_moe_comm_t *make(int payload, int experts_per_rank, int top_k, int hidden, int max_tokens) {
  sl_moe_comm_config_t cfg = {.deploy = SL_MOE_DEPLOY_EP,
                              .num_experts = experts_per_rank * H.size,
                              .top_k = top_k,
                              .hidden = hidden,
                              .payload = payload,
                              .nvfp4_global_scale = 448.0f * 6.0f / 16.0f,
                              .max_tokens = max_tokens};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create(H.dev, H.comm, &cfg, &h));
  for (int r = 0; r < H.size; r++)
    assert_int_equal(sl_moe_comm_transport(h, r), r == H.rank ? SL_MOE_TRANSPORT_SELF : SL_MOE_TRANSPORT_SHM);
  return h;
}

static void check_case(sl_moe_comm_t *h, uint64_t *rng, int T, moe_route_t route, sl_status_t expect) {
  moe_case_t c = {.T = T, .route = route, .expect_dispatch = expect};
  moe_run_case(&H, h, rng, &c);
  assert_int_equal(c.path_taken, SL_MOE_COMM_PATH_CPU);
  if (c.mismatches)
    fail_msg("rank %d: %zu mismatches (route %s, T %d)", H.rank, c.mismatches, moe_route_name(route), T);
}

static void test_payloads_random(void **state) {
  uint64_t rng = sl_test_seed() + 17u * (uint64_t)rt.boot.rank;
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    sl_moe_comm_t *h = make(payload, 4, 3, 256, 24);
    for (int call = 0; call < 3; call++) {
      int T = 1 + (int)(sl_test_rand_u64(&rng) % 24);
      check_case(h, &rng, T, ROUTE_RANDOM, SL_OK);
    }
    sl_moe_comm_destroy(h);
  }
}

static void test_skew_and_one_rank(void **state) {
  uint64_t rng = sl_test_seed() + 31u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_FP8, 8, 4, 384, 32);
  check_case(h, &rng, 32, ROUTE_SKEW, SL_OK);     /* everything to rank 0 */
  check_case(h, &rng, 17, ROUTE_ONE_RANK, SL_OK); /* each token's top-k on one rank */
  check_case(h, &rng, 32, ROUTE_SKEW, SL_OK);
  sl_moe_comm_destroy(h);
}

static void test_empty_ranks(void **state) {
  uint64_t rng = sl_test_seed() + 7u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_BF16, 2, 2, 128, 16);
  check_case(h, &rng, H.rank % 2 ? 0 : 16, ROUTE_RANDOM, SL_OK); /* odd ranks have nothing */
  check_case(h, &rng, 0, ROUTE_RANDOM, SL_OK);                   /* nobody has anything */
  check_case(h, &rng, H.rank == 0 ? 0 : 5, ROUTE_SKEW, SL_OK);   /* rank 0 only receives */
  sl_moe_comm_destroy(h);
}

static void test_invalid_ids(void **state) {
  uint64_t rng = sl_test_seed() + 3u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_MXFP8, 4, 2, 128, 8);
  check_case(h, &rng, 8, ROUTE_INVALID, SL_ERR_RANGE);
  if (H.rank == 0) assert_non_null(strstr(sl_last_error(), "outside"));
  check_case(h, &rng, 8, ROUTE_RANDOM, SL_OK); /* the handle still works */
  sl_moe_comm_destroy(h);
}

/* Rows over an expert's capacity are dropped: the receiving rank reports SL_ERR_CAPACITY,
 * every source still completes its combine (the receiver signals a zero row for a dropped
 * pair), and a dropped pair contributes exactly zero: with a zero FFN output on every kept
 * row too, every output is +0 (no NaN from the poisoned buffers). */
static void test_capacity_overflow(void **state) {
  enum { T = 6, K = 2, HD = 128 };
  sl_moe_comm_config_t cfg = {
      .num_experts = 2 * H.size, .top_k = K, .hidden = HD, .max_tokens = T, .expert_capacity = 3};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create(H.dev, H.comm, &cfg, &h));
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  static uint16_t x[T * HD] __attribute__((aligned(16))), out[T * HD] __attribute__((aligned(16)));
  uint16_t *y = malloc((size_t)ex->num_local_experts * ex->capacity * HD * 2);
  int32_t ids[T * K];
  float w[T * K];
  for (int i = 0; i < T * HD; i++)
    x[i] = sl_f32_to_bf16(1.0f + (float)(i % 7));
  for (int t = 0; t < T; t++) { /* every token to experts 0 and 1 (rank 0): 6 x ranks rows each, cap 3 */
    ids[t * K] = 0;
    ids[t * K + 1] = 1;
    w[t * K] = w[t * K + 1] = 0.5f;
  }
  memset(out, 0xff, sizeof out);
  sl_moe_comm_dispatch_args_t da = {.num_tokens = T, .x = x, .topk_ids = ids, .topk_weights = w};
  sl_status_t s = sl_moe_comm_dispatch(h, &da, NULL);
  if (H.rank == 0) {
    assert_int_equal(s, SL_ERR_CAPACITY);
    assert_non_null(strstr(sl_last_error(), "capacity of 3"));
    assert_int_equal(ex->expert_counts[0], T * H.size); /* counted, though only 3 kept */
  } else {
    SL_ASSERT_OK(s);
  }
  memset(y, 0, (size_t)ex->num_local_experts * ex->capacity * HD * 2); /* the FFN returns zeros */
  sl_moe_comm_combine_args_t ca = {.num_tokens = T, .topk_ids = ids, .topk_weights = w, .expert_out = y, .out = out};
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, NULL));
  for (int i = 0; i < T * HD; i++)
    if (out[i] != 0) fail_msg("rank %d out[%d] = 0x%04x, want +0", H.rank, i, out[i]);
  free(y);
  sl_moe_comm_destroy(h);
}

static void test_bad_config(void **state) {
  sl_moe_comm_config_t cfg = {.num_experts = 3 * H.size + (H.size > 1), .top_k = 2, .hidden = 256, .max_tokens = 4};
  sl_moe_comm_t *h = NULL;
  if (H.size > 1) {
    assert_int_equal(sl_moe_comm_create(H.dev, H.comm, &cfg, &h), SL_ERR_INVALID);
    assert_non_null(strstr(sl_last_error(), "do not divide"));
  }
  cfg.num_experts = 4 * H.size;
  cfg.hidden = 100;
  assert_int_equal(sl_moe_comm_create(H.dev, H.comm, &cfg, &h), SL_ERR_INVALID);
  assert_null(h);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  H.dev = rt.dev;
  H.comm = rt.boot.node_comm;
  MPI_Comm_rank(H.comm, &H.rank);
  MPI_Comm_size(H.comm, &H.size);
  if (rt.boot.num_nodes > 1 && rt.boot.rank == 0)
    printf("note: %d (simulated) nodes: each EP group is one node of %d ranks; peers on other nodes are the "
           "inter-node path's (test_moe_internode)\n",
           rt.boot.num_nodes, H.size);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payloads_random),   cmocka_unit_test(test_skew_and_one_rank),
      cmocka_unit_test(test_empty_ranks),       cmocka_unit_test(test_invalid_ids),
      cmocka_unit_test(test_capacity_overflow), cmocka_unit_test(test_bad_config),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_runtime_finalize(&rt);
  return any;
}
