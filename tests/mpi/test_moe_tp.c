/* MoE TP deployment on the CPU backend under mpirun: replicated input, each rank dispatches
 * only to its expert range (no traffic between ranks), combine sums the local pairs and
 * all-reduces the partials over shared memory. Results match the single-rank MoE layer
 * within a bf16 ulp and are bit-identical on every rank; every payload; several calls per
 * handle (the all-reduce alternates its buffers by epoch parity). With simulated nodes the
 * TP group is the node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_tp.h"
#include "moe_ep_check.h"

static sl_runtime_t rt;
static moe_harness_t H;

static sl_moe_comm_t *make(int payload, int experts_per_rank, int top_k, int hidden, int max_tokens) {
  sl_moe_comm_config_t cfg = {.num_experts = experts_per_rank * H.size,
                              .top_k = top_k,
                              .hidden = hidden,
                              .payload = payload,
                              .nvfp4_global_scale = 448.0f * 6.0f / 16.0f,
                              .max_tokens = max_tokens};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_tp_create(H.dev, H.comm, &cfg, &h));
  assert_int_equal(sl_moe_comm_layout(h)->tp, 1);
  return h;
}

static void check_case(sl_moe_comm_t *h, uint64_t *rng, int T, moe_route_t route) {
  moe_case_t c = {.T = T, .route = route};
  moe_run_case(&H, h, rng, &c);
  if (c.mismatches)
    fail_msg("rank %d: %zu mismatches (route %s, T %d)", H.rank, c.mismatches, moe_route_name(route), T);
}

static void test_tp_payloads(void **state) {
  uint64_t rng = sl_test_seed();
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    sl_moe_comm_t *h = make(payload, 4, 4, 256, 20);
    for (int call = 0; call < 3; call++)
      check_case(h, &rng, 1 + call * 9, ROUTE_RANDOM);
    sl_moe_comm_destroy(h);
  }
}

static void test_tp_skew_and_empty(void **state) {
  uint64_t rng = sl_test_seed() + 1;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_BF16, 4, 4, 128, 16);
  check_case(h, &rng, 16, ROUTE_SKEW);  /* rank 0 computes everything, the rest add zeros */
  check_case(h, &rng, 0, ROUTE_RANDOM); /* no tokens at all */
  check_case(h, &rng, 9, ROUTE_ONE_RANK);
  sl_moe_comm_destroy(h);
}

/* The prefill all-reduce through comm1's sl_allreduce (fp32, in place), then rounded. */
static void test_tp_external_allreduce(void **state) {
  uint64_t rng = sl_test_seed() + 2;
  sl_comm_t *ar = NULL;
  SL_ASSERT_OK(sl_comm_create(&rt.boot, rt.dev, &rt.config, 1 << 20, &ar));
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_FP8, 4, 4, 256, 24);
  SL_ASSERT_OK(sl_moe_tp_use_allreduce(h, ar));
  for (int call = 0; call < 3; call++)
    check_case(h, &rng, 8 + call * 8, ROUTE_RANDOM);
  SL_ASSERT_OK(sl_moe_tp_use_allreduce(h, NULL)); /* back to the built-in one-shot */
  check_case(h, &rng, 24, ROUTE_RANDOM);
  sl_moe_comm_destroy(h);
  sl_comm_destroy(ar);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  H.dev = rt.dev;
  H.comm = rt.boot.node_comm;
  MPI_Comm_rank(H.comm, &H.rank);
  MPI_Comm_size(H.comm, &H.size);
  if (rt.boot.num_nodes > 1 && rt.boot.rank == 0)
    printf("note: %d (simulated) nodes: each TP group is one node of %d ranks\n", rt.boot.num_nodes, H.size);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_tp_payloads), cmocka_unit_test(test_tp_skew_and_empty),
                                     cmocka_unit_test(test_tp_external_allreduce)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_runtime_finalize(&rt);
  return any;
}
