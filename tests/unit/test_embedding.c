/* Unit tests of the embedding lookup CPU reference: exact row gathers, out-of-range ids
 * reported as SL_ERR_RANGE naming the id and position, zeros written for them. */
#include "kernels/embedding.h"
#include "sl_test_kernels.h"

static void test_gathers_rows_exactly(void **state) {
  uint64_t rng = sl_test_seed();
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  static const int hiddens[] = {520, 2048};
  static const int tokens[] = {1, 37};
  const int vocab = 1000;
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 2; h++)
      for (int t = 0; t < 2; t++) {
        sl_dtype_t dt = sl_test_float_dtypes[d];
        size_t row = sl_dtype_bytes(dt, (size_t)hiddens[h]);
        void *table = sl_test_alloc(row * vocab), *out = sl_test_alloc(row * (size_t)tokens[t]);
        int32_t *ids = sl_test_alloc(sizeof(int32_t) * (size_t)tokens[t]);
        unsigned long long *err = sl_test_alloc(sizeof *err);
        sl_test_fill(&rng, table, dt, (size_t)hiddens[h] * vocab, 1.0f, 1);
        for (int i = 0; i < tokens[t]; i++)
          ids[i] = (int32_t)(sl_test_rand_u64(&rng) % vocab);
        if (tokens[t] > 2) ids[2] = vocab - 1; /* last row */
        memset(out, 0xff, row * (size_t)tokens[t]);
        SL_ASSERT_OK(sl_embedding_error_reset(dev, err, NULL));
        sl_embedding_args_t a = {.ids = ids,
                                 .table = table,
                                 .out = out,
                                 .error = err,
                                 .tokens = tokens[t],
                                 .vocab = vocab,
                                 .hidden = hiddens[h],
                                 .dtype = dt};
        SL_ASSERT_OK(sl_embedding(dev, &a, NULL));
        SL_ASSERT_OK(sl_embedding_check(dev, err, vocab, NULL));
        for (int i = 0; i < tokens[t]; i++)
          if (memcmp((char *)out + (size_t)i * row, (char *)table + (size_t)ids[i] * row, row) != 0)
            fail_msg("embedding %s hidden %d: row %d (id %d) differs", sl_dtype_name(dt), hiddens[h], i, ids[i]);
        free(table);
        free(out);
        free(ids);
        free(err);
      }
  sl_device_close(dev);
}

static void test_out_of_range_id_is_reported(void **state) {
  uint64_t rng = sl_test_seed() ^ 77;
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  const int vocab = 50, hidden = 64, tokens = 12;
  size_t row = sl_dtype_bytes(SL_DTYPE_BF16, hidden);
  void *table = sl_test_alloc(row * vocab), *out = sl_test_alloc(row * tokens);
  int32_t *ids = sl_test_alloc(sizeof(int32_t) * tokens);
  unsigned long long *err = sl_test_alloc(sizeof *err);
  sl_test_fill(&rng, table, SL_DTYPE_BF16, (size_t)hidden * vocab, 1.0f, 1);
  for (int i = 0; i < tokens; i++)
    ids[i] = i;
  ids[9] = -1;        /* a later bad id */
  ids[5] = vocab + 3; /* the first bad position: this one is reported */
  memset(out, 0xff, row * tokens);
  SL_ASSERT_OK(sl_embedding_error_reset(dev, err, NULL));
  sl_embedding_args_t a = {.ids = ids,
                           .table = table,
                           .out = out,
                           .error = err,
                           .tokens = tokens,
                           .vocab = vocab,
                           .hidden = hidden,
                           .dtype = SL_DTYPE_BF16};
  assert_int_equal(sl_embedding(dev, &a, NULL), SL_ERR_RANGE);
  assert_non_null(strstr(sl_last_error(), "token id 53 at position 5"));
  /* The device-side record says the same, through the check every backend uses. */
  assert_int_equal(sl_embedding_error_position(*err), 5);
  assert_int_equal(sl_embedding_error_id(*err), 53);
  sl_clear_error();
  assert_int_equal(sl_embedding_check(dev, err, vocab, NULL), SL_ERR_RANGE);
  assert_non_null(strstr(sl_last_error(), "token id 53 at position 5"));
  assert_non_null(strstr(sl_last_error(), "[0, 50)"));
  /* Bad rows are zeros; good rows are the table's. */
  for (int i = 0; i < tokens; i++) {
    const unsigned char *o = (const unsigned char *)out + (size_t)i * row;
    if (i == 5 || i == 9) {
      for (size_t b = 0; b < row; b++)
        assert_int_equal(o[b], 0);
    } else {
      assert_memory_equal(o, (const char *)table + (size_t)ids[i] * row, row);
    }
  }
  /* A negative id alone is reported with its sign. */
  SL_ASSERT_OK(sl_embedding_error_reset(dev, err, NULL));
  ids[5] = 1;
  assert_int_equal(sl_embedding(dev, &a, NULL), SL_ERR_RANGE);
  assert_int_equal(sl_embedding_check(dev, err, vocab, NULL), SL_ERR_RANGE);
  assert_non_null(strstr(sl_last_error(), "token id -1 at position 9"));
  free(table);
  free(out);
  free(ids);
  free(err);
  sl_device_close(dev);
}

static void test_rejects_bad_arguments(void **state) {
  sl_embedding_args_t a = {.tokens = 1, .vocab = 10, .hidden = 100, .dtype = SL_DTYPE_BF16};
  assert_int_equal(sl_embedding_validate(&a), SL_ERR_INVALID); /* hidden not a multiple of 8 */
  a.hidden = 128;
  assert_int_equal(sl_embedding_validate(&a), SL_ERR_INVALID); /* NULL pointers */
  a.tokens = 0;
  SL_ASSERT_OK(sl_embedding_validate(&a));
  a.dtype = SL_DTYPE_I32;
  assert_int_equal(sl_embedding_validate(&a), SL_ERR_INVALID);
}

/* Small T cuts rows into 1 KB tasks (2 packets per lane) spread over every SM; large T copies a
 * row with up to 16 packets per lane, the table's warps. */
static void test_configuration_choice(void **state) {
  sl_embedding_args_t a = {.tokens = 128, .vocab = 10, .hidden = 7168, .dtype = SL_DTYPE_BF16};
  sl_embedding_point_t pt;
  SL_ASSERT_OK(sl_embedding_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.lane_packets, 2); /* 14 tasks per row, 1792 in all */
  assert_int_equal(pt.warps, 8);        /* 224 blocks */
  a.tokens = 1;
  SL_ASSERT_OK(sl_embedding_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.lane_packets, 2);
  assert_int_equal(pt.warps, 1); /* 14 warps, 14 blocks */
  a.tokens = 8192;
  SL_ASSERT_OK(sl_embedding_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.lane_packets, 16); /* 28 packets per lane: two tasks per row */
  assert_int_equal(pt.warps, 8);
  a.hidden = 2048; /* 8 packets per lane: one task per row */
  SL_ASSERT_OK(sl_embedding_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.lane_packets, 8);
  a.warps = 4; /* explicit warps (--tune) keep the size's packets */
  SL_ASSERT_OK(sl_embedding_choose(&a, SL_ARCH_HOPPER, 132, &pt));
  assert_int_equal(pt.warps, 4);
  assert_int_equal(pt.lane_packets, 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_configuration_choice),
      cmocka_unit_test(test_gathers_rows_exactly),
      cmocka_unit_test(test_out_of_range_id_is_reported),
      cmocka_unit_test(test_rejects_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
