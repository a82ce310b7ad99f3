/* MoE EP dispatch/combine on the CPU backend under mpirun: results equal the single-rank
 * MoE layer bit for bit, for every payload (bf16, FP8, MXFP8, NVFP4), random routing,
 * everything routed to one rank, top-k all on one rank, ranks with T = 0 while others have
 * tokens, invalid expert ids (reported, skipped), several calls per handle (epochs grow).
 * With SL_RANKS_PER_NODE (simulated nodes) the EP group is the node: cross-node peers belong
 * to the inter-node transport, which is not part of this test. */
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
           "inter-node transport's and are not exercised here\n",
           rt.boot.num_nodes, H.size);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payloads_random), cmocka_unit_test(test_skew_and_one_rank),
      cmocka_unit_test(test_empty_ranks),     cmocka_unit_test(test_invalid_ids),
      cmocka_unit_test(test_bad_config),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_runtime_finalize(&rt);
  return any;
}
