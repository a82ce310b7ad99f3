/* Fault test of the UCX proxy: rank 3 (simulated node 1) stops (SIGSTOP) mid-job, so its
 * worker is no longer progressed and puts to it never complete. Ranks 0 and 1 (node 0)
 * must get an error naming rank 3, its node and host within the bound, not hang. Run by
 * tests/mpi/proxy_fault_driver.cmake (registration: test_proxy_stop.cmake), which checks the
 * "DETECTED" lines and that the job ends; rank 0 resumes rank 3 and aborts the job. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "comm/proxy.h"
#include "sl_test.h"

/* Over TCP a put counts as complete once the kernel took it, so the stalled rank must be
 * sent more than socket buffers hold before a flush depends on its progress. */
enum { AREA = 4096, BIG = 32 << 20, BIG_PUTS = 8 };

int main(int argc, char **argv) {
  setenv("UCX_TLS", "tcp", 0);
  sl_boot_t boot;
  if (sl_boot_init(&argc, &argv, sl_config()->ranks_per_node, &boot) != SL_OK) return 1;
  sl_device_t *dev;
  if (sl_device_open(SL_DEVICE_CPU, boot.local_rank, &dev) != SL_OK) return 1;
  if (boot.size != 4 || boot.num_nodes != 2) {
    printf("SKIPPED: needs -np 4 as two nodes\n");
    sl_boot_finalize(&boot);
    return SL_TEST_SKIP;
  }
  sl_proxy_t *px;
  if (sl_proxy_create(&boot, dev, BIG, (size_t)boot.size, NULL, &px) != SL_OK)
    MPI_Abort(MPI_COMM_WORLD, 2);
  /* One healthy round first: the connections are up. */
  for (int dst = 0; dst < boot.size; dst++)
    if (sl_proxy_is_remote(px, dst) &&
        sl_proxy_post_put(px, dst, AREA * (size_t)(1 + boot.rank), 0, AREA, (uint32_t)boot.rank, 1) != SL_OK)
      MPI_Abort(MPI_COMM_WORLD, 3);
  for (int src = 0; src < boot.size; src++)
    if (sl_proxy_is_remote(px, src) && sl_proxy_wait_flag(px, src, (uint32_t)src, 1) != SL_OK)
      MPI_Abort(MPI_COMM_WORLD, 4);
  if (sl_proxy_quiesce(px) != SL_OK) MPI_Abort(MPI_COMM_WORLD, 5);
  int pid = (int)getpid(), pids[4];
  MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, boot.world);
  MPI_Barrier(boot.world);

  const int stalled = 3;
  if (boot.rank == stalled) {
    printf("STOPPING rank %d\n", boot.rank);
    fflush(stdout);
    raise(SIGSTOP);
    MPI_Barrier(boot.world); /* resumed: the others have aborted the job by now */
    return 0;
  }
  if (sl_proxy_is_remote(px, stalled)) {
    sl_status_t s = SL_OK;
    for (int i = 0; i < BIG_PUTS && s == SL_OK; i++)
      s = sl_proxy_post_put(px, stalled, 0, 0, BIG, (uint32_t)boot.rank, 2 + (uint64_t)i);
    if (s == SL_OK) s = sl_proxy_quiesce(px);
    if (s == SL_OK) {
      printf("NOT DETECTED by rank %d: puts to a stopped rank completed\n", boot.rank);
      fflush(stdout);
      kill(pids[stalled], SIGCONT);
      MPI_Abort(MPI_COMM_WORLD, 6);
    }
    printf("DETECTED by rank %d: %s: %s\n", boot.rank, sl_status_str(s), sl_last_error());
    fflush(stdout);
    /* Both detectors have printed before anyone ends the job. */
    MPI_Barrier(boot.node_comm);
    if (boot.rank == 0) {
      kill(pids[stalled], SIGCONT);
      MPI_Abort(MPI_COMM_WORLD, 0);
    }
  }
  MPI_Barrier(boot.world); /* rank 2 (and 1) wait here until rank 0 aborts the job */
  return 0;
}
