/* The node-level MoE (EP and TP handles) with moe's real expert FFN between dispatch and
 * combine equals moe's single-rank layer (sl_moe_layer_forward over every expert) on the
 * same tokens and routing, CPU backend under mpirun. With simulated nodes the group is the
 * node. */
#include <stdio.h>
#include <stdlib.h>

#include "moe_ep_layer_check.h"

static sl_runtime_t rt;
static moe_harness_t H;

static void test_ep_equals_layer(void **state) {
  size_t bad = moe_run_layer_case(&H, SL_MOE_DEPLOY_EP, 4, 3, 256, 128, 12, SL_MOE_COMM_PATH_AUTO, sl_test_seed());
  if (bad) fail_msg("rank %d: %zu outputs differ from the single-rank layer", H.rank, bad);
}

static void test_tp_equals_layer(void **state) {
  size_t bad = moe_run_layer_case(&H, SL_MOE_DEPLOY_TP, 4, 4, 128, 64, 9, SL_MOE_COMM_PATH_AUTO, sl_test_seed() + 1);
  if (bad) fail_msg("rank %d: %zu outputs differ from the single-rank layer", H.rank, bad);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  H.dev = rt.dev;
  H.comm = rt.boot.node_comm;
  MPI_Comm_rank(H.comm, &H.rank);
  MPI_Comm_size(H.comm, &H.size);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ep_equals_layer), cmocka_unit_test(test_tp_equals_layer)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_runtime_finalize(&rt);
  return any;
}
