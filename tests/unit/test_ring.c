/* Unit tests of the proxy's descriptor ring (comm/ring.h): layout, reserve/publish/consume,
 * wrap-around, a full ring refusing reservations, and several producer threads against one
 * consumer without loss or duplication. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/ring.h"
#include "sl_test.h"

static sl_ring_header_t *ring_new(uint32_t capacity) {
  sl_ring_header_t *r = aligned_alloc(64, sl_ring_bytes(capacity));
  assert_non_null(r);
  memset(r, 0, sl_ring_bytes(capacity));
  r->capacity = capacity;
  return r;
}

static void test_layout(void **state) {
  /* The GPU side (comm/ring.cuh) relies on these offsets; ring.h asserts the sizes too. */
  assert_int_equal(sizeof(sl_ring_desc_t), 64);
  assert_int_equal(offsetof(sl_ring_desc_t, seq), 0);
  assert_int_equal(offsetof(sl_ring_desc_t, epoch), 32);
  assert_int_equal(offsetof(sl_ring_desc_t, dst_rank), 40);
  assert_int_equal(offsetof(sl_ring_header_t, tail), 0);
  assert_int_equal(offsetof(sl_ring_header_t, done), 64);
  assert_int_equal(offsetof(sl_ring_header_t, error), 128);
  assert_int_equal(offsetof(sl_ring_header_t, capacity), 192);
  assert_int_equal(sl_ring_bytes(8), 256 + 8 * 64);
}

static void test_full_ring_and_wrap(void **state) {
  sl_ring_header_t *r = ring_new(4);
  uint64_t head = 0, index = 0;
  uint64_t consumed = 0;
  for (int round = 0; round < 5; round++) {
    for (uint64_t k = 0; k < 4; k++) {
      assert_true(sl_ring_try_reserve(r, &head, &index));
      assert_int_equal(index, consumed + k);
      sl_ring_desc_t d = {.epoch = index * 10, .dst_rank = (int32_t)k, .bytes = index, .op = SL_RING_OP_PUT};
      sl_ring_publish(r, index, &d);
    }
    /* Full: a fifth reservation is refused and leaves head unchanged (no hole). */
    assert_false(sl_ring_try_reserve(r, &head, &index));
    assert_int_equal(head, consumed + 4);
    for (uint64_t k = 0; k < 4; k++) {
      assert_true(sl_ring_is_published(r, consumed));
      sl_ring_desc_t *s = sl_ring_slot(r, consumed);
      assert_int_equal(s->epoch, consumed * 10);
      assert_int_equal(s->bytes, consumed);
      consumed++;
    }
    /* The next number is not published until a producer writes it (stale seq from the
     * previous lap differs). */
    assert_false(sl_ring_is_published(r, consumed));
    sl_ring_store_release(&r->tail, consumed);
  }
  free(r);
}

enum { PRODUCERS = 4, PER_PRODUCER = 20000, CAP = 16 };

typedef struct {
  sl_ring_header_t *ring;
  uint64_t *head;
  int id;
} producer_t;

static void *producer(void *arg) {
  producer_t *p = arg;
  for (uint64_t k = 0; k < PER_PRODUCER; k++) {
    uint64_t index = 0;
    while (!sl_ring_try_reserve(p->ring, p->head, &index)) {
    }
    sl_ring_desc_t d = {.dst_rank = p->id, .epoch = k, .remote_offset = k * 3 + (uint64_t)p->id, .op = SL_RING_OP_PUT};
    sl_ring_publish(p->ring, index, &d);
  }
  return NULL;
}

static void test_many_producers_one_consumer(void **state) {
  sl_ring_header_t *r = ring_new(CAP);
  uint64_t head = 0;
  pthread_t th[PRODUCERS];
  producer_t args[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++) {
    args[i] = (producer_t){r, &head, i};
    assert_int_equal(pthread_create(&th[i], NULL, producer, &args[i]), 0);
  }
  /* Each producer's descriptors must come out exactly once and in its own order. */
  uint64_t next[PRODUCERS] = {0};
  size_t bad = 0;
  for (uint64_t i = 0; i < (uint64_t)PRODUCERS * PER_PRODUCER; i++) {
    while (!sl_ring_is_published(r, i)) {
    }
    sl_ring_desc_t d = *sl_ring_slot(r, i);
    sl_ring_store_release(&r->tail, i + 1);
    if (d.dst_rank < 0 || d.dst_rank >= PRODUCERS) {
      bad++;
      continue;
    }
    bad += d.epoch != next[d.dst_rank] || d.remote_offset != d.epoch * 3 + (uint64_t)d.dst_rank;
    next[d.dst_rank] = d.epoch + 1;
  }
  for (int i = 0; i < PRODUCERS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(next[i], PER_PRODUCER);
  }
  assert_int_equal(bad, 0);
  assert_int_equal(head, (uint64_t)PRODUCERS * PER_PRODUCER);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_full_ring_and_wrap),
      cmocka_unit_test(test_many_producers_one_consumer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
