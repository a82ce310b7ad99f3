/* MoE dispatch/combine faults (CPU backend, short SL_TIMEOUT_MS): rank 1 of the group
 *   stall:         sleeps 3x the timeout before its dispatch,
 *   skip_dispatch: never calls dispatch,
 *   skip_combine:  dispatches but never combines;
 * every other rank must fail with SL_ERR_TIMEOUT naming rank 1, within 2x the timeout (plus
 * slack for an oversubscribed CI machine), and nobody hangs. Registration:
 * test_moe_ep_fault.cmake. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moe_ep_fault_util.h"
#include "runtime/sluice.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  const char *mode = argc > 1 ? argv[1] : "";
  sl_runtime_t rt;
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  MPI_Comm comm = rt.boot.node_comm;
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2) {
    printf("SKIPPED: needs 2 ranks per node\n");
    sl_runtime_finalize(&rt);
    return 77;
  }
  int stall = !strcmp(mode, "stall"), skip_d = !strcmp(mode, "skip_dispatch"), skip_c = !strcmp(mode, "skip_combine");
  if (!stall && !skip_d && !skip_c) {
    fprintf(stderr, "usage: %s stall|skip_dispatch|skip_combine\n", argv[0]);
    return 2;
  }
  long timeout_ms = rt.config.timeout_ms;
  sl_moe_comm_t *h = NULL;
  int ok = 1;
  if (fault_make(rt.dev, comm, &h) != SL_OK) return 1;
  for (int i = 0; i < 2 && ok; i++) /* healthy calls first: epochs 1, 2 */
    if (fault_call(h, 0) != SL_OK) {
      fprintf(stderr, "rank %d: healthy call %d failed: %s\n", rank, i, sl_last_error());
      ok = 0;
    }
  const int victim = 1;
  double t0 = now_s();
  if (ok && rank == victim) {
    if (stall) {
      usleep((useconds_t)(3 * timeout_ms * 1000));
      sl_status_t s = fault_call(h, 0); /* late: may succeed or time out, must return */
      printf("rank %d (stalled) returned %s after %.2f s\n", rank, sl_status_str(s), now_s() - t0);
    } else if (skip_c) {
      if (fault_call(h, 1) != SL_OK) {
        fprintf(stderr, "rank %d: its dispatch failed: %s\n", rank, sl_last_error());
        ok = 0;
      }
    }
  } else if (ok) {
    sl_status_t s = fault_call(h, 0);
    double took = now_s() - t0;
    char want[32];
    snprintf(want, sizeof want, "for rank %d:", victim);
    if (s != SL_ERR_TIMEOUT || !strstr(sl_last_error(), want)) {
      fprintf(stderr, "rank %d: want SL_ERR_TIMEOUT naming rank %d, got %s: %s\n", rank, victim, sl_status_str(s),
              sl_last_error());
      ok = 0;
    } else if (took > 2.0 * timeout_ms / 1000.0 + 2.0) {
      fprintf(stderr, "rank %d: the timeout took %.2f s (SL_TIMEOUT_MS=%ld)\n", rank, took, timeout_ms);
      ok = 0;
    } else {
      printf("rank %d: SL_ERR_TIMEOUT naming rank %d after %.2f s, as wanted\n", rank, victim, took);
    }
    if (sl_moe_comm_dispatch(h, &(sl_moe_comm_dispatch_args_t){0}, NULL) != SL_ERR_PEER) {
      fprintf(stderr, "rank %d: a failed handle must refuse further calls\n", rank);
      ok = 0;
    }
  }
  fflush(stdout);
  MPI_Barrier(rt.boot.world);
  sl_moe_comm_destroy(h);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, rt.boot.world);
  sl_runtime_finalize(&rt);
  return all ? 0 : 1;
}
