/* MoE EP dispatch/combine over every rank of the job (sl_moe_comm_create_world) on the CPU
 * backend: with simulated nodes (SL_RANKS_PER_NODE) peers on the same node go through shared
 * memory and peers on other nodes through the UCX proxy (UCX_TLS=tcp on loopback). Results
 * equal the single-rank MoE layer bit for bit in both dispatch modes (direct: one message per
 * remote rank; node-aggregated: one per remote node, forwarded inside it), for every payload,
 * random routing, everything to one remote rank, top-k all on the other node, ranks with no
 * tokens, invalid ids, rows over capacity, several calls per handle. Counts of bytes over
 * the network: node-aggregated never moves more than direct, and less when tokens hit several
 * ranks of one node. With one node the handle is the node handle (the same checks). */
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
  SL_ASSERT_OK(sl_moe_comm_create_world(H.dev, &rt.boot, &cfg, &h));
  int L = rt.boot.local_size;
  for (int r = 0; r < H.size; r++) {
    sl_moe_transport_t want = r == H.rank                 ? SL_MOE_TRANSPORT_SELF
                              : r / L == rt.boot.rank / L ? SL_MOE_TRANSPORT_SHM
                                                          : SL_MOE_TRANSPORT_PROXY;
    assert_int_equal(sl_moe_comm_transport(h, r), want);
  }
  return h;
}

static sl_moe_net_mode_t modes[] = {SL_MOE_NET_DIRECT, SL_MOE_NET_NODE_AGG};

static void check_case(sl_moe_comm_t *h, uint64_t *rng, int T, moe_route_t route, sl_moe_net_mode_t mode,
                       sl_status_t expect) {
  moe_case_t c = {.T = T, .route = route, .expect_dispatch = expect, .net = mode};
  moe_run_case(&H, h, rng, &c);
  assert_int_equal(c.path_taken, SL_MOE_COMM_PATH_CPU);
  if (rt.boot.num_nodes > 1 && mode != SL_MOE_NET_AUTO) assert_int_equal(c.net_taken, mode);
  if (c.mismatches)
    fail_msg("rank %d: %zu mismatches (route %s, T %d, mode %s)", H.rank, c.mismatches, moe_route_name(route), T,
             sl_moe_net_mode_name(mode));
}

static void test_payloads_random(void **state) {
  uint64_t rng = sl_test_seed() + 17u * (uint64_t)rt.boot.rank;
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    sl_moe_comm_t *h = make(payload, 4, 3, 256, 24);
    for (int call = 0; call < 4; call++) {
      int T = 1 + (int)(sl_test_rand_u64(&rng) % 24);
      check_case(h, &rng, T, ROUTE_RANDOM, modes[call % 2], SL_OK);
    }
    sl_moe_comm_destroy(h);
  }
}

static void test_skew_remote(void **state) {
  uint64_t rng = sl_test_seed() + 31u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_FP8, 8, 4, 384, 32);
  for (int m = 0; m < 2; m++) {
    check_case(h, &rng, 32, ROUTE_LAST_RANK, modes[m], SL_OK);  /* remote for node 0 */
    check_case(h, &rng, 32, ROUTE_SKEW, modes[m], SL_OK);       /* remote for the other nodes */
    check_case(h, &rng, 17, ROUTE_ONE_RANK, modes[m], SL_OK);   /* top-k on one rank */
    check_case(h, &rng, 29, ROUTE_OTHER_NODE, modes[m], SL_OK); /* top-k all on the next node */
  }
  check_case(h, &rng, 32, ROUTE_OTHER_NODE, SL_MOE_NET_AUTO, SL_OK);
  /* senders choose independently: half direct, half node-aggregated in the same call */
  check_case(h, &rng, 31, ROUTE_RANDOM, H.rank % 2 ? SL_MOE_NET_DIRECT : SL_MOE_NET_NODE_AGG, SL_OK);
  check_case(h, &rng, 30, ROUTE_OTHER_NODE, H.rank % 2 ? SL_MOE_NET_NODE_AGG : SL_MOE_NET_DIRECT, SL_OK);
  sl_moe_comm_destroy(h);
}

static void test_empty_ranks(void **state) {
  uint64_t rng = sl_test_seed() + 7u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_BF16, 2, 2, 128, 16);
  for (int m = 0; m < 2; m++) {
    check_case(h, &rng, H.rank % 2 ? 0 : 16, ROUTE_RANDOM, modes[m], SL_OK);
    check_case(h, &rng, 0, ROUTE_RANDOM, modes[m], SL_OK);
    check_case(h, &rng, H.rank == 0 ? 0 : 5, ROUTE_SKEW, modes[m], SL_OK);
  }
  sl_moe_comm_destroy(h);
}

static void test_invalid_ids(void **state) {
  uint64_t rng = sl_test_seed() + 3u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_MXFP8, 4, 2, 128, 8);
  check_case(h, &rng, 8, ROUTE_INVALID, SL_MOE_NET_NODE_AGG, SL_ERR_RANGE);
  check_case(h, &rng, 8, ROUTE_RANDOM, SL_MOE_NET_DIRECT, SL_OK);
  sl_moe_comm_destroy(h);
}

/* Node-aggregated moves fewer bytes over the network when tokens want several ranks of one
 * remote node, never more; the same routing in both modes. */
static void test_net_bytes(void **state) {
  if (rt.boot.num_nodes < 2 || rt.boot.local_size < 2) skip();
  uint64_t rng = sl_test_seed() + 11u * (uint64_t)rt.boot.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_BF16, 4, 4, 128, 32);
  unsigned long long bytes[2];
  for (int m = 0; m < 2; m++) {
    sl_moe_net_stats_t a, b;
    sl_moe_comm_net_stats(h, &a);
    uint64_t r = rng; /* same inputs in both modes */
    check_case(h, &r, 32, ROUTE_OTHER_NODE, modes[m], SL_OK);
    sl_moe_comm_net_stats(h, &b);
    bytes[m] = b.dispatch_net_bytes - a.dispatch_net_bytes;
  }
  printf("rank %d: dispatch bytes over the network: direct %llu, node-aggregated %llu\n", H.rank, bytes[0], bytes[1]);
  assert_true(bytes[1] < bytes[0]);
  sl_moe_comm_destroy(h);
}

static void test_capacity_overflow(void **state) {
  enum { T = 6, K = 2, HD = 128 };
  sl_moe_comm_config_t cfg = {
      .num_experts = 2 * H.size, .top_k = K, .hidden = HD, .max_tokens = T, .expert_capacity = 3};
  sl_moe_comm_t *h = NULL;
  SL_ASSERT_OK(sl_moe_comm_create_world(H.dev, &rt.boot, &cfg, &h));
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  static uint16_t x[T * HD] __attribute__((aligned(16))), out[T * HD] __attribute__((aligned(16)));
  uint16_t *y = malloc((size_t)ex->num_local_experts * ex->capacity * HD * 2);
  int32_t ids[T * K];
  float w[T * K];
  for (int i = 0; i < T * HD; i++)
    x[i] = sl_f32_to_bf16(1.0f + (float)(i % 7));
  int last = H.size - 1; /* remote for node 0 */
  for (int t = 0; t < T; t++) {
    ids[t * K] = 2 * last;
    ids[t * K + 1] = 2 * last + 1;
    w[t * K] = w[t * K + 1] = 0.5f;
  }
  memset(out, 0xff, sizeof out);
  sl_moe_comm_dispatch_args_t da = {.num_tokens = T, .x = x, .topk_ids = ids, .topk_weights = w};
  sl_status_t s = sl_moe_comm_dispatch(h, &da, NULL);
  if (H.rank == last) {
    assert_int_equal(s, SL_ERR_CAPACITY);
    assert_non_null(strstr(sl_last_error(), "capacity of 3"));
    assert_int_equal(ex->expert_counts[0], T * H.size);
  } else {
    SL_ASSERT_OK(s);
  }
  memset(y, 0, (size_t)ex->num_local_experts * ex->capacity * HD * 2);
  sl_moe_comm_combine_args_t ca = {.num_tokens = T, .topk_ids = ids, .topk_weights = w, .expert_out = y, .out = out};
  SL_ASSERT_OK(sl_moe_comm_combine(h, &ca, NULL));
  for (int i = 0; i < T * HD; i++)
    if (out[i] != 0) fail_msg("rank %d out[%d] = 0x%04x, want +0", H.rank, i, out[i]);
  free(y);
  sl_moe_comm_destroy(h);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  setenv("UCX_TLS", "tcp", 0);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  H.dev = rt.dev;
  H.comm = rt.boot.world;
  H.rank = rt.boot.rank;
  H.size = rt.boot.size;
  H.ranks_per_node = rt.boot.local_size;
  if (rt.boot.rank == 0)
    printf("note: %d ranks on %d (simulated) nodes of %d: %s\n", rt.boot.size, rt.boot.num_nodes, rt.boot.local_size,
           rt.boot.num_nodes > 1 ? "inter-node path (shm inside a node, UCX proxy across)" : "one node: node handle");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payloads_random), cmocka_unit_test(test_skew_remote),
      cmocka_unit_test(test_empty_ranks),     cmocka_unit_test(test_invalid_ids),
      cmocka_unit_test(test_net_bytes),       cmocka_unit_test(test_capacity_overflow),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_runtime_finalize(&rt);
  return any;
}
