/* All-reduce host side: communicator set-up, algorithm choice, the CPU backend (the same
 * protocol as the GPU kernels, over shm with C11 atomics), GPU launches, NCCL, references.
 * The protocol and its invariants are written once in comm/allreduce_layout.h. */
#include "comm/allreduce.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/nvls.h"
#include "comm/symm.h"
#include "runtime/sl_log.h"

#ifdef SLUICE_HAVE_CUDA
#include <nccl.h>
#endif

/* ---- configuration choice -----------------------------------------------------------------
 * One-shot moves (n-1) x bytes into every rank and needs one flag round; two-shot moves
 * 2 (n-1)/n x bytes but needs two. Latency wins below ~256 KiB (fewer rounds), bandwidth
 * above; with 8 ranks the one-shot traffic grows faster, so its limit halves. NCCL's ring
 * / NVLS-free tree wins for large messages on distinct GPUs; 16 MiB is where public
 * custom-all-reduce implementations hand over. These are starting points: `sluice bench
 * allreduce` prints the chosen algorithm next to the forced alternatives and NCCL. */
#define SL_AR_ONESHOT_MAX_BYTES (256u << 10)
#define SL_AR_NCCL_MIN_BYTES (16u << 20)
/* Threads per block: 512 threads x 16 B = 8 KiB per pass keeps enough loads in flight
 * per SM for NVLink reads; blocks are added per 32 KiB so small messages use few blocks
 * (each block costs one flag exchange) and large ones spread over the SMs. */
#define SL_AR_THREADS 512
#define SL_AR_BYTES_PER_BLOCK (32u << 10)
/* LL one-shot (GPU, up to ll_auto_max(), at most 256 KiB): no staging copy and no flag round;
 * each thread pushes one 16-byte chunk (two LL lines) to every peer and waits for theirs, so
 * the time is about one NVLink one-way trip plus the launch. 256 threads per block, one chunk
 * per thread (4 KiB of message per block: 16 blocks at 64 KiB, 64 at 256 KiB): many SMs
 * issue the stores and poll. Blocks never wait for each other, so the grid is free. */
#define SL_AR_LL_THREADS 256

struct sl_comm {
  sl_device_t *dev;
  sl_backend_t backend;
  sl_symm_t *symm;
  int rank, size;
  int world_ranks[SL_AR_MAX_RANKS];
  size_t max_bytes;
  int algo; /* forced algorithm, or SL_AR_AUTO */
  long timeout_ms;
  int sm_count;
  sl_flag_timeout_t *rec;     /* host view (host-mapped on CUDA, malloc'd on CPU) */
  sl_flag_timeout_t *rec_dev; /* device view of the same record */
  sl_ar_args_t base;          /* seg pointers, rank, size, timeout: filled once */
#ifdef SLUICE_HAVE_CUDA
  ncclComm_t nccl;
#endif
  bool has_nccl;
  sl_nvls_t *nvls;                /* only with SL_NVLS=1 */
  unsigned long long stall_epoch; /* sl_comm_test_stall */
  int stall_phase;
  long stall_ms;
};

void sl_comm_test_stall(sl_comm_t *c, unsigned long long epoch, int phase, long ms) {
  c->stall_epoch = epoch;
  c->stall_phase = phase;
  c->stall_ms = ms;
}

int sl_comm_rank(const sl_comm_t *c) {
  return c->rank;
}
int sl_comm_size(const sl_comm_t *c) {
  return c->size;
}
bool sl_comm_has_nccl(const sl_comm_t *c) {
  return c->has_nccl;
}
void sl_comm_set_algo(sl_comm_t *c, int algo) {
  c->algo = algo;
}

const char *sl_allreduce_algo_name(int algo) {
  switch (algo) {
  case SL_AR_AUTO: return "auto";
  case SL_AR_ONESHOT: return "oneshot";
  case SL_AR_TWOSHOT: return "twoshot";
  case SL_AR_NCCL: return "nccl";
  case SL_AR_NVLS: return "nvls";
  case SL_AR_ONESHOT_LL: return "oneshot-ll";
  }
  return "?";
}

/* LL sends 2 bytes per message byte to each of the n-1 peers (pull one-shot reads 1), but
 * saves the staging copy and the flag round: it wins while the message is small next to the
 * NVLink bandwidth x latency product. Guess: up to 256 KiB with 2 ranks, 128 KiB with 3-4,
 * 64 KiB with more; `sluice bench allreduce --full` prints oneshot-ll next to the others. */
static size_t ll_auto_max(const sl_comm_t *c) {
  size_t cap = c->size <= 2 ? SL_AR_LL_MAX_BYTES : c->size <= 4 ? SL_AR_LL_MAX_BYTES / 2 : SL_AR_LL_MAX_BYTES / 4;
  size_t have = (size_t)sl_ar_ll_bytes(c->max_bytes);
  return cap < have ? cap : have;
}

int sl_comm_choose_algo(const sl_comm_t *c, size_t bytes) {
  if (c->algo != SL_AR_AUTO) return c->algo;
  if (c->has_nccl && bytes >= SL_AR_NCCL_MIN_BYTES) return SL_AR_NCCL;
  if (c->backend == SL_BACKEND_CUDA && bytes <= ll_auto_max(c)) return SL_AR_ONESHOT_LL;
  size_t oneshot_max = c->size > 4 ? SL_AR_ONESHOT_MAX_BYTES / 2 : SL_AR_ONESHOT_MAX_BYTES;
  /* Two GPUs: one-shot and two-shot move the same bytes over NVLink (S each way) and
   * one-shot has one flag round less; the first H200x2 run had one-shot ahead wherever both
   * used the same grid (8 MiB: 176 vs 181 us). */
  if (c->backend == SL_BACKEND_CUDA && c->size == 2) return SL_AR_ONESHOT;
  if (bytes <= oneshot_max) return SL_AR_ONESHOT;
  /* NVLS pays off from 4 ranks (DESIGN.md); only when SL_NVLS=1 created its buffers. */
  return c->nvls && c->size >= 4 ? SL_AR_NVLS : SL_AR_TWOSHOT;
}

static bool is_float_dtype(sl_dtype_t t) {
  return t == SL_DTYPE_F32 || t == SL_DTYPE_BF16 || t == SL_DTYPE_F16;
}

/* ---- timeouts ------------------------------------------------------------------------------ */

static sl_status_t timeout_error(const sl_comm_t *c, const char *what) {
  const sl_flag_timeout_t *r = c->rec;
  int phase, block, src;
  sl_ar_flag_decode(r->flag_index, &phase, &block, &src);
  int peer = r->peer >= 0 && r->peer < c->size ? r->peer : 0;
  return SL_ERR(SL_ERR_TIMEOUT,
                "%s: rank %d (world rank %d) waited %.0f ms for rank %d (world rank %d) and gave up "
                "(flag %u: phase %d, block %d; expected epoch %llu, saw %llu). Rank %d stopped taking part: it died, "
                "stalled, or skipped the call (every rank must make the same collective calls in the same order); "
                "if it is only slow, raise SL_TIMEOUT_MS (now %ld ms). This communicator is now unusable",
                what, r->waiter_rank,
                c->world_ranks[r->waiter_rank >= 0 && r->waiter_rank < c->size ? r->waiter_rank : 0],
                (double)r->waited_ns / 1e6, r->peer, c->world_ranks[peer], r->flag_index, phase, block,
                (unsigned long long)r->expected, (unsigned long long)r->observed, r->peer, c->timeout_ms);
}

sl_status_t sl_comm_check(sl_comm_t *c) {
  if (*(volatile unsigned int *)&c->rec->timed_out) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return timeout_error(c, "all-reduce");
  }
  return SL_OK;
}

/* ---- element math shared by the CPU backend and the references ----------------------------- */

/* out[i] = fp32 sum over ranks in order of srcs[r][i], for i in [b, e); rounded once. */
static void reduce_range(const void *const *srcs, int n, void *out, size_t b, size_t e, sl_dtype_t t) {
  for (size_t i = b; i < e; i++) {
    float acc = sl_load_f32(srcs[0], t, i);
    for (int r = 1; r < n; r++)
      acc += sl_load_f32(srcs[r], t, i);
    sl_store_f32(out, t, i, acc);
  }
}

static void residual_rmsnorm_rows(const void *const *srcs, int n, const sl_ar_rmsnorm_args_t *a, int row_b, int row_e) {
  const size_t h = (size_t)a->hidden;
  for (int row = row_b; row < row_e; row++) {
    float ss = 0.0f;
    for (size_t j = 0; j < h; j++) {
      size_t i = (size_t)row * h + j;
      float acc = sl_load_f32(srcs[0], a->dtype, i);
      for (int r = 1; r < n; r++)
        acc += sl_load_f32(srcs[r], a->dtype, i);
      acc += sl_load_f32(a->residual, a->dtype, i);
      sl_store_f32(a->residual, a->dtype, i, acc);
      float v = sl_load_f32(a->residual, a->dtype, i); /* the rounded value, as stored */
      ss += v * v;
    }
    float inv = 1.0f / sqrtf(ss / (float)h + a->eps);
    for (size_t j = 0; j < h; j++) {
      size_t i = (size_t)row * h + j;
      float v = sl_load_f32(a->residual, a->dtype, i);
      float w = a->weight_bias + sl_load_f32(a->weight, a->dtype, j);
      sl_store_f32(a->out, a->dtype, i, (v * inv) * w);
    }
  }
}

void sl_allreduce_ref(const void *const *inputs, int nranks, void *out, size_t count, sl_dtype_t dtype) {
  reduce_range(inputs, nranks, out, 0, count, dtype);
}

void sl_allreduce_residual_rmsnorm_ref(const void *const *inputs, int nranks, const sl_ar_rmsnorm_args_t *args) {
  residual_rmsnorm_rows(inputs, nranks, args, 0, args->rows);
}

/* ---- CPU backend: the protocol with C11 atomics over shm ------------------------------------- */

static sl_ar_ctl_t *own_ctl(sl_comm_t *c) {
  return (sl_ar_ctl_t *)sl_symm_local(c->symm);
}
static sl_flag_t *flags_of(sl_comm_t *c, int r) {
  return (sl_flag_t *)((char *)sl_symm_peer(c->symm, r) + SL_AR_FLAGS_OFFSET);
}
static void *data_of(sl_comm_t *c, int r, uint64_t epoch) {
  return (char *)sl_symm_peer(c->symm, r) + sl_ar_data_offset(epoch, c->max_bytes);
}

/* Release-store epoch into slot (phase, block 0, src = me) of every peer. */
static void cpu_signal(sl_comm_t *c, uint64_t epoch, int phase) {
  unsigned idx = sl_ar_flag_index(epoch, phase, 0, c->rank);
  for (int r = 0; r < c->size; r++)
    if (r != c->rank) sl_flag_store_release(&flags_of(c, r)[idx], epoch);
  if (epoch == c->stall_epoch && phase == c->stall_phase) {
    struct timespec ts = {c->stall_ms / 1000, (c->stall_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* Acquire-wait for every peer's signal of (epoch, phase); bounded. */
static sl_status_t cpu_wait(sl_comm_t *c, uint64_t epoch, int phase, const char *what) {
  sl_flag_t *mine = flags_of(c, c->rank);
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank) continue;
    unsigned idx = sl_ar_flag_index(epoch, phase, 0, r);
    unsigned long long seen = 0, waited = 0;
    if (!sl_flag_wait_eq(&mine[idx], epoch, c->timeout_ms, &seen, &waited)) {
      sl_flag_timeout_record(c->rec, c->rank, r, idx, epoch, seen, waited);
      return timeout_error(c, what);
    }
  }
  return SL_OK;
}

static sl_status_t cpu_allreduce_piece(sl_comm_t *c, const void *in, void *out, size_t count, sl_dtype_t t, int algo) {
  sl_ar_ctl_t *ctl = own_ctl(c);
  uint64_t e = ctl->epoch + 1;
  const size_t esz = sl_dtype_bytes(t, 1);
  const void *srcs[SL_AR_MAX_RANKS];
  for (int r = 0; r < c->size; r++)
    srcs[r] = data_of(c, r, e);
  memcpy(data_of(c, c->rank, e), in, count * esz);
  cpu_signal(c, e, 0);
  SL_CHECK(cpu_wait(c, e, 0, "all-reduce"));
  if (algo == SL_AR_ONESHOT) {
    reduce_range(srcs, c->size, out, 0, count, t);
  } else {
    unsigned long long b, end;
    sl_ar_part(count, 1, c->size, c->rank, &b, &end);
    reduce_range(srcs, c->size, data_of(c, c->rank, e), b, end, t); /* chunk `rank`, in place */
    cpu_signal(c, e, 1);
    SL_CHECK(cpu_wait(c, e, 1, "all-reduce"));
    for (int q = 0; q < c->size; q++) {
      sl_ar_part(count, 1, c->size, q, &b, &end);
      if (end > b) memcpy((char *)out + b * esz, (const char *)srcs[q] + b * esz, (end - b) * esz);
    }
  }
  ctl->epoch = e;
  return SL_OK;
}

static sl_status_t cpu_residual_rmsnorm(sl_comm_t *c, const sl_ar_rmsnorm_args_t *a) {
  sl_ar_ctl_t *ctl = own_ctl(c);
  uint64_t e = ctl->epoch + 1;
  size_t count = (size_t)a->rows * (size_t)a->hidden;
  const void *srcs[SL_AR_MAX_RANKS];
  for (int r = 0; r < c->size; r++)
    srcs[r] = data_of(c, r, e);
  memcpy(data_of(c, c->rank, e), a->x, sl_dtype_bytes(a->dtype, count));
  cpu_signal(c, e, 0);
  SL_CHECK(cpu_wait(c, e, 0, "all-reduce+rmsnorm"));
  residual_rmsnorm_rows(srcs, c->size, a, 0, a->rows);
  ctl->epoch = e;
  return SL_OK;
}

/* ---- GPU launches ---------------------------------------------------------------------------- */

sl_status_t sl_allreduce_spec(sl_jit_spec_t *spec, int kind, sl_dtype_t dtype, int vec_bytes) {
  if (kind != SL_AR_ONESHOT && kind != SL_AR_TWOSHOT && kind != SL_AR_ONESHOT_LL)
    return SL_ERR(SL_ERR_INVALID, "all-reduce kernel kind %d (oneshot=1, twoshot=2, oneshot-ll=5)", kind);
  if (!is_float_dtype(dtype))
    return SL_ERR(SL_ERR_INVALID, "all-reduce of %s: only f32, bf16, f16", sl_dtype_name(dtype));
  const char *entry = kind == SL_AR_ONESHOT ? "sl_ar_oneshot" : kind == SL_AR_TWOSHOT ? "sl_ar_twoshot" : "sl_ar_oneshot_ll";
  sl_jit_spec_init(spec, "comm/allreduce.cu", entry);
  SL_CHECK(sl_jit_spec_define(spec, "AR_DTYPE", "%d", (int)dtype));
  SL_CHECK(sl_jit_spec_define(spec, "AR_THREADS", "%d", kind == SL_AR_ONESHOT_LL ? SL_AR_LL_THREADS : SL_AR_THREADS));
  SL_CHECK(sl_jit_spec_define(spec, "AR_VEC", "%d", vec_bytes / (int)sl_dtype_bytes(dtype, 1)));
  return SL_OK;
}

/* Warps per row for the fused kernel: one block per row group; enough warps that each
 * thread holds at most a few 16-byte vectors of the row, at most 16 warps (512 threads). */
static int rmsnorm_warps(sl_dtype_t dtype, int hidden) {
  int vec = 16 / (int)sl_dtype_bytes(dtype, 1);
  int warps = (hidden / vec + 31) / 32;
  return warps < 1 ? 1 : warps > 16 ? 16 : warps;
}

sl_status_t sl_allreduce_rmsnorm_spec(sl_jit_spec_t *spec, sl_dtype_t dtype, int hidden, float eps, float weight_bias) {
  if (!is_float_dtype(dtype))
    return SL_ERR(SL_ERR_INVALID, "all-reduce+rmsnorm of %s: only f32, bf16, f16", sl_dtype_name(dtype));
  int vec = 16 / (int)sl_dtype_bytes(dtype, 1);
  if (hidden <= 0 || hidden % vec != 0)
    return SL_ERR(SL_ERR_INVALID, "all-reduce+rmsnorm: hidden %d must be a positive multiple of %d for %s", hidden, vec,
                  sl_dtype_name(dtype));
  sl_jit_spec_init(spec, "comm/allreduce.cu", "sl_ar_residual_rmsnorm");
  SL_CHECK(sl_jit_spec_define(spec, "AR_DTYPE", "%d", (int)dtype));
  SL_CHECK(sl_jit_spec_define(spec, "AR_THREADS", "%d", rmsnorm_warps(dtype, hidden) * 32));
  SL_CHECK(sl_jit_spec_define(spec, "AR_VEC", "%d", vec));
  SL_CHECK(sl_jit_spec_define(spec, "ARN_HIDDEN", "%d", hidden));
  SL_CHECK(sl_jit_spec_define_f32(spec, "ARN_EPS", eps));
  SL_CHECK(sl_jit_spec_define_f32(spec, "ARN_WEIGHT_BIAS", weight_bias));
  return SL_OK;
}

sl_status_t sl_allreduce_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  (void)arch;
  static const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int d = 0; d < 3; d++) {
    static const int kinds[] = {SL_AR_ONESHOT, SL_AR_TWOSHOT, SL_AR_ONESHOT_LL};
    for (int ki = 0; ki < 3; ki++) {
      int kind = kinds[ki];
      int vecs[2] = {16, (int)sl_dtype_bytes(dtypes[d], 1)};
      for (int v = 0; v < 2; v++) {
        sl_jit_spec_t spec;
        SL_CHECK(sl_allreduce_spec(&spec, kind, dtypes[d], vecs[v]));
        SL_CHECK(fn(&spec, user));
      }
    }
    /* Fused decode: the hidden size of the GPU test and of Qwen3-MoE class models, in the
     * activation dtypes models use (bf16, f32 for checking); others compile on first use. */
    if (dtypes[d] == SL_DTYPE_F16) continue;
    static const int hiddens[] = {256, 4096, 7168};
    for (int h = 0; h < 3; h++) {
      sl_jit_spec_t spec;
      SL_CHECK(sl_allreduce_rmsnorm_spec(&spec, dtypes[d], hiddens[h], 1e-6f, 0.0f));
      SL_CHECK(fn(&spec, user));
    }
  }
  /* The NVLS kernel is compiled everywhere (it never runs without SL_NVLS=1). */
  return sl_nvls_jit_points(arch, fn, user);
}

static int blocks_for(const sl_comm_t *c, size_t bytes) {
  size_t b = (bytes + SL_AR_BYTES_PER_BLOCK - 1) / SL_AR_BYTES_PER_BLOCK;
  size_t cap = (size_t)c->sm_count < SL_AR_MAX_BLOCKS ? (size_t)c->sm_count : SL_AR_MAX_BLOCKS;
  if (b < 1) b = 1;
  return (int)(b > cap ? cap : b);
}

static sl_status_t gpu_launch(sl_comm_t *c, const sl_jit_spec_t *spec, sl_ar_args_t *args, int blocks, int threads,
                              sl_stream_t *stream) {
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(c->dev, spec, &k));
  /* grid <= SMs (and <= SL_AR_MAX_BLOCKS): every block of a rank is resident at once, so
   * block b's wait for its peers' block b can always be satisfied. */
  sl_launch_t l = {.grid = {(unsigned)blocks, 1, 1}, .block = {(unsigned)threads, 1, 1}, .stream = stream};
  void *params[] = {args};
  SL_CHECK(sl_kernel_launch(k, &l, params));
  return SL_OK;
}

static sl_status_t gpu_allreduce_piece(sl_comm_t *c, const void *in, void *out, size_t count, sl_dtype_t t, int algo,
                                       sl_stream_t *stream) {
  const size_t esz = sl_dtype_bytes(t, 1);
  int vec_bytes = ((uintptr_t)in % 16 == 0 && (uintptr_t)out % 16 == 0) ? 16 : (int)esz;
  sl_jit_spec_t spec;
  /* NVLS moves whole 16-byte vectors only; other shapes take the two-shot path. */
  if (algo == SL_AR_NVLS && (!c->nvls || vec_bytes != 16 || (count * esz) % 16 != 0)) algo = SL_AR_TWOSHOT;
  /* LL lines hold sl_ar_ll_bytes() of message per sender; larger pieces pull instead. */
  if (algo == SL_AR_ONESHOT_LL && count * esz > sl_ar_ll_bytes(c->max_bytes)) algo = SL_AR_ONESHOT;
  if (algo == SL_AR_NVLS)
    SL_CHECK(sl_nvls_spec(&spec, t, SL_AR_THREADS));
  else
    SL_CHECK(sl_allreduce_spec(&spec, algo, t, vec_bytes));
  sl_ar_args_t a = c->base;
  a.in = in;
  a.out = out;
  a.count = count;
  size_t bytes = count * esz;
  if (algo == SL_AR_ONESHOT_LL) {
    size_t chunks = (bytes + 15) / 16;
    size_t blocks = (chunks + SL_AR_LL_THREADS - 1) / SL_AR_LL_THREADS;
    if (blocks > (size_t)c->sm_count) blocks = (size_t)c->sm_count; /* grid-stride beyond */
    return gpu_launch(c, &spec, &a, (int)blocks, SL_AR_LL_THREADS, stream);
  }
  int blocks = blocks_for(c, algo == SL_AR_ONESHOT ? bytes : bytes / (size_t)c->size);
  return gpu_launch(c, &spec, &a, blocks, SL_AR_THREADS, stream);
}

/* ---- public entry points -------------------------------------------------------------------- */

sl_status_t sl_allreduce(sl_comm_t *c, const void *in, void *out, size_t count, sl_dtype_t dtype, sl_stream_t *stream) {
  if (!is_float_dtype(dtype))
    return SL_ERR(SL_ERR_INVALID, "sl_allreduce: dtype %s is not supported (f32, bf16, f16)", sl_dtype_name(dtype));
  if (count == 0) return SL_OK;
  if (!in || !out) return SL_ERR(SL_ERR_INVALID, "sl_allreduce: NULL buffer (in %p, out %p)", in, out);
  SL_CHECK(sl_comm_check(c));
  const size_t esz = sl_dtype_bytes(dtype, 1);
  if (c->size == 1) return in == out ? SL_OK : sl_memcpy(c->dev, out, in, count * esz, stream);
  int algo = sl_comm_choose_algo(c, count * esz);
  if (algo == SL_AR_NCCL) {
#ifdef SLUICE_HAVE_CUDA
    if (!c->has_nccl)
      return SL_ERR(SL_ERR_UNSUPPORTED,
                    "sl_allreduce: NCCL requested but the ranks share a GPU or this is the CPU backend");
    ncclDataType_t nt = dtype == SL_DTYPE_F32 ? ncclFloat32 : dtype == SL_DTYPE_BF16 ? ncclBfloat16 : ncclFloat16;
    ncclResult_t r = ncclAllReduce(in, out, count, nt, ncclSum, c->nccl, (cudaStream_t)sl_stream_native(stream));
    if (r != ncclSuccess) return SL_ERR(SL_ERR_CUDA, "ncclAllReduce of %zu elements: %s", count, ncclGetErrorString(r));
    return SL_OK;
#else
    return SL_ERR(SL_ERR_UNSUPPORTED, "sl_allreduce: no NCCL in this build");
#endif
  }
  /* Messages above max_bytes go in pieces; each piece is one call (one epoch). */
  size_t piece = (c->max_bytes / esz) & ~(size_t)7;
  for (size_t off = 0; off < count; off += piece) {
    size_t n = count - off < piece ? count - off : piece;
    const void *pin = (const char *)in + off * esz;
    void *pout = (char *)out + off * esz;
    if (c->backend == SL_BACKEND_CPU)
      SL_CHECK(cpu_allreduce_piece(c, pin, pout, n, dtype,
                                   algo == SL_AR_ONESHOT || algo == SL_AR_ONESHOT_LL ? SL_AR_ONESHOT : SL_AR_TWOSHOT));
    else
      SL_CHECK(gpu_allreduce_piece(c, pin, pout, n, dtype, algo, stream));
  }
  return SL_OK;
}

sl_status_t sl_allreduce_residual_rmsnorm(sl_comm_t *c, const sl_ar_rmsnorm_args_t *a, sl_stream_t *stream) {
  if (!is_float_dtype(a->dtype))
    return SL_ERR(SL_ERR_INVALID, "all-reduce+rmsnorm: dtype %s is not supported (f32, bf16, f16)",
                  sl_dtype_name(a->dtype));
  if (a->rows <= 0 || a->hidden <= 0)
    return SL_ERR(SL_ERR_INVALID, "all-reduce+rmsnorm: %d rows x %d hidden", a->rows, a->hidden);
  size_t bytes = sl_dtype_bytes(a->dtype, (size_t)a->rows * (size_t)a->hidden);
  if (bytes > c->max_bytes)
    return SL_ERR(SL_ERR_CAPACITY,
                  "all-reduce+rmsnorm: %d x %d %s (%zu bytes) exceeds the communicator's max message "
                  "%zu bytes; create the comm with a larger max_bytes",
                  a->rows, a->hidden, sl_dtype_name(a->dtype), bytes, c->max_bytes);
  SL_CHECK(sl_comm_check(c));
  if (c->backend == SL_BACKEND_CPU) return cpu_residual_rmsnorm(c, a);
  int vec = 16 / (int)sl_dtype_bytes(a->dtype, 1);
  if ((uintptr_t)a->x % 16 || (uintptr_t)a->residual % 16 || (uintptr_t)a->weight % 16 || (uintptr_t)a->out % 16 ||
      a->hidden % vec)
    return SL_ERR(SL_ERR_INVALID,
                  "all-reduce+rmsnorm on the GPU needs 16-byte aligned buffers and hidden %% %d == 0 "
                  "(hidden %d)",
                  vec, a->hidden);
  sl_jit_spec_t spec;
  SL_CHECK(sl_allreduce_rmsnorm_spec(&spec, a->dtype, a->hidden, a->eps, a->weight_bias));
  sl_ar_args_t k = c->base;
  k.in = a->x;
  k.out = a->out;
  k.residual = a->residual;
  k.weight = a->weight;
  k.rows = a->rows;
  k.count = (unsigned long long)a->rows * (unsigned long long)a->hidden;
  /* Small (decode) messages: LL push, as the plain all-reduce would (ll_auto_max). */
  k.ll = bytes <= ll_auto_max(c) ? 1 : 0;
  /* Decode: one block per row while rows < SMs (spreads the rows' loads over SMs). */
  int blocks = a->rows < c->sm_count ? a->rows : c->sm_count;
  if (blocks > SL_AR_MAX_BLOCKS) blocks = SL_AR_MAX_BLOCKS;
  return gpu_launch(c, &spec, &k, blocks, rmsnorm_warps(a->dtype, a->hidden) * 32, stream);
}

/* ---- creation ---------------------------------------------------------------------------------- */

#ifdef SLUICE_HAVE_CUDA
/* Are the communicator's ranks on distinct GPUs? NCCL and NVLS need that. */
static sl_status_t distinct_gpus(sl_comm_t *c, MPI_Comm comm, bool *distinct) {
  char bus[SL_AR_MAX_RANKS][32];
  char mine[32];
  snprintf(mine, sizeof mine, "%s", sl_device_info(c->dev)->pci_bus_id);
  SL_MPI_CHECK(MPI_Allgather(mine, 32, MPI_CHAR, bus, 32, MPI_CHAR, comm));
  *distinct = true;
  for (int i = 0; i < c->size; i++)
    for (int j = i + 1; j < c->size; j++)
      if (strcmp(bus[i], bus[j]) == 0) {
        if (*distinct) SL_LOG_INFO("all-reduce: ranks %d and %d share GPU %s: no NCCL, no NVLS", i, j, bus[i]);
        *distinct = false;
      }
  return SL_OK;
}

static sl_status_t nccl_init(sl_comm_t *c, MPI_Comm comm, const sl_config_t *cfg) {
  /* NVLink multicast stays off unless SL_NVLS=1 (DESIGN.md, NVLS policy). */
  if (!cfg->nvls) setenv("NCCL_NVLS_ENABLE", "0", 1);
  ncclUniqueId id;
  if (c->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) memset(&id, 0, sizeof id), SL_LOG_WARN("ncclGetUniqueId: %s", ncclGetErrorString(r));
  }
  SL_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  ncclResult_t r = ncclCommInitRank(&c->nccl, c->size, id, c->rank);
  int ok = r == ncclSuccess, all_ok = 0;
  SL_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm));
  if (!all_ok) {
    if (ok) ncclCommDestroy(c->nccl);
    SL_LOG_WARN("all-reduce: NCCL init failed (%s); large messages use two-shot", ncclGetErrorString(r));
    return SL_OK;
  }
  c->has_nccl = true;
  return SL_OK;
}
#endif

sl_status_t sl_comm_create(const sl_boot_t *boot, sl_device_t *dev, const sl_config_t *cfg, size_t max_bytes,
                           sl_comm_t **out) {
  *out = NULL;
  if (max_bytes < 256) max_bytes = 256;
  sl_comm_t *c = calloc(1, sizeof *c);
  if (!c) return SL_ERR(SL_ERR_NOMEM, "all-reduce communicator");
  sl_status_t st = SL_OK;
  c->dev = dev;
  c->backend = sl_device_backend(dev);
  c->max_bytes = (max_bytes + 255) & ~(size_t)255;
  c->timeout_ms = cfg->timeout_ms;
  c->sm_count = sl_device_info(dev)->sm_count > 0 ? sl_device_info(dev)->sm_count : 1;
  MPI_Comm_rank(boot->node_comm, &c->rank);
  MPI_Comm_size(boot->node_comm, &c->size);
  if (c->size > SL_AR_MAX_RANKS) {
    st = SL_ERR(SL_ERR_CAPACITY, "all-reduce: %d ranks on one node, at most %d supported", c->size, SL_AR_MAX_RANKS);
    goto fail;
  }
  SL_CHECK_GOTO(sl_mpi_status(MPI_Allgather(&boot->rank, 1, MPI_INT, c->world_ranks, 1, MPI_INT, boot->node_comm),
                              "MPI_Allgather(world ranks)"),
                st, fail);
  if (c->backend == SL_BACKEND_CPU) {
    c->rec = c->rec_dev = calloc(1, sizeof *c->rec);
    if (!c->rec) {
      st = SL_ERR(SL_ERR_NOMEM, "all-reduce timeout record");
      goto fail;
    }
  } else {
    SL_CHECK_GOTO(sl_host_alloc_mapped(dev, sizeof *c->rec, (void **)&c->rec, (void **)&c->rec_dev), st, fail);
    memset(c->rec, 0, sizeof *c->rec);
  }
  SL_CHECK_GOTO(sl_symm_create(dev, boot->node_comm, sl_ar_segment_bytes(c->max_bytes), "allreduce", &c->symm), st,
                fail);
  for (int r = 0; r < c->size; r++)
    c->base.seg[r] = sl_symm_peer(c->symm, r);
  c->base.rank = c->rank;
  c->base.nranks = c->size;
  c->base.max_bytes = c->max_bytes;
  c->base.timeout_ns = (unsigned long long)c->timeout_ms * 1000000ull;
  c->base.timeout = c->rec_dev;
#ifdef SLUICE_HAVE_CUDA
  if (c->backend == SL_BACKEND_CUDA && c->size > 1) {
    bool distinct = false;
    SL_CHECK_GOTO(distinct_gpus(c, boot->node_comm, &distinct), st, fail);
    /* NCCL refuses two ranks on one device. */
    if (distinct) SL_CHECK_GOTO(nccl_init(c, boot->node_comm, cfg), st, fail);
    /* NVLink multicast only on explicit opt-in (SL_NVLS=1); never reached otherwise. */
    if (distinct && cfg->nvls) {
      if (sl_nvls_create(cfg, dev, boot->node_comm, 2 * sl_ar_region_bytes(c->max_bytes), &c->nvls) == SL_OK) {
        c->base.mc = sl_nvls_multicast(c->nvls);
        c->base.uc = sl_nvls_unicast(c->nvls);
      } else {
        SL_LOG_WARN("all-reduce: SL_NVLS=1 but NVLS set-up failed (%s); using two-shot", sl_last_error());
      }
    }
  }
#endif
  SL_LOG_DEBUG("all-reduce communicator: %d ranks, max message %zu bytes, NCCL %s", c->size, c->max_bytes,
               c->has_nccl ? "yes" : "no");
  *out = c;
  return SL_OK;
fail:
  sl_comm_destroy(c);
  return st;
}

void sl_comm_destroy(sl_comm_t *c) {
  if (!c) return;
  /* Kernels still in flight read the peers' buffers (their waits are bounded). */
  if (c->backend == SL_BACKEND_CUDA && sl_device_sync(c->dev) != SL_OK)
    SL_LOG_WARN("all-reduce: device error while tearing down the communicator: %s", sl_last_error());
#ifdef SLUICE_HAVE_CUDA
  if (c->has_nccl) ncclCommDestroy(c->nccl);
#endif
  sl_nvls_destroy(c->nvls);
  sl_symm_destroy(c->symm);
  if (c->backend == SL_BACKEND_CPU)
    free(c->rec);
  else if (c->rec)
    sl_host_free_mapped(c->dev, c->rec);
  free(c);
}
