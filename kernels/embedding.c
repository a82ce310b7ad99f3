/* Embedding host side: configuration choice, JIT spec, launch, error check, CPU reference. */
#include "kernels/embedding.h"

#include <string.h>

/* ---- configuration choice ------------------------------------------------------------
 * One warp per token row (a row of 2048..7168 bf16 is 4-14 KB: 8-28 packets per lane), so
 * a warp's loads are all in flight before its stores. Decode (tokens < SMs): one warp per
 * block, spread over the SMs. Prefill: 8 warps per block (256 threads), a reasoned default
 * NOT MEASURED YET (written without a GPU); `sluice bench kernels --tune` prints the best. */
static const struct { int arch, warps; } prefill_warps[] = {{SL_ARCH_HOPPER, 8}, {SL_ARCH_BLACKWELL, 8}};

static int table_warps(int arch) {
  return arch >= SL_ARCH_BLACKWELL ? prefill_warps[1].warps : prefill_warps[0].warps;
}

/* Everything but the pointers (what the configuration choice depends on). */
static sl_status_t validate_shape(const sl_embedding_args_t *a) {
  if (!a) return SL_ERR(SL_ERR_INVALID, "embedding: NULL arguments");
  if (a->hidden <= 0 || a->hidden % 8 != 0 || a->hidden > (1 << 20))
    return SL_ERR(SL_ERR_INVALID, "embedding: hidden %d must be a positive multiple of 8", a->hidden);
  if (a->tokens < 0 || a->vocab <= 0)
    return SL_ERR(SL_ERR_INVALID, "embedding: tokens %d, vocab %d", a->tokens, a->vocab);
  if (a->dtype != SL_DTYPE_F32 && a->dtype != SL_DTYPE_BF16 && a->dtype != SL_DTYPE_F16)
    return SL_ERR(SL_ERR_INVALID, "embedding: dtype %s must be f32, bf16 or f16", sl_dtype_name(a->dtype));
  if (a->warps < 0 || a->warps > 32) return SL_ERR(SL_ERR_INVALID, "embedding: warps %d not in [0, 32]", a->warps);
  return SL_OK;
}

sl_status_t sl_embedding_validate(const sl_embedding_args_t *a) {
  SL_CHECK(validate_shape(a));
  if (a->tokens > 0 && (!a->ids || !a->table || !a->out || !a->error))
    return SL_ERR(SL_ERR_INVALID, "embedding: ids, table, out and error must not be NULL");
  if (((uintptr_t)a->table | (uintptr_t)a->out) % 16 != 0 || (uintptr_t)a->error % 8 != 0)
    return SL_ERR(SL_ERR_INVALID, "embedding: table and out must be 16-byte aligned, error 8-byte aligned");
  return SL_OK;
}

/* 16-byte packets of a row, and per lane when one warp copies the row. */
static int row_packets(const sl_embedding_args_t *a) {
  return (int)(sl_dtype_bytes(a->dtype, (size_t)a->hidden) / 16);
}
static long tasks_of(const sl_embedding_args_t *a, int lane_packets) {
  long per_task = 32L * lane_packets;
  return (long)a->tokens * ((row_packets(a) + per_task - 1) / per_task);
}
static int pow2_floor(long n) {
  int p = 1;
  while ((long)p * 2 <= n && p < 32) p *= 2;
  return p;
}

/* Small T (the whole copy fits one wave of <= 32 warps per SM at 2 packets per lane): rows are
 * cut into 1 KB tasks (2 packets per lane) so the copy spreads over all SMs and every load is in
 * flight at once -- T = 128 at hidden 7168 was 128 warps each doing two dependent rounds of 16
 * loads and stores (4.0 us in a graph). Warps per block: the largest power of two <= tasks /
 * SMs, at most the table's, so the grid still covers every SM. Large T: one warp per row with
 * up to 16 packets per lane in flight, the table's warps (1 below one row per SM). */
sl_status_t sl_embedding_choose(const sl_embedding_args_t *a, int arch, int sm_count, sl_embedding_point_t *pt) {
  SL_CHECK(validate_shape(a));
  memset(pt, 0, sizeof *pt);
  pt->hidden = a->hidden;
  pt->dtype = a->dtype;
  const int per_lane = (row_packets(a) + 31) / 32;
  const long small_tasks = tasks_of(a, 2);
  const bool small = per_lane > 2 && small_tasks <= 32L * sm_count;
  pt->lane_packets = small ? 2 : per_lane < 16 ? per_lane : 16;
  if (a->warps) {
    pt->warps = a->warps;
  } else if (small) {
    int w = pow2_floor(small_tasks / sm_count), table = table_warps(arch);
    pt->warps = w < table ? w : table;
  } else {
    pt->warps = a->tokens < sm_count ? 1 : table_warps(arch);
  }
  return SL_OK;
}

sl_status_t sl_embedding_spec(sl_jit_spec_t *spec, const sl_embedding_point_t *pt) {
  sl_jit_spec_init(spec, "kernels/embedding.cu", "sl_embedding_fwd");
  SL_CHECK(sl_jit_spec_define(spec, "HIDDEN", "%d", pt->hidden));
  SL_CHECK(sl_jit_spec_define(spec, "DTYPE", "%d", (int)pt->dtype));
  SL_CHECK(sl_jit_spec_define(spec, "WARPS", "%d", pt->warps));
  SL_CHECK(sl_jit_spec_define(spec, "LANE_PACKETS", "%d", pt->lane_packets));
  if (pt->pdl) SL_CHECK(sl_jit_spec_define(spec, "PDL", "1"));
  return SL_OK;
}

/* CPU reference: the same protocol (zeros for a bad id, smallest bad position recorded),
 * and SL_ERR_RANGE returned at once since the CPU knows synchronously. */
sl_status_t sl_embedding_cpu(const sl_embedding_args_t *a) {
  SL_CHECK(sl_embedding_validate(a));
  size_t row = sl_dtype_bytes(a->dtype, (size_t)a->hidden);
  unsigned long long first = SL_EMBEDDING_NO_ERROR;
  for (int t = 0; t < a->tokens; t++) {
    int id = a->ids[t];
    char *dst = (char *)a->out + (size_t)t * row;
    if (id < 0 || id >= a->vocab) {
      memset(dst, 0, row);
      unsigned long long rec = sl_embedding_error_encode(t, id);
      if (rec < first) first = rec;
    } else {
      memcpy(dst, (const char *)a->table + (size_t)id * row, row);
    }
  }
  if (first != SL_EMBEDDING_NO_ERROR) {
    if (first < *a->error) *a->error = first;
    return SL_ERR(SL_ERR_RANGE, "embedding: token id %d at position %d is outside the vocabulary [0, %d)",
                  sl_embedding_error_id(first), sl_embedding_error_position(first), a->vocab);
  }
  return SL_OK;
}

sl_status_t sl_embedding_error_reset(sl_device_t *dev, unsigned long long *error, sl_stream_t *stream) {
  return sl_memset(dev, error, 0xff, sizeof *error, stream);
}

sl_status_t sl_embedding_check(sl_device_t *dev, const unsigned long long *error, int vocab, sl_stream_t *stream) {
  unsigned long long rec = SL_EMBEDDING_NO_ERROR;
  SL_CHECK(sl_memcpy(dev, &rec, error, sizeof rec, stream));
  SL_CHECK(sl_stream_sync(dev, stream));
  if (rec == SL_EMBEDDING_NO_ERROR) return SL_OK;
  return SL_ERR(SL_ERR_RANGE, "embedding: token id %d at position %d is outside the vocabulary [0, %d)",
                sl_embedding_error_id(rec), sl_embedding_error_position(rec), vocab);
}

sl_status_t sl_embedding(sl_device_t *dev, const sl_embedding_args_t *a, sl_stream_t *stream) {
  if (sl_device_backend(dev) == SL_BACKEND_CPU) return sl_embedding_cpu(a);
  const sl_device_info_t *info = sl_device_info(dev);
  sl_embedding_point_t pt;
  SL_CHECK(sl_embedding_validate(a));
  SL_CHECK(sl_embedding_choose(a, info->arch, info->sm_count, &pt));
  if (a->tokens == 0) return SL_OK;
  pt.pdl = a->pdl && info->arch >= SL_ARCH_HOPPER;
  sl_jit_spec_t spec;
  SL_CHECK(sl_embedding_spec(&spec, &pt));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  long grid = (tasks_of(a, pt.lane_packets) + pt.warps - 1) / pt.warps;
  { /* no larger than the device keeps resident: the loop strides */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, pt.warps * 32, 0, &resident));
    if (grid > resident) grid = resident;
  }
  sl_launch_t l = {.grid = {(unsigned)grid}, .block = {(unsigned)(pt.warps * 32)}, .stream = stream, .pdl = pt.pdl};
  const int32_t *ids = a->ids;
  const void *table = a->table;
  void *out = a->out;
  unsigned long long *err = a->error;
  int tokens = a->tokens, vocab = a->vocab;
  void *args[] = {&ids, &table, &out, &err, &tokens, &vocab};
  SL_CHECK(sl_kernel_launch(k, &l, args));
  return SL_OK;
}

/* JIT points: every dtype at the bench/model sizes, the packets per lane that sl_embedding_choose
 * gives at decode (T = 1), small prefill (T = 128) and large prefill (T = 8192), with its warps,
 * plus one warp per block at large prefill. */
sl_status_t sl_embedding_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  static const sl_dtype_t dts[] = {SL_DTYPE_F32, SL_DTYPE_BF16, SL_DTYPE_F16};
  static const int hiddens[] = {520, 2048, 4096, 7168};
  static const int tokens[] = {1, 16, 128, 1024, 8192};
  sl_jit_spec_t spec;
  sl_embedding_point_t pt;
  for (int d = 0; d < 3; d++)
    for (int h = 0; h < 4; h++)
      for (int t = 0; t < 5; t++)
        for (int one_warp = 0; one_warp < 2; one_warp++) {
          sl_embedding_args_t a = {
              .tokens = tokens[t], .vocab = 1, .hidden = hiddens[h], .dtype = dts[d], .warps = one_warp ? 1 : 0};
          SL_CHECK(sl_embedding_choose(&a, arch, 132, &pt));
          SL_CHECK(sl_embedding_spec(&spec, &pt));
          SL_CHECK(fn(&spec, user));
          pt.pdl = tokens[t] == 1 && !one_warp && arch >= SL_ARCH_HOPPER; /* decode as a programmatic dependent */
          if (!pt.pdl) continue;
          SL_CHECK(sl_embedding_spec(&spec, &pt));
          SL_CHECK(fn(&spec, user));
        }
  return SL_OK;
}
