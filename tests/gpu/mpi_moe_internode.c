/* GPU, 4 ranks sharing one GPU as two simulated nodes of 2 (SL_RANKS_PER_NODE=2; also 2
 * nodes of 1): inter-node MoE EP (sl_moe_comm_create_world) on the CUDA backend, the
 * host-driven staging path end to end: device inputs -> stream sync -> host -> shm (same
 * node) / UCX proxy staged window (other node) -> expert-major device buffers; combine back
 * the same way. Checked against the single-rank reference (tests/mpi/moe_ep_check.h),
 * bit-exact, expert counts exact:
 *  - every payload (bf16, FP8, MXFP8, NVFP4), direct and node-aggregated dispatch;
 *  - everything to one remote rank, top-k all on the other node, top-k on one rank;
 *  - ranks with T = 0; invalid ids reported (SL_ERR_RANGE) with the rest exact;
 *  - transports: self / shm (same node) / proxy (other node);
 *  - node-aggregated puts fewer bytes over the network than direct on the same routing.
 * Exits 77 (skipped) without a GPU or with a single node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi/moe_ep_check.h"

static sl_runtime_t rt;
static moe_harness_t H;

static sl_moe_comm_t *make(int payload, int epr, int top_k, int hidden, int max_tokens) {
  sl_moe_comm_config_t cfg = {.deploy = SL_MOE_DEPLOY_EP,
                              .num_experts = epr * H.size,
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

static void run(sl_moe_comm_t *h, uint64_t *rng, int T, moe_route_t route, sl_moe_net_mode_t mode, sl_status_t expect) {
  moe_case_t c = {.T = T, .route = route, .net = mode, .expect_dispatch = expect};
  moe_run_case(&H, h, rng, &c);
  assert_int_equal(c.net_taken, mode);
  if (c.mismatches)
    fail_msg("rank %d: %zu mismatches (route %s, T %d, mode %s)", H.rank, c.mismatches, moe_route_name(route), T,
             sl_moe_net_mode_name(mode));
}

static void test_payloads_modes(void **state) {
  uint64_t rng = sl_test_seed() + 101u * (uint64_t)H.rank;
  for (int payload = 0; payload < SL_MOE_EP_NUM_PAYLOADS; payload++) {
    sl_moe_comm_t *h = make(payload, 4, 4, 512, 48);
    run(h, &rng, 1 + (int)(sl_test_rand_u64(&rng) % 48), ROUTE_RANDOM, SL_MOE_NET_DIRECT, SL_OK);
    run(h, &rng, 1 + (int)(sl_test_rand_u64(&rng) % 48), ROUTE_RANDOM, SL_MOE_NET_NODE_AGG, SL_OK);
    sl_moe_comm_destroy(h);
    if (H.rank == 0) printf("  payload %d: direct and node-aggregated exact\n", payload);
  }
}

static void test_skew_empty_invalid(void **state) {
  uint64_t rng = sl_test_seed() + 7u * (uint64_t)H.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_FP8, 8, 4, 384, 32);
  sl_moe_net_mode_t modes[] = {SL_MOE_NET_DIRECT, SL_MOE_NET_NODE_AGG};
  for (int m = 0; m < 2; m++) {
    run(h, &rng, 32, ROUTE_LAST_RANK, modes[m], SL_OK);
    run(h, &rng, 32, ROUTE_SKEW, modes[m], SL_OK);
    run(h, &rng, 32, ROUTE_OTHER_NODE, modes[m], SL_OK);
    run(h, &rng, 19, ROUTE_ONE_RANK, modes[m], SL_OK);
    run(h, &rng, H.rank % 2 ? 0 : 32, ROUTE_RANDOM, modes[m], SL_OK);
    run(h, &rng, 0, ROUTE_RANDOM, modes[m], SL_OK);
    run(h, &rng, 12, ROUTE_INVALID, modes[m], SL_ERR_RANGE);
  }
  sl_moe_comm_destroy(h);
}

static void test_net_bytes(void **state) {
  if (rt.boot.local_size < 2) skip();
  uint64_t rng = sl_test_seed() + 11u * (uint64_t)H.rank;
  sl_moe_comm_t *h = make(SL_MOE_EP_PAYLOAD_BF16, 4, 4, 256, 64);
  unsigned long long bytes[2];
  sl_moe_net_mode_t modes[] = {SL_MOE_NET_DIRECT, SL_MOE_NET_NODE_AGG};
  for (int m = 0; m < 2; m++) {
    sl_moe_net_stats_t a, b;
    sl_moe_comm_net_stats(h, &a);
    uint64_t r = rng;
    run(h, &r, 64, ROUTE_OTHER_NODE, modes[m], SL_OK);
    sl_moe_comm_net_stats(h, &b);
    bytes[m] = b.dispatch_net_bytes - a.dispatch_net_bytes;
  }
  if (H.rank == 0) printf("  dispatch bytes over the network: direct %llu, node-aggregated %llu\n", bytes[0], bytes[1]);
  assert_true(bytes[1] < bytes[0]);
  sl_moe_comm_destroy(h);
}

int main(int argc, char **argv) {
  setenv("SL_TIMEOUT_MS", "30000", 0); /* contexts time-slice on a shared GPU: be generous */
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  if (sl_device_backend(rt.dev) != SL_BACKEND_CUDA || rt.boot.num_nodes < 2) {
    if (rt.boot.rank == 0)
      printf("SKIPPED: %s\n", sl_device_backend(rt.dev) != SL_BACKEND_CUDA ? sl_device_cuda_unavailable_reason()
                                                                           : "one node (set SL_RANKS_PER_NODE)");
    sl_runtime_finalize(&rt);
    return SL_TEST_SKIP;
  }
  H.dev = rt.dev;
  H.comm = rt.boot.world;
  H.rank = rt.boot.rank;
  H.size = rt.boot.size;
  H.ranks_per_node = rt.boot.local_size;
  if (sl_stream_create(rt.dev, &H.stream) != SL_OK) {
    fprintf(stderr, "stream: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payloads_modes),
      cmocka_unit_test(test_skew_empty_invalid),
      cmocka_unit_test(test_net_bytes),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_stream_destroy(rt.dev, H.stream);
  sl_runtime_finalize(&rt);
  return any;
}
