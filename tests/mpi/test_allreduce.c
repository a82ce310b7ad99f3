/* All-reduce on the CPU backend under mpirun: every size class (tiny, one-shot range,
 * two-shot range, sizes not a multiple of the vector width, messages split into pieces),
 * every dtype, every algorithm, in place and out of place, bit-exact against the
 * single-rank reference and bit-identical on every rank (hashes compared over MPI); the
 * fused all-reduce + residual + RMSNorm likewise. With simulated nodes the communicator is
 * the node: the reference sums the node's ranks only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "comm/allreduce.h"
#include "kernels/rmsnorm.h"
#include "sl_test.h"

static sl_runtime_t rt;
static sl_comm_t *comm;
static uint64_t seed;
static int node_world[SL_AR_MAX_RANKS]; /* world rank of each node-comm rank */
enum { MAX_BYTES = 256 << 10 };         /* small, so large messages go in pieces */

/* Rank `world_rank`'s input for case `tag`: the same on every rank that computes it. */
static void make_input(void *buf, size_t count, sl_dtype_t t, int world_rank, uint64_t tag) {
  uint64_t st = seed ^ (tag * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(world_rank + 1) << 40);
  for (size_t i = 0; i < count; i++)
    sl_store_f32(buf, t, i, sl_test_rand_uniform(&st, -4.0f, 4.0f));
}

/* Check the result against the reference, bit for bit, and across ranks by hash. */
static void check_result(const char *what, const void *got, const void *want, size_t bytes) {
  size_t first = bytes;
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char *)got)[i] != ((const unsigned char *)want)[i]) {
      first = i;
      break;
    }
  if (first < bytes) fail_msg("%s: differs from the reference at byte %zu of %zu", what, first, bytes);
  unsigned long long h = XXH64(got, bytes, 0), hmin = 0, hmax = 0;
  MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, rt.boot.node_comm);
  MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, rt.boot.node_comm);
  if (hmin != hmax) fail_msg("%s: ranks of the node got different results", what);
}

static void run_case(size_t count, sl_dtype_t t, int algo, bool in_place, uint64_t tag) {
  int n = sl_comm_size(comm);
  size_t bytes = sl_dtype_bytes(t, count);
  void *inputs[SL_AR_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    inputs[r] = malloc(bytes);
    make_input(inputs[r], count, t, node_world[r], tag);
  }
  void *want = malloc(bytes), *in = malloc(bytes), *out = malloc(bytes);
  sl_allreduce_ref((const void *const *)inputs, n, want, count, t);
  memcpy(in, inputs[sl_comm_rank(comm)], bytes);
  memset(out, 0xFF, bytes); /* poison */
  sl_comm_set_algo(comm, algo);
  char what[160];
  snprintf(what, sizeof what, "allreduce %zu x %s, %s%s", count, sl_dtype_name(t), sl_allreduce_algo_name(algo),
           in_place ? ", in place" : "");
  SL_ASSERT_OK(sl_allreduce(comm, in, in_place ? in : out, count, t, NULL));
  SL_ASSERT_OK(sl_comm_check(comm));
  check_result(what, in_place ? in : out, want, bytes);
  if (!in_place) assert_memory_equal(in, inputs[sl_comm_rank(comm)], bytes); /* input untouched */
  for (int r = 0; r < n; r++)
    free(inputs[r]);
  free(want);
  free(in);
  free(out);
}

static void test_sizes_dtypes_algos(void **state) {
  /* tiny; odd (not a multiple of 4 or 8 elements); one-shot range; two-shot range;
   * above max_bytes (pieces) with an odd tail */
  const size_t counts[] = {1, 3, 13, 1000, 4099, 40000, 150001};
  const sl_dtype_t dtypes[] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};
  /* ONESHOT_LL is a GPU kernel; the CPU backend runs it as ONESHOT */
  const int algos[] = {SL_AR_AUTO, SL_AR_ONESHOT, SL_AR_TWOSHOT, SL_AR_ONESHOT_LL};
  uint64_t tag = 1;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int d = 0; d < 3; d++)
      for (int a = 0; a < 4; a++)
        for (int ip = 0; ip < 2; ip++)
          run_case(counts[c], dtypes[d], algos[a], ip, tag++);
  sl_comm_set_algo(comm, SL_AR_AUTO);
}

/* AUTO picks one-shot for small and two-shot for large messages (no NCCL on CPU). */
static void test_auto_choice(void **state) {
  assert_int_equal(sl_comm_choose_algo(comm, 64), SL_AR_ONESHOT);
  assert_int_equal(sl_comm_choose_algo(comm, 64u << 20), SL_AR_TWOSHOT);
  assert_false(sl_comm_has_nccl(comm));
}

/* Many back-to-back calls exercise both epoch parities and the flag reuse rule. */
static void test_many_calls(void **state) {
  float x[37], want[37];
  for (int it = 0; it < 200; it++) {
    for (int i = 0; i < 37; i++)
      x[i] = (float)(sl_comm_rank(comm) + 1) * (float)(i + it);
    float total = 0.0f;
    for (int r = 0; r < sl_comm_size(comm); r++)
      total += (float)(r + 1);
    for (int i = 0; i < 37; i++)
      want[i] = total * (float)(i + it);
    SL_ASSERT_OK(sl_allreduce(comm, x, x, 37, SL_DTYPE_F32, NULL));
    assert_memory_equal(x, want, sizeof x);
  }
}

static void test_fused_residual_rmsnorm(void **state) {
  const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  const int shapes[][2] = {{1, 256}, {5, 256}, {3, 1000}};
  int n = sl_comm_size(comm);
  uint64_t tag = 1000;
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 3; s++) {
      sl_dtype_t t = dtypes[d];
      int rows = shapes[s][0], hidden = shapes[s][1];
      size_t count = (size_t)rows * hidden, bytes = sl_dtype_bytes(t, count);
      void *inputs[SL_AR_MAX_RANKS];
      for (int r = 0; r < n; r++) {
        inputs[r] = malloc(bytes);
        make_input(inputs[r], count, t, node_world[r], tag);
      }
      void *res = malloc(bytes), *res_ref = malloc(bytes), *w = malloc(sl_dtype_bytes(t, hidden));
      void *out = malloc(bytes), *out_ref = malloc(bytes);
      make_input(res, count, t, 999, tag + 1); /* the same residual on every rank */
      memcpy(res_ref, res, bytes);
      make_input(w, hidden, t, 998, tag + 2);
      memset(out, 0xFF, bytes);
      sl_ar_rmsnorm_args_t a = {.x = inputs[sl_comm_rank(comm)],
                                .residual = res,
                                .weight = w,
                                .out = out,
                                .rows = rows,
                                .hidden = hidden,
                                .dtype = t,
                                .eps = 1e-6f,
                                .weight_bias = s == 2 ? 1.0f : 0.0f};
      sl_ar_rmsnorm_args_t ra = a;
      ra.residual = res_ref;
      ra.out = out_ref;
      sl_allreduce_residual_rmsnorm_ref((const void *const *)inputs, n, &ra);
      SL_ASSERT_OK(sl_allreduce_residual_rmsnorm(comm, &a, NULL));
      char what[96];
      snprintf(what, sizeof what, "fused %dx%d %s residual", rows, hidden, sl_dtype_name(t));
      check_result(what, res, res_ref, bytes);
      snprintf(what, sizeof what, "fused %dx%d %s out", rows, hidden, sl_dtype_name(t));
      check_result(what, out, out_ref, bytes);
      /* The reference's norm agrees with the kernel library's RMSNorm (kernels/rmsnorm.h)
       * applied to the updated residual, within the order of the sum of squares. */
      if (hidden % 8 == 0) {
        void *y = malloc(bytes);
        sl_rmsnorm_args_t rn = {.x = res_ref,
                                .y = y,
                                .weight = w,
                                .rows = rows,
                                .hidden = hidden,
                                .in_dtype = t,
                                .out_dtype = t,
                                .w_dtype = t,
                                .res_dtype = t,
                                .eps = 1e-6f,
                                .weight_bias = a.weight_bias};
        SL_ASSERT_OK(sl_rmsnorm_cpu(&rn));
        float *gy = malloc(count * 4), *go = malloc(count * 4);
        for (size_t i = 0; i < count; i++)
          gy[i] = sl_load_f32(y, t, i), go[i] = sl_load_f32(out_ref, t, i);
        float rtol = t == SL_DTYPE_BF16 ? 1.0f / 128.0f : t == SL_DTYPE_F16 ? 1.0f / 1024.0f : 1e-5f;
        assert_int_equal(sl_test_compare_f32("fused reference vs sl_rmsnorm_cpu", go, gy, count, 1e-6f, rtol), 0);
        free(y), free(gy), free(go);
      }
      for (int r = 0; r < n; r++)
        free(inputs[r]);
      free(res), free(res_ref), free(w), free(out), free(out_ref);
      tag += 3;
    }
  /* a message larger than the communicator's max is refused with a clear error */
  sl_ar_rmsnorm_args_t big = {.x = NULL, .rows = 1000, .hidden = 1024, .dtype = SL_DTYPE_F32};
  assert_int_equal(sl_allreduce_residual_rmsnorm(comm, &big, NULL), SL_ERR_CAPACITY);
}

static void test_bad_arguments(void **state) {
  float x[4] = {0};
  assert_int_equal(sl_allreduce(comm, x, x, 4, SL_DTYPE_I32, NULL), SL_ERR_INVALID);
  assert_int_equal(sl_allreduce(comm, NULL, x, 4, SL_DTYPE_F32, NULL), SL_ERR_INVALID);
  SL_ASSERT_OK(sl_allreduce(comm, x, x, 0, SL_DTYPE_F32, NULL)); /* nothing to do, no exchange */
}

int main(int argc, char **argv) {
  setenv("SL_DEVICE", "cpu", 1);
  if (sl_runtime_init(&argc, &argv, &rt) != SL_OK) {
    fprintf(stderr, "runtime init failed: %s\n", sl_last_error());
    return 1;
  }
  seed = sl_test_seed();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, rt.boot.world);
  MPI_Allgather(&rt.boot.rank, 1, MPI_INT, node_world, 1, MPI_INT, rt.boot.node_comm);
  if (sl_comm_create(&rt.boot, rt.dev, &rt.config, MAX_BYTES, &comm) != SL_OK) {
    fprintf(stderr, "comm create failed: %s\n", sl_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_dtypes_algos), cmocka_unit_test(test_auto_choice),
      cmocka_unit_test(test_many_calls),         cmocka_unit_test(test_fused_residual_rmsnorm),
      cmocka_unit_test(test_bad_arguments),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  sl_comm_destroy(comm);
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, rt.boot.world);
  sl_runtime_finalize(&rt);
  return any ? 1 : 0;
}
