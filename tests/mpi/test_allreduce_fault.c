/* Fault test (CPU backend): the last rank of each node stops taking part in the middle of a
 * run of all-reduces, by stalling past the timeout before the call ("stall"), inside the
 * call between the two phases of a two-shot ("midstall", by fault injection), or by
 * skipping the call ("skip"). Every other rank must return SL_ERR_TIMEOUT naming that rank within twice
 * SL_TIMEOUT_MS, and a later call on the broken communicator must fail at once. Nothing may
 * hang: teardown waits are bounded too. Registered by test_allreduce_fault.cmake. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/allreduce.h"
#include "sl_test.h"

static sl_runtime_t rt;
static const char *mode = "skip";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_peer_stops(void **state) {
  sl_comm_t *comm;
  SL_ASSERT_OK(sl_comm_create(&rt.boot, rt.dev, &rt.config, 1 << 16, &comm));
  const int victim = sl_comm_size(comm) - 1, me = sl_comm_rank(comm);
  const long timeout_ms = rt.config.timeout_ms;
  assert_true(timeout_ms <= 2000); /* the registration sets a short timeout */
  int victim_world = 0;
  if (me == victim) victim_world = rt.boot.rank;
  MPI_Allreduce(MPI_IN_PLACE, &victim_world, 1, MPI_INT, MPI_MAX, rt.boot.node_comm);
  const bool midstall = strcmp(mode, "midstall") == 0;
  /* Call 4 (epoch 4, it == 3) is two-shot: the victim signals phase 0, then sleeps. */
  if (midstall && me == victim) sl_comm_test_stall(comm, 4, 0, 3 * timeout_ms);
  float x[1000];
  for (int it = 0; it < 5; it++) {
    for (int i = 0; i < 1000; i++)
      x[i] = 1.0f;
    if (it == 3 && me == victim && !midstall) {
      if (strcmp(mode, "stall") == 0) usleep((useconds_t)(3 * timeout_ms * 1000)); /* then leave */
      break;
    }
    sl_comm_set_algo(comm, it % 2 ? SL_AR_TWOSHOT : SL_AR_ONESHOT);
    double t0 = now_ms();
    sl_status_t s = sl_allreduce(comm, x, x, 1000, SL_DTYPE_F32, NULL);
    double took = now_ms() - t0;
    if (it < 3) {
      SL_ASSERT_OK(s);
      assert_true(x[0] == (float)sl_comm_size(comm));
      continue;
    }
    if (me == victim) break; /* midstall: it woke after the others gave up; nothing to check */
    if (s != SL_ERR_TIMEOUT) fail_msg("call %d: expected SL_ERR_TIMEOUT, got %s", it, sl_status_str(s));
    if (it == 3) {
      char want[64];
      snprintf(want, sizeof want, "for rank %d (world rank %d)", victim, victim_world);
      if (!strstr(sl_last_error(), want)) fail_msg("the error does not name the peer (%s): %s", want, sl_last_error());
      if (took > 2.0 * (double)timeout_ms) fail_msg("timed out after %.0f ms, more than 2 x %ld ms", took, timeout_ms);
      assert_int_equal(sl_comm_check(comm), SL_ERR_TIMEOUT);
      fprintf(stderr, "[test] rank %d: SL_ERR_TIMEOUT after %.0f ms (limit %ld ms): %s\n", me, took, timeout_ms,
              sl_last_error());
    } else {
      if (took > 100.0) fail_msg("a call on the broken communicator took %.0f ms", took);
    }
  }
  double t0 = now_ms();
  sl_comm_destroy(comm); /* bounded: returns even if a peer is late */
  double took = now_ms() - t0;
  if (took > 2.0 * (double)timeout_ms + 3.0 * (double)timeout_ms) fail_msg("teardown took %.0f ms", took);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (argc > 1) mode = argv[1];
  if (strcmp(mode, "stall") != 0 && strcmp(mode, "skip") != 0 && strcmp(mode, "midstall") != 0) {
    fprintf(stderr, "usage: %s stall|midstall|skip\n", argv[0]);
    return 2;
  }
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_peer_stops)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, rt.boot.world);
  sl_runtime_finalize(&rt);
  return any ? 1 : 0;
}
