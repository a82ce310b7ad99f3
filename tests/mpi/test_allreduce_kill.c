/* Program of the kill test (driven by kill_driver.cmake; see test_allreduce_kill.cmake).
 *   kill:  every rank prints its pid, then runs all-reduces; rank 1 SIGKILLs itself in the
 *          middle. The job must end promptly (mpirun aborts it); this program never
 *          returns normally.
 *   sweep: the next start: create and destroy a communicator (which sweeps stale shm
 *          names), exit 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/allreduce.h"
#include "sl_test.h"

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  const char *mode = argc > 1 ? argv[1] : "";
  sl_runtime_t rt;
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  sl_comm_t *comm;
  if (sl_comm_create(&rt.boot, rt.dev, &rt.config, 1 << 16, &comm) != SL_OK) {
    fprintf(stderr, "comm create failed: %s\n", sl_last_error());
    return 1;
  }
  int rc = 0;
  if (strcmp(mode, "kill") == 0) {
    printf("SLUICE_PID %ld\n", (long)getpid());
    fflush(stdout);
    MPI_Barrier(rt.boot.world);
    float x[256];
    for (int it = 0;; it++) {
      if (it == 20 && rt.boot.rank == 1) raise(SIGKILL);
      for (int i = 0; i < 256; i++)
        x[i] = 1.0f;
      if (sl_allreduce(comm, x, x, 256, SL_DTYPE_F32, NULL) != SL_OK) {
        fprintf(stderr, "rank %d: all-reduce failed: %s\n", rt.boot.rank, sl_last_error());
        rc = 3; /* our own timeout ended it: still a failed job */
        break;
      }
    }
  } else if (strcmp(mode, "sweep") != 0) {
    fprintf(stderr, "usage: %s kill|sweep\n", argv[0]);
    rc = 2;
  }
  sl_comm_destroy(comm);
  sl_runtime_finalize(&rt);
  return rc;
}
