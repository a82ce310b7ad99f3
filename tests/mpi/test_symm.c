/* Symmetric memory on the CPU backend: every rank sees every peer's buffer, buffers start
 * zeroed, shm names are gone once created, and the start-up sweep removes stale names of
 * dead creators but keeps live ones. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/symm.h"
#include "sl_test.h"

static sl_runtime_t rt;

/* Names under /dev/shm starting with `prefix`. */
static int count_names(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

static void test_peers_see_each_other(void **state) {
  sl_symm_t *s;
  const size_t bytes = 100000; /* not a multiple of the page size */
  SL_ASSERT_OK(sl_symm_create(rt.dev, rt.boot.node_comm, bytes, "test", &s));
  int me = sl_symm_rank(s), n = sl_symm_size(s);
  assert_int_equal(n, rt.boot.local_size);
  assert_true(sl_symm_bytes(s) >= bytes);
  assert_ptr_equal(sl_symm_peer(s, me), sl_symm_local(s));
  assert_null(sl_symm_peer(s, n));
  /* zeroed at creation */
  const unsigned char *mine = sl_symm_local(s);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; i++)
    nonzero += mine[i] != 0;
  assert_int_equal(nonzero, 0);
  /* the names are unlinked once everybody mapped them */
  char prefix[64];
  snprintf(prefix, sizeof prefix, "sluice-%ld-", (long)getpid());
  assert_int_equal(count_names(prefix), 0);

  unsigned *w = sl_symm_local(s);
  for (size_t i = 0; i < bytes / 4; i++)
    w[i] = (unsigned)(me * 7919u + i);
  MPI_Barrier(rt.boot.node_comm);
  for (int r = 0; r < n; r++) {
    const unsigned *p = sl_symm_peer(s, r);
    size_t bad = 0;
    for (size_t i = 0; i < bytes / 4; i++)
      bad += p[i] != (unsigned)(r * 7919u + i);
    if (bad) fail_msg("rank %d's buffer: %zu words differ", r, bad);
  }
  /* a peer's write lands in the owner's buffer (after everybody finished reading) */
  MPI_Barrier(rt.boot.node_comm);
  int right = (me + 1) % n;
  ((unsigned *)sl_symm_peer(s, right))[1] = 0xC0FFEE00u + (unsigned)me;
  MPI_Barrier(rt.boot.node_comm);
  assert_int_equal(w[1], 0xC0FFEE00u + (unsigned)((me + n - 1) % n));
  sl_symm_destroy(s);
  assert_true(sl_symm_job_id() != 0);
}

static void test_sweep_removes_only_dead(void **state) {
  if (rt.boot.rank == 0) {
    /* A pid that is certainly dead: a child that has exited and been reaped. */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char dead[96], live[96];
    snprintf(dead, sizeof dead, "/sluice-%ld-feed-0-0", (long)child);
    snprintf(live, sizeof live, "/sluice-%ld-feed-0-1", (long)getpid());
    int fd = shm_open(dead, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    close(fd);
    fd = shm_open(live, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    close(fd);
    int removed = -1;
    SL_ASSERT_OK(sl_symm_sweep_stale(&removed));
    assert_true(removed >= 1);
    char name[96];
    snprintf(name, sizeof name, "sluice-%ld-feed-", (long)child);
    assert_int_equal(count_names(name), 0);
    snprintf(name, sizeof name, "sluice-%ld-feed-", (long)getpid());
    assert_int_equal(count_names(name), 1);
    shm_unlink(live);
  }
  MPI_Barrier(rt.boot.world);
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peers_see_each_other),
      cmocka_unit_test(test_sweep_removes_only_dead),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, rt.boot.world);
  sl_runtime_finalize(&rt);
  return any ? 1 : 0;
}
