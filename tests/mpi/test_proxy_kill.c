/* Fault test of the UCX proxy: rank 3 (simulated node 1) is killed (SIGKILL) in the middle
 * of an exchange; the job must end promptly with a failure, never hang. Run by the driver
 * tests/mpi/proxy_fault_driver.cmake (registration: test_proxy_kill.cmake), which checks
 * the exit status and the time mpirun took. Exit 0 would mean nobody noticed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/proxy.h"
#include "sl_test.h"

enum { ROUNDS = 40, KILL_ROUND = 5, AREA = 65536 };

int main(int argc, char **argv) {
  setenv("UCX_TLS", "tcp", 0); /* reports a lost peer (see test_proxy.c) */
  sl_boot_t boot;
  if (sl_boot_init(&argc, &argv, sl_config()->ranks_per_node, &boot) != SL_OK) return 1;
  sl_device_t *dev;
  if (sl_device_open(SL_DEVICE_CPU, boot.local_rank, &dev) != SL_OK) return 1;
  sl_proxy_options_t o = {.all_peers_remote = boot.num_nodes == 1};
  sl_proxy_t *px;
  sl_status_t s = sl_proxy_create(&boot, dev, AREA * (size_t)(boot.size + 1), (size_t)boot.size, &o, &px);
  if (s != SL_OK) {
    fprintf(stderr, "rank %d: create failed: %s\n", boot.rank, sl_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  unsigned char *win;
  sl_proxy_window(px, (void **)&win, NULL);
  for (uint64_t epoch = 1; epoch <= ROUNDS && s == SL_OK; epoch++) {
    if (boot.rank == boot.size - 1 && epoch == KILL_ROUND) {
      printf("KILLING rank %d in round %llu\n", boot.rank, (unsigned long long)epoch);
      fflush(stdout);
      raise(SIGKILL);
    }
    memset(win, (int)epoch, AREA);
    for (int dst = 0; dst < boot.size && s == SL_OK; dst++)
      if (sl_proxy_is_remote(px, dst))
        s = sl_proxy_post_put(px, dst, AREA * (size_t)(1 + boot.rank), 0, AREA, (uint32_t)boot.rank, epoch);
    for (int src = 0; src < boot.size && s == SL_OK; src++)
      if (sl_proxy_is_remote(px, src)) s = sl_proxy_wait_flag(px, src, (uint32_t)src, epoch);
    if (s == SL_OK) s = sl_proxy_quiesce(px);
    /* Keep ranks in step so the next round's puts do not overwrite unread data. */
    if (s == SL_OK) s = sl_mpi_status(MPI_Barrier(boot.world), "round barrier");
  }
  if (s != SL_OK) {
    fprintf(stderr, "rank %d: proxy exchange failed (%s): %s\n", boot.rank, sl_status_str(s), sl_last_error());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  sl_proxy_destroy(px);
  sl_device_close(dev);
  sl_boot_finalize(&boot);
  return 0;
}
