/* MPI tests of the UCX proxy (comm/proxy.h) on the CPU backend: puts of many sizes at
 * unaligned offsets arrive intact and never after their flag, ring back-pressure without
 * loss (host and device rings), a ring-full wait that times out cleanly, and a peer that
 * stalls mid-transfer is named in the others' SL_ERR_TIMEOUT.
 * Without nodes (np2/np4) every other rank is treated as remote (all_peers_remote); with
 * SL_RANKS_PER_NODE=2 -np 4 only ranks of the other simulated node are. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/proxy.h"
#include "comm/proxy_pattern.h"
#include "sl_test.h"

static sl_boot_t boot;
static sl_device_t *dev;
static int *node_of; /* world rank -> node */

/* UCX transport for RMA between processes of one host. Measured on the dev machine (UCX
 * 1.13): "tcp" works and reports a lost peer; "sm,self" (posix/sysv/cma) also works but
 * cannot report peer failure, so the proxy connects those without it. Set only when the
 * user did not choose. */
static void default_ucx_env(void) {
  setenv("UCX_TLS", "tcp", 0);
}

static sl_proxy_options_t options(void) {
  sl_proxy_options_t o = {.all_peers_remote = boot.num_nodes == 1};
  return o;
}

static void barrier(void) {
  assert_int_equal(MPI_Barrier(boot.world), MPI_SUCCESS);
}

/* ---- puts of many sizes ---------------------------------------------------------- */

enum { MAX_PUT = 4 << 20, SLACK = 128 };

static const size_t put_sizes[] = {
    1, 2, 3, 7, 8, 31, 64, 65, 255, 1000, 4095, 4096, 8193, 65537, 262144 + 5, (1 << 20) + 3, MAX_PUT};
enum { NUM_SIZES = sizeof put_sizes / sizeof put_sizes[0] };

/* Window: [0, AREA) send area, then one receive area of AREA bytes per source rank.
 * Flags: [0, size) data flag per source, [size, 2 size) acknowledgement per source. */
static const size_t AREA = MAX_PUT + 2 * SLACK;

static void test_puts_all_sizes(void **state) {
  sl_proxy_options_t o = options();
  sl_proxy_t *px;
  size_t window = AREA * (size_t)(boot.size + 1);
  SL_ASSERT_OK(sl_proxy_create(&boot, dev, window, (size_t)2 * boot.size, &o, &px));
  assert_int_equal(sl_proxy_mode(px), SL_PROXY_STAGED);
  unsigned char *win;
  sl_proxy_window(px, (void **)&win, NULL);
  assert_non_null(win);
  int nremote = 0;
  for (int r = 0; r < boot.size; r++)
    nremote += sl_proxy_is_remote(px, r);
  assert_false(sl_proxy_is_remote(px, boot.rank));
  if (nremote == 0) {
    sl_proxy_destroy(px);
    skip();
  }
  /* Every rank draws the same offsets: seed agreed from rank 0. */
  uint64_t seed = sl_test_seed();
  assert_int_equal(MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, boot.world), MPI_SUCCESS);
  uint64_t rng = seed;
  const int rounds = 2 * NUM_SIZES;
  memset(win + AREA, 0xEE, AREA * (size_t)boot.size);
  barrier();
  size_t bad = 0;
  for (int round = 0; round < rounds; round++) {
    const uint64_t epoch = (uint64_t)round + 1;
    const size_t bytes = put_sizes[round % NUM_SIZES];
    const size_t local_off = sl_test_rand_u64(&rng) % SLACK, remote_off = sl_test_rand_u64(&rng) % SLACK;
    for (size_t i = 0; i < bytes; i++)
      win[local_off + i] = sl_proxy_pattern_byte((uint32_t)boot.rank, 0, epoch, i);
    for (int dst = 0; dst < boot.size; dst++)
      if (sl_proxy_is_remote(px, dst))
        SL_ASSERT_OK(sl_proxy_post_put(px, dst, AREA * (size_t)(1 + boot.rank) + remote_off, local_off, bytes,
                                       (uint32_t)boot.rank, epoch));
    for (int src = 0; src < boot.size; src++) {
      if (!sl_proxy_is_remote(px, src)) continue;
      SL_ASSERT_OK(sl_proxy_wait_flag(px, src, (uint32_t)src, epoch));
      /* The flag is acquired: the whole put must be there, and nothing around it. */
      unsigned char *area = win + AREA * (size_t)(1 + src);
      for (size_t i = 0; i < bytes; i++)
        if (area[remote_off + i] != sl_proxy_pattern_byte((uint32_t)src, 0, epoch, i)) {
          if (bad < 5)
            fprintf(stderr, "rank %d round %d: from %d, %zu bytes at +%zu: byte %zu is %02x, want %02x\n", boot.rank,
                    round, src, bytes, remote_off, i, area[remote_off + i],
                    sl_proxy_pattern_byte((uint32_t)src, 0, epoch, i));
          bad++;
          break;
        }
      for (size_t i = 0; i < remote_off; i++)
        bad += area[i] != 0xEE;
      for (size_t i = remote_off + bytes; i < remote_off + bytes + SLACK; i++)
        bad += area[i] != 0xEE;
      memset(area, 0xEE, remote_off + bytes + SLACK);
      /* The sender may overwrite this area only after this acknowledgement. */
      SL_ASSERT_OK(sl_proxy_post_put(px, src, 0, 0, 0, (uint32_t)(boot.size + boot.rank), epoch));
    }
    for (int src = 0; src < boot.size; src++)
      if (sl_proxy_is_remote(px, src)) SL_ASSERT_OK(sl_proxy_wait_flag(px, src, (uint32_t)(boot.size + src), epoch));
    SL_ASSERT_OK(sl_proxy_quiesce(px));
  }
  assert_int_equal(bad, 0);
  sl_proxy_stats_t st;
  sl_proxy_stats(px, &st);
  assert_int_equal(st.puts, (uint64_t)rounds * 2u * (uint64_t)nremote);
  SL_ASSERT_OK(sl_proxy_destroy(px));
}

/* ---- back-pressure: many more descriptors than ring slots -------------------------- */

enum { BP_SLOTS = 8, BP_POSTS = 600 };

static void test_backpressure_no_loss(void **state) {
  sl_proxy_options_t o = options();
  o.ring_slots = BP_SLOTS;
  sl_proxy_t *px;
  /* Receive area per source: BP_POSTS 8-byte values; flags: host ring, device ring per source. */
  const size_t area = BP_POSTS * 8;
  SL_ASSERT_OK(sl_proxy_create(&boot, dev, area * (size_t)(boot.size + 1), (size_t)2 * boot.size, &o, &px));
  uint64_t *win;
  sl_proxy_window(px, (void **)&win, NULL);
  int nremote = 0;
  for (int r = 0; r < boot.size; r++)
    nremote += sl_proxy_is_remote(px, r);
  if (nremote == 0) {
    sl_proxy_destroy(px);
    skip();
  }
  uint64_t *send = win; /* value k at send[k] */
  for (uint64_t k = 0; k < BP_POSTS; k++)
    send[k] = ((uint64_t)boot.rank << 32) | (k * 2654435761u);
  barrier();
  /* Even k on the host ring, odd k on the device ring (the CPU-backend producer of the
   * ring kernels use): each ring's flag ends at its last epoch. */
  for (uint64_t k = 0; k < BP_POSTS; k++)
    for (int dst = 0; dst < boot.size; dst++) {
      if (!sl_proxy_is_remote(px, dst)) continue;
      size_t remote = area * (size_t)(1 + boot.rank) + k * 8;
      if (k % 2 == 0) {
        SL_ASSERT_OK(sl_proxy_post_put(px, dst, remote, k * 8, 8, (uint32_t)boot.rank, k + 1));
      } else {
        sl_ring_desc_t d = {.remote_offset = remote,
                            .local_offset = k * 8,
                            .bytes = 8,
                            .epoch = k + 1,
                            .dst_rank = dst,
                            .flag_index = (uint32_t)(boot.size + boot.rank),
                            .op = SL_RING_OP_PUT};
        SL_ASSERT_OK(sl_proxy_post_device_ring(px, &d));
      }
    }
  size_t bad = 0;
  for (int src = 0; src < boot.size; src++) {
    if (!sl_proxy_is_remote(px, src)) continue;
    SL_ASSERT_OK(sl_proxy_wait_flag(px, src, (uint32_t)src, BP_POSTS - 1));
    SL_ASSERT_OK(sl_proxy_wait_flag(px, src, (uint32_t)(boot.size + src), BP_POSTS));
    const uint64_t *recv = win + (area / 8) * (size_t)(1 + src);
    for (uint64_t k = 0; k < BP_POSTS; k++)
      bad += recv[k] != (((uint64_t)src << 32) | (k * 2654435761u));
  }
  assert_int_equal(bad, 0);
  SL_ASSERT_OK(sl_proxy_quiesce(px));
  sl_proxy_stats_t st;
  sl_proxy_stats(px, &st);
  assert_int_equal(st.puts, (uint64_t)BP_POSTS * (uint64_t)nremote);
  if (boot.rank == 0)
    printf("back-pressure: %llu posts through %d-slot rings, %llu found their ring full, %llu flush rounds\n",
           (unsigned long long)st.puts, BP_SLOTS, (unsigned long long)st.ring_full_waits,
           (unsigned long long)st.batches);
  SL_ASSERT_OK(sl_proxy_destroy(px));
}

/* ---- a ring that stays full times out cleanly ---------------------------------------- */

static void test_ring_full_times_out(void **state) {
  sl_proxy_options_t o = options();
  o.ring_slots = 4;
  /* The full ring's wait is 2 x this; so is the quiesce after resuming, which must not expire: 300 ms did under
   * ASan with 4 ranks on CI's 2 cores (session 35). */
  o.timeout_ms = 1000;
  sl_proxy_t *px;
  SL_ASSERT_OK(sl_proxy_create(&boot, dev, 4096, 4, &o, &px));
  int dst = -1;
  for (int r = 0; r < boot.size && dst < 0; r++)
    if (sl_proxy_is_remote(px, r)) dst = r;
  if (dst >= 0 && boot.rank == 0) {
    sl_proxy_set_paused(px, true);
    for (int k = 0; k < 4; k++)
      SL_ASSERT_OK(sl_proxy_post_put(px, dst, 64, 0, 8, 0, (uint64_t)k + 1));
    assert_int_equal(sl_proxy_post_put(px, dst, 64, 0, 8, 0, 5), SL_ERR_TIMEOUT);
    assert_non_null(strstr(sl_last_error(), "host ring"));
    assert_non_null(strstr(sl_last_error(), "stayed full"));
    sl_proxy_stats_t st;
    sl_proxy_stats(px, &st);
    assert_int_equal(st.puts, 0);
    /* Nothing was lost or corrupted: resumed, the 4 accepted puts complete. */
    sl_proxy_set_paused(px, false);
    SL_ASSERT_OK(sl_proxy_quiesce(px));
    sl_proxy_stats(px, &st);
    assert_int_equal(st.puts, 4);
  }
  /* Bad arguments fail at the call, naming what was wrong. */
  if (dst >= 0) {
    assert_int_equal(sl_proxy_post_put(px, dst, 4096 - 4, 0, 8, 0, 1), SL_ERR_RANGE);
    assert_int_equal(sl_proxy_post_put(px, dst, 0, 0, 8, 4, 1), SL_ERR_RANGE);
  }
  assert_int_equal(sl_proxy_post_put(px, boot.rank, 0, 0, 8, 0, 1), SL_ERR_RANGE);
  assert_non_null(strstr(sl_last_error(), "not a remote peer"));
  SL_ASSERT_OK(sl_proxy_destroy(px));
}

/* ---- a peer that stalls mid-transfer is named ---------------------------------------- */

static void test_stalled_peer_named(void **state) {
  sl_proxy_options_t o = options();
  /* Long enough for healthy rounds on a loaded CI machine, short enough for a quick test. */
  enum { STALL_TIMEOUT_MS = 1000 };
  o.timeout_ms = STALL_TIMEOUT_MS;
  sl_proxy_t *px;
  /* Flag src: data from source rank src; flag size: nobody waits on it. */
  SL_ASSERT_OK(sl_proxy_create(&boot, dev, 4096 * (size_t)(boot.size + 1), (size_t)boot.size + 1, &o, &px));
  /* The last rank stalls: it is on the last node, remote to rank 0 in every layout. */
  const int stall = boot.size - 1;
  unsigned char *win;
  sl_proxy_window(px, (void **)&win, NULL);
  memset(win, 0x5A, 4096);
  /* Round 1 completes; in round 2 the stalled rank puts its data but withholds its flag
   * for 2.5 timeouts, so its remote peers fail with SL_ERR_TIMEOUT naming it, while
   * everyone else's round completes. */
  for (uint64_t epoch = 1; epoch <= 2; epoch++) {
    const bool stalling = boot.rank == stall && epoch == 2;
    for (int dst = 0; dst < boot.size; dst++)
      if (sl_proxy_is_remote(px, dst))
        SL_ASSERT_OK(sl_proxy_post_put(px, dst, 4096 * (size_t)(1 + boot.rank), 0, 4096,
                                       stalling ? (uint32_t)boot.size : (uint32_t)boot.rank, epoch));
    if (stalling) usleep(5 * STALL_TIMEOUT_MS / 2 * 1000);
    for (int src = 0; src < boot.size; src++) {
      if (!sl_proxy_is_remote(px, src)) continue;
      sl_status_t s = sl_proxy_wait_flag(px, src, (uint32_t)src, epoch);
      if (src != stall || epoch == 1) {
        SL_ASSERT_OK(s);
        continue;
      }
      assert_int_equal(s, SL_ERR_TIMEOUT);
      char want[128];
      snprintf(want, sizeof want, "rank %d (node %d, host %s)", stall, node_of[stall], boot.hostname);
      if (!strstr(sl_last_error(), want)) fail_msg("timeout message lacks '%s': %s", want, sl_last_error());
    }
    SL_ASSERT_OK(sl_proxy_quiesce(px));
    barrier();
  }
  SL_ASSERT_OK(sl_proxy_destroy(px));
}

int main(int argc, char **argv) {
  default_ucx_env();
  if (sl_boot_init(&argc, &argv, sl_config()->ranks_per_node, &boot) != SL_OK) {
    fprintf(stderr, "boot failed: %s\n", sl_last_error());
    return 1;
  }
  if (sl_device_open(SL_DEVICE_CPU, boot.local_rank, &dev) != SL_OK) return 1;
  node_of = calloc((size_t)boot.size, sizeof(int));
  MPI_Allgather(&boot.node, 1, MPI_INT, node_of, 1, MPI_INT, boot.world);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_puts_all_sizes),
      cmocka_unit_test(test_backpressure_no_loss),
      cmocka_unit_test(test_ring_full_times_out),
      cmocka_unit_test(test_stalled_peer_named),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  free(node_of);
  sl_device_close(dev);
  if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
  sl_boot_finalize(&boot);
  return 0;
}
