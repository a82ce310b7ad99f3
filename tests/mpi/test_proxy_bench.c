/* Smoke test of the proxy benchmark (launch/bench_proxy.c): it runs collectively in quick
 * mode with few iterations and returns SL_OK; its rows are printed by rank 0. With
 * arguments it runs the benchmark as asked:
 *   mpirun -np 4 -x SL_RANKS_PER_NODE=2 build/tests/mpi_test_proxy_bench --full --iters 20 */
#include <stdlib.h>

#include "launch/bench_proxy.h"
#include "sl_test.h"

static sl_runtime_t rt;
static int user_argc;
static char **user_argv;

static void test_bench_runs(void **state) {
  char a0[] = "bench", a1[] = "--quick", a2[] = "--iters", a3[] = "2";
  char *quick[] = {a0, a1, a2, a3, NULL};
  /* Options given on the command line (e.g. --full --iters 20) replace the quick defaults,
   * so the same binary is the benchmark until `sluice bench` calls sl_bench_proxy. */
  char **argv = user_argc > 1 ? user_argv : quick;
  int argc = user_argc > 1 ? user_argc : 4;
  sl_bench_t b;
  SL_ASSERT_OK(sl_bench_init(&rt, &argc, argv, &b));
  assert_int_equal(argc, 1);
  SL_ASSERT_OK(sl_bench_proxy(&b));
  sl_bench_finish(&b);
}

int main(int argc, char **argv) {
  setenv("UCX_TLS", "tcp", 0);
  setenv("SL_DEVICE", "cpu", 0);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  user_argc = argc;
  user_argv = argv;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bench_runs)};
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
  sl_runtime_finalize(&rt);
  return 0;
}
