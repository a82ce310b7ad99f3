/* MPI bootstrap under mpirun: ranks, nodes (real or simulated by SL_RANKS_PER_NODE), local
 * ranks and the node communicator agree on every rank. */
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"

static sl_boot_t boot;
static int per_node;

static void test_world_and_nodes(void **state) {
  assert_true(boot.size >= 1);
  assert_in_range(boot.rank, 0, boot.size - 1);
  int sizes[2] = {boot.local_size, boot.num_nodes};
  int node_size = 0;
  MPI_Comm_size(boot.node_comm, &node_size);
  assert_int_equal(node_size, boot.local_size);
  if (per_node > 0) {
    assert_true(boot.simulated_nodes);
    assert_int_equal(boot.local_size, per_node);
    assert_int_equal(boot.num_nodes, boot.size / per_node);
    assert_int_equal(boot.node, boot.rank / per_node);
    assert_int_equal(boot.local_rank, boot.rank % per_node);
  } else {
    /* one host: everything is one node */
    assert_int_equal(boot.num_nodes, 1);
    assert_int_equal(boot.local_size, boot.size);
    assert_int_equal(boot.local_rank, boot.rank);
  }
  /* every rank agrees on the node count, and local ranks are 0..local_size-1 per node */
  int max[2];
  MPI_Allreduce(sizes, max, 2, MPI_INT, MPI_MAX, boot.world);
  assert_int_equal(max[1], boot.num_nodes);
  int lr_sum = 0;
  MPI_Allreduce(&boot.local_rank, &lr_sum, 1, MPI_INT, MPI_SUM, boot.node_comm);
  assert_int_equal(lr_sum, boot.local_size * (boot.local_size - 1) / 2);
  /* leaders: exactly one per node */
  int is_leader = boot.leaders_comm != MPI_COMM_NULL, leaders = 0;
  MPI_Allreduce(&is_leader, &leaders, 1, MPI_INT, MPI_SUM, boot.world);
  assert_int_equal(leaders, boot.num_nodes);
  assert_int_equal(is_leader, boot.local_rank == 0);
}

static void test_bad_ranks_per_node(void **state) {
  /* k that does not divide the world is refused with the variable named */
  if (boot.size < 2) skip();
  sl_boot_t b2;
  sl_status_t s = sl_boot_init(NULL, NULL, boot.size + 1, &b2);
  assert_int_equal(s, SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "SL_RANKS_PER_NODE"));
  sl_log_set_identity(boot.rank, boot.size, boot.node);
}

int main(int argc, char **argv) {
  const sl_config_t *cfg = sl_config();
  per_node = cfg->ranks_per_node;
  if (sl_boot_init(&argc, &argv, per_node, &boot) != SL_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_world_and_nodes),
      cmocka_unit_test(test_bad_ranks_per_node),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sl_boot_finalize(&boot);
  return any;
}
