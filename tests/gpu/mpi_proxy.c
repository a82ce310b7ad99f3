/* GPU test of the UCX proxy: a JIT kernel (comm/proxy_post.cu) writes a pattern into this
 * rank's pinned window and posts one descriptor per block into the proxy's device ring;
 * every remote peer acquires the flags in a GPU kernel that counts wrong bytes, then on the
 * host, where the bytes are compared with the CPU's pattern. Alternate rounds post the same
 * data from the CPU producer; every round must match the CPU reference exactly. Ranks share one GPU; with
 * SL_RANKS_PER_NODE=2 -np 4 they form two simulated nodes, otherwise every other rank is treated as remote. Exit 77
 * without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "comm/proxy_pattern.h"
#include "sl_test.h"

enum { BLOCKS = 8, THREADS = 128, ROUNDS = 4 };
/* An odd chunk size, so puts and their offsets are unaligned. */
static const size_t CHUNK = 12345;

static sl_boot_t boot;
static sl_device_t *dev;

static size_t area_bytes(void) {
  return ((BLOCKS * CHUNK + 255) / 256) * 256;
}
/* Window: send area per destination rank, then receive area per source rank. */
static size_t send_off(int dst) {
  return area_bytes() * (size_t)dst;
}
static size_t recv_off(int src) {
  return area_bytes() * (size_t)(boot.size + src);
}

static void test_kernel_posts_and_cpu_posts(void **state) {
  sl_proxy_options_t o = {.all_peers_remote = boot.num_nodes == 1};
  sl_proxy_t *px;
  SL_ASSERT_OK(sl_proxy_create(&boot, dev, area_bytes() * 2u * (size_t)boot.size, (size_t)boot.size * BLOCKS, &o, &px));
  if (boot.rank == 0)
    printf("proxy mode: %s\n",
           sl_proxy_mode(px) == SL_PROXY_DIRECT ? "direct (GPUDirect RDMA)" : "staged (pinned host)");
  unsigned char *win_dev;
  sl_proxy_window(px, NULL, (void **)&win_dev);
  assert_non_null(win_dev);
  sl_proxy_dev_ring_t ring;
  sl_proxy_device_ring(px, &ring);
  assert_non_null(ring.ring);
  assert_non_null(ring.head);

  sl_jit_spec_t spec;
  SL_ASSERT_OK(sl_proxy_post_kernel_spec(&spec, THREADS));
  sl_kernel_t *k, *check;
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &k));
  SL_ASSERT_OK(sl_proxy_check_kernel_spec(&spec, THREADS));
  SL_ASSERT_OK(sl_jit_get_kernel(dev, &spec, &check));
  uint64_t *flags_dev;
  sl_proxy_flags(px, NULL, &flags_dev);
  assert_non_null(flags_dev);
  unsigned long long *mismatch_dev;
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(unsigned long long), (void **)&mismatch_dev));
  int *status_dev;
  SL_ASSERT_OK(sl_device_malloc(dev, sizeof(int) * BLOCKS, (void **)&status_dev));

  unsigned char *host = malloc(area_bytes());
  unsigned char *want = malloc(BLOCKS * CHUNK);
  assert_non_null(host);
  assert_non_null(want);
  size_t bad = 0;
  for (int round = 0; round < ROUNDS; round++) {
    const unsigned long long epoch = (unsigned long long)round + 1;
    const bool by_kernel = round % 2 == 0;
    /* Poison what peers will write, so a missing put cannot pass. */
    for (int src = 0; src < boot.size; src++)
      sl_test_poison(dev, win_dev + recv_off(src), area_bytes());
    SL_ASSERT_OK(sl_proxy_quiesce(px));
    assert_int_equal(MPI_Barrier(boot.world), MPI_SUCCESS);
    for (int dst = 0; dst < boot.size; dst++) {
      if (!sl_proxy_is_remote(px, dst)) continue;
      if (by_kernel) {
        sl_test_poison(dev, status_dev, sizeof(int) * BLOCKS);
        int rank = boot.rank;
        unsigned long long local_base = send_off(dst), remote_base = recv_off(boot.rank), chunk = CHUNK;
        unsigned flag_base = (unsigned)(boot.rank * BLOCKS);
        void *args[] = {&ring,        &win_dev, &rank,      &dst,           &local_base,
                        &remote_base, &chunk,   &flag_base, (void *)&epoch, &status_dev};
        sl_launch_t l = {.grid = {BLOCKS, 1, 1}, .block = {THREADS, 1, 1}};
        SL_ASSERT_OK(sl_kernel_launch(k, &l, args));
        SL_ASSERT_OK(sl_device_sync(dev));
        SL_ASSERT_OK(sl_device_check(dev, "proxy post kernel"));
        int status[BLOCKS];
        SL_ASSERT_OK(sl_memcpy(dev, status, status_dev, sizeof status, NULL));
        SL_ASSERT_OK(sl_device_sync(dev));
        for (int b = 0; b < BLOCKS; b++)
          if (status[b] != 0) fail_msg("block %d: sl_ring_post returned %d (%s)", b, status[b], sl_proxy_error(px));
      } else {
        /* The CPU producer: the same bytes, written by the host, posted per block. */
        for (int b = 0; b < BLOCKS; b++)
          for (size_t i = 0; i < CHUNK; i++)
            host[b * CHUNK + i] = sl_proxy_pattern_byte((uint32_t)boot.rank, (uint32_t)b, epoch, i);
        SL_ASSERT_OK(sl_memcpy(dev, win_dev + send_off(dst), host, BLOCKS * CHUNK, NULL));
        SL_ASSERT_OK(sl_device_sync(dev));
        for (int b = 0; b < BLOCKS; b++)
          SL_ASSERT_OK(sl_proxy_post_put(px, dst, recv_off(boot.rank) + b * CHUNK, send_off(dst) + b * CHUNK, CHUNK,
                                         (uint32_t)(boot.rank * BLOCKS + b), epoch));
      }
    }
    /* Every rank's posting kernels have finished: the GPU waiters below depend only on
     * the proxies (CPU threads), never on another process's kernel getting the GPU. */
    assert_int_equal(MPI_Barrier(boot.world), MPI_SUCCESS);
    for (int src = 0; src < boot.size; src++) {
      if (!sl_proxy_is_remote(px, src)) continue;
      /* GPU receiver: acquire each block's flag, count wrong bytes. */
      SL_ASSERT_OK(sl_memset(dev, mismatch_dev, 0, sizeof(unsigned long long), NULL));
      sl_test_poison(dev, status_dev, sizeof(int) * BLOCKS);
      unsigned long long recv_base = recv_off(src), chunk = CHUNK, timeout_ns = ring.timeout_ns;
      unsigned flag_base = (unsigned)(src * BLOCKS);
      void *cargs[] = {&win_dev,   &flags_dev,     &src,        &recv_base,    &chunk,
                       &flag_base, (void *)&epoch, &timeout_ns, &mismatch_dev, &status_dev};
      sl_launch_t cl = {.grid = {BLOCKS, 1, 1}, .block = {THREADS, 1, 1}};
      SL_ASSERT_OK(sl_kernel_launch(check, &cl, cargs));
      SL_ASSERT_OK(sl_device_sync(dev));
      SL_ASSERT_OK(sl_device_check(dev, "proxy check kernel"));
      int cstatus[BLOCKS];
      unsigned long long gpu_bad = ~0ull;
      SL_ASSERT_OK(sl_memcpy(dev, cstatus, status_dev, sizeof cstatus, NULL));
      SL_ASSERT_OK(sl_memcpy(dev, &gpu_bad, mismatch_dev, sizeof gpu_bad, NULL));
      SL_ASSERT_OK(sl_device_sync(dev));
      for (int b = 0; b < BLOCKS; b++)
        if (cstatus[b] != 0)
          fail_msg("rank %d: GPU wait for flag %d (epoch %llu) from rank %d returned %d", boot.rank, src * BLOCKS + b,
                   epoch, src, cstatus[b]);
      if (gpu_bad != 0)
        fail_msg("rank %d round %d: the GPU counted %llu wrong bytes from rank %d", boot.rank, round, gpu_bad, src);
      /* CPU receiver and reference. */
      for (int b = 0; b < BLOCKS; b++)
        SL_ASSERT_OK(sl_proxy_wait_flag(px, src, (uint32_t)(src * BLOCKS + b), epoch));
      SL_ASSERT_OK(sl_memcpy(dev, host, win_dev + recv_off(src), area_bytes(), NULL));
      SL_ASSERT_OK(sl_device_sync(dev));
      for (int b = 0; b < BLOCKS; b++)
        for (size_t i = 0; i < CHUNK; i++)
          want[b * CHUNK + i] = sl_proxy_pattern_byte((uint32_t)src, (uint32_t)b, epoch, i);
      for (size_t i = 0; i < BLOCKS * CHUNK; i++)
        if (host[i] != want[i]) {
          if (bad < 5)
            fprintf(stderr, "rank %d round %d (%s) from %d: byte %zu is %02x, want %02x\n", boot.rank, round,
                    by_kernel ? "kernel" : "cpu", src, i, host[i], want[i]);
          bad++;
        }
      for (size_t i = BLOCKS * CHUNK; i < area_bytes(); i++)
        bad += host[i] != 0xFF;
    }
  }
  assert_int_equal(bad, 0);
  sl_proxy_stats_t st;
  sl_proxy_stats(px, &st);
  if (boot.rank == 0)
    printf("rank 0: %llu puts, %llu bytes through the proxy\n", (unsigned long long)st.puts,
           (unsigned long long)st.bytes);
  free(host);
  free(want);
  sl_device_free(dev, status_dev);
  sl_device_free(dev, mismatch_dev);
  SL_ASSERT_OK(sl_proxy_destroy(px));
}

int main(int argc, char **argv) {
  setenv("UCX_TLS", "tcp", 0); /* RMA between processes of one host; see tests/mpi/test_proxy.c */
  if (sl_boot_init(&argc, &argv, sl_config()->ranks_per_node, &boot) != SL_OK) return 1;
  dev = sl_test_open_gpu_or_skip(boot.local_rank);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_posts_and_cpu_posts),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  sl_device_close(dev);
  if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
  sl_boot_finalize(&boot);
  return 0;
}
