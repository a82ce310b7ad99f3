/* Unit tests of comm/flags.h (release/acquire, bounded waits, timeout records) and of the
 * all-reduce layout math (flag slots, partitions) in comm/allreduce_layout.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce_layout.h"
#include "comm/flags.h"
#include "sl_test.h"

/* ---- publish data with a release store, read it after an acquire wait -------------------- */
enum { ROUNDS = 2000, WORDS = 64 };
typedef struct {
  sl_flag_t to_reader, to_writer; /* writer -> reader "data ready", reader -> writer "consumed" */
  unsigned long long data[WORDS];
  int errors;
} pingpong_t;

static void *writer(void *arg) {
  pingpong_t *p = arg;
  for (unsigned long long e = 1; e <= ROUNDS; e++) {
    for (int i = 0; i < WORDS; i++)
      p->data[i] = e * 1000003ull + (unsigned long long)i;
    sl_flag_store_release(&p->to_reader, e);
    if (!sl_flag_wait_eq(&p->to_writer, e, 10000, NULL, NULL)) {
      p->errors++;
      return NULL;
    }
  }
  return NULL;
}

static void test_release_acquire_publishes_data(void **state) {
  pingpong_t *p = calloc(1, sizeof *p);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, writer, p), 0);
  int bad = 0;
  for (unsigned long long e = 1; e <= ROUNDS; e++) {
    unsigned long long seen = 0;
    if (!sl_flag_wait_eq(&p->to_reader, e, 10000, &seen, NULL))
      fail_msg("round %llu: reader timed out (saw %llu)", e, seen);
    for (int i = 0; i < WORDS; i++)
      bad += p->data[i] != e * 1000003ull + (unsigned long long)i;
    sl_flag_store_release(&p->to_writer, e);
  }
  pthread_join(t, NULL);
  assert_int_equal(p->errors, 0);
  assert_int_equal(bad, 0);
  free(p);
}

/* ---- a wait that nobody answers ends after the bound, reporting what it saw ------------- */
static void test_wait_is_bounded(void **state) {
  sl_flag_t f = 6; /* an older epoch */
  unsigned long long seen = 0, waited = 0;
  unsigned long long t0 = sl_flag_now_ns();
  assert_false(sl_flag_wait_eq(&f, 7, 50, &seen, &waited));
  double ms = (double)(sl_flag_now_ns() - t0) / 1e6;
  assert_int_equal(seen, 6);
  assert_true(ms >= 50.0);
  assert_true(ms < 1000.0);
  assert_true(waited >= 50000000ull);
  /* an epoch that is already there returns at once */
  f = 7;
  assert_true(sl_flag_wait_eq(&f, 7, 50, &seen, &waited));
  assert_int_equal(waited, 0);
  /* equality, not >=: a newer epoch is not the one expected */
  f = 8;
  assert_false(sl_flag_wait_eq(&f, 7, 5, &seen, NULL));
  assert_int_equal(seen, 8);
}

static void test_timeout_record_first_wins(void **state) {
  sl_flag_timeout_t rec;
  memset(&rec, 0, sizeof rec);
  sl_flag_timeout_record(&rec, 0, 3, 17, 5, 4, 123);
  sl_flag_timeout_record(&rec, 1, 2, 9, 6, 5, 456);
  assert_int_equal(rec.timed_out, 1);
  assert_int_equal(rec.waiter_rank, 0);
  assert_int_equal(rec.peer, 3);
  assert_int_equal(rec.flag_index, 17);
  assert_int_equal(rec.expected, 5);
  assert_int_equal(rec.observed, 4);
  assert_int_equal(rec.waited_ns, 123);
}

/* ---- layout: every slot distinct and in range; decode inverts encode ---------------------- */
static void test_flag_slots(void **state) {
  static unsigned char seen[SL_AR_NUM_FLAGS];
  memset(seen, 0, sizeof seen);
  for (unsigned long long e = 1; e <= 2; e++)
    for (int ph = 0; ph < SL_AR_PHASES; ph++)
      for (int b = 0; b < SL_AR_MAX_BLOCKS; b++)
        for (int src = 0; src < SL_AR_MAX_RANKS; src++) {
          unsigned idx = sl_ar_flag_index(e, ph, b, src);
          assert_true(idx < SL_AR_NUM_FLAGS);
          assert_int_equal(seen[idx], 0);
          seen[idx] = 1;
          int p2, b2, s2;
          sl_ar_flag_decode(idx, &p2, &b2, &s2);
          assert_int_equal(p2, ph);
          assert_int_equal(b2, b);
          assert_int_equal(s2, src);
        }
  /* epochs of equal parity share slots, the other parity does not */
  assert_int_equal(sl_ar_flag_index(3, 1, 5, 2), sl_ar_flag_index(5, 1, 5, 2));
  assert_int_not_equal(sl_ar_flag_index(3, 1, 5, 2), sl_ar_flag_index(4, 1, 5, 2));
  /* the two data regions do not overlap and fit the segment */
  unsigned long long mb = 1000;
  assert_true(sl_ar_data_offset(2, mb) + sl_ar_region_bytes(mb) <= sl_ar_data_offset(1, mb));
  assert_true(sl_ar_data_offset(1, mb) + sl_ar_region_bytes(mb) <= sl_ar_segment_bytes(mb));
  assert_int_equal(sl_ar_data_offset(2, mb) % 256, 0);
  assert_int_equal(sl_ar_data_offset(1, mb) % 256, 0);
  /* LL areas: one per (parity, src), each 2x the message it carries, disjoint, after the
   * data regions, 16-byte aligned, inside the segment; the capacity is capped */
  const unsigned long long mbs[] = {1000, 64ull << 10, 1ull << 20, 64ull << 20};
  for (int m = 0; m < 4; m++) {
    unsigned long long ll = sl_ar_ll_bytes(mbs[m]);
    assert_true(ll <= SL_AR_LL_MAX_BYTES && ll <= sl_ar_region_bytes(mbs[m]) && ll % 16 == 0);
    for (unsigned long long e = 1; e <= 2; e++)
      for (int src = 0; src < SL_AR_MAX_RANKS; src++) {
        unsigned long long o = sl_ar_ll_offset(e, src, mbs[m]);
        assert_int_equal(o % 16, 0);
        assert_true(o >= sl_ar_data_offset(1, mbs[m]) + sl_ar_region_bytes(mbs[m]));
        assert_true(o + 2 * ll <= sl_ar_segment_bytes(mbs[m]));
        if (src + 1 < SL_AR_MAX_RANKS) assert_true(o + 2 * ll <= sl_ar_ll_offset(e, src + 1, mbs[m]));
      }
    assert_true(sl_ar_ll_offset(2, SL_AR_MAX_RANKS - 1, mbs[m]) + 2 * ll <= sl_ar_ll_offset(1, 0, mbs[m]));
  }
}

static void test_partition_covers_once(void **state) {
  const unsigned long long ns[] = {0, 1, 7, 8, 9, 100, 4097, 123457};
  const unsigned long long vecs[] = {1, 4, 8};
  const int parts[] = {1, 2, 3, 4, 8, 132};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t v = 0; v < 3; v++)
      for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        unsigned long long next = 0;
        for (int i = 0; i < parts[p]; i++) {
          unsigned long long b, e;
          sl_ar_part(ns[a], vecs[v], parts[p], i, &b, &e);
          assert_true(b <= e);
          assert_true(e <= ns[a]);
          if (e > b) {
            assert_int_equal(b, next); /* contiguous, in order, no overlap */
            assert_int_equal(b % vecs[v], 0);
            next = e;
          }
        }
        assert_int_equal(next, ns[a]);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_release_acquire_publishes_data), cmocka_unit_test(test_wait_is_bounded),
      cmocka_unit_test(test_timeout_record_first_wins),      cmocka_unit_test(test_flag_slots),
      cmocka_unit_test(test_partition_covers_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
