/* Program of the MoE kill test (driven by comm1's kill_driver.cmake; see
 * test_moe_ep_kill.cmake).
 *   kill:  every rank prints its pid, then runs MoE calls; rank 1 SIGKILLs itself in the
 *          middle of a dispatch sequence. The job must end promptly (mpirun aborts it, or
 *          the others' timeouts end them); this program never returns 0 in that mode.
 *   sweep: the next start: create and destroy a handle (which sweeps stale shm names). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moe_ep_fault_util.h"
#include "runtime/sluice.h"

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  const char *mode = argc > 1 ? argv[1] : "";
  sl_runtime_t rt;
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) return 1;
  sl_moe_comm_t *h = NULL;
  if (fault_make(rt.dev, rt.boot.node_comm, &h) != SL_OK) {
    fprintf(stderr, "moe comm create failed: %s\n", sl_last_error());
    return 1;
  }
  int rc = 0;
  if (strcmp(mode, "kill") == 0) {
    printf("SLUICE_PID %ld\n", (long)getpid());
    fflush(stdout);
    MPI_Barrier(rt.boot.world);
    for (int it = 0;; it++) {
      if (it == 20 && rt.boot.rank == 1) raise(SIGKILL);
      if (fault_call(h, 0) != SL_OK) {
        fprintf(stderr, "rank %d: MoE call failed: %s\n", rt.boot.rank, sl_last_error());
        rc = 3; /* our own timeout ended it: still a failed job */
        break;
      }
    }
  } else if (strcmp(mode, "sweep") != 0) {
    fprintf(stderr, "usage: %s kill|sweep\n", argv[0]);
    rc = 2;
  }
  sl_moe_comm_destroy(h);
  sl_runtime_finalize(&rt);
  return rc;
}
