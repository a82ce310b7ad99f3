/* All-reduce across the ranks of a node: one-shot and two-shot over symmetric memory
 * (NVLink peer pointers on the GPU, POSIX shm on the CPU), NCCL for large messages, and a
 * fused decode variant (all-reduce + residual add + RMSNorm in one launch).
 *
 * Scope: the communicator is the NODE (boot->node_comm). With simulated nodes
 * (SL_RANKS_PER_NODE=k) each simulated node all-reduces among its own k ranks; a
 * cross-node reduction is not done here (tensor-parallel groups live inside a node).
 *
 * Numerics: sums run in fp32 over ranks in the fixed order 0, 1, ..., n-1 (starting from
 * rank 0's value), rounded once to the element type, so every rank gets bit-identical
 * results and the CPU and GPU backends agree bit for bit. The NCCL path (large messages,
 * ranks on distinct GPUs only) is identical on every rank but follows NCCL's order.
 *
 * Ordering: every rank must make the same sequence of calls on a communicator (the epoch of
 * a call is its position in that sequence), issued in order: one stream per rank, or
 * streams ordered by events. Two communicators are independent.
 *
 * Failures: every wait is bounded by SL_TIMEOUT_MS. GPU calls do not synchronise; a timeout
 * inside a kernel is recorded in host-mapped memory and reported as SL_ERR_TIMEOUT (naming
 * the peer) by sl_comm_check() and by every later call. After a timeout the communicator is
 * broken (peers disagree on the epoch): destroy it.
 */
#ifndef SL_COMM_ALLREDUCE_H
#define SL_COMM_ALLREDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "comm/allreduce_layout.h"
#include "kernels/sl_dtype.h"
#include "runtime/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_comm sl_comm_t;

/* Collective over boot->node_comm: symmetric buffers sized for messages up to max_bytes
 * (larger messages are reduced in pieces of max_bytes), the flag arrays, and an NCCL
 * communicator when the ranks are on distinct GPUs (NCCL refuses duplicate GPUs). */
sl_status_t sl_comm_create(const sl_boot_t *boot, sl_device_t *dev, const sl_config_t *cfg, size_t max_bytes,
                           sl_comm_t **out);
/* Collective (bounded wait for peers; see sl_symm_destroy). NULL is a no-op. */
void sl_comm_destroy(sl_comm_t *comm);

int sl_comm_rank(const sl_comm_t *comm);
int sl_comm_size(const sl_comm_t *comm);
bool sl_comm_has_nccl(const sl_comm_t *comm);
/* SL_OK, or SL_ERR_TIMEOUT naming the peer when a wait (GPU or CPU) gave up. Reads the
 * host-mapped record without synchronising: call it after syncing the stream to see the
 * outcome of the work issued so far. */
sl_status_t sl_comm_check(sl_comm_t *comm);
/* Force an algorithm (SL_AR_AUTO, SL_AR_ONESHOT, SL_AR_ONESHOT_LL, SL_AR_TWOSHOT, SL_AR_NCCL,
 * SL_AR_NVLS) for the benchmark and tests. NCCL without an NCCL communicator fails at the next
 * call. */
void sl_comm_set_algo(sl_comm_t *comm, int algo);
/* Fault injection for tests (CPU backend): in the call whose epoch is `epoch` (1 = the first
 * call), sleep `ms` right after signalling `phase` (0 or 1) — a rank that stalls in the
 * middle of an all-reduce. epoch 0 disarms. */
void sl_comm_test_stall(sl_comm_t *comm, unsigned long long epoch, int phase, long ms);
/* The algorithm AUTO picks for `bytes` on this communicator. */
int sl_comm_choose_algo(const sl_comm_t *comm, size_t bytes);
const char *sl_allreduce_algo_name(int algo);

/* out = sum over the node's ranks of in (count elements of dtype f32, bf16 or f16).
 * in == out is allowed. Asynchronous on `stream` on the GPU (no host synchronisation,
 * capturable in a CUDA graph); complete on return on the CPU backend. */
sl_status_t sl_allreduce(sl_comm_t *comm, const void *in, void *out, size_t count, sl_dtype_t dtype,
                         sl_stream_t *stream);

/* Fused decode step over rows x hidden:
 *   residual += allreduce(x)           (fp32 sum in rank order, + residual, rounded once)
 *   out = rmsnorm(residual) * (weight_bias + weight)
 * where rmsnorm(v) = v / sqrt(mean(v^2) + eps) computed in fp32 from the rounded residual.
 * x, residual, out: rows x hidden of dtype; weight: hidden of dtype. One launch on the GPU.
 * rows * hidden * size(dtype) must fit in the comm's max_bytes. */
typedef struct {
  const void *x;
  void *residual;
  const void *weight;
  void *out;
  int rows, hidden;
  sl_dtype_t dtype;
  float eps;
  float weight_bias; /* 0 for plain RMSNorm; 1 for (1 + w) checkpoints */
} sl_ar_rmsnorm_args_t;
sl_status_t sl_allreduce_residual_rmsnorm(sl_comm_t *comm, const sl_ar_rmsnorm_args_t *args, sl_stream_t *stream);

/* ---- CPU references (single process; inputs[r] is rank r's input) ---------------------- */
void sl_allreduce_ref(const void *const *inputs, int nranks, void *out, size_t count, sl_dtype_t dtype);
/* residual is updated in place, out written. */
void sl_allreduce_residual_rmsnorm_ref(const void *const *inputs, int nranks, const sl_ar_rmsnorm_args_t *args);

/* ---- JIT configuration points ----------------------------------------------------------- */
/* kind: SL_AR_ONESHOT, SL_AR_TWOSHOT or SL_AR_ONESHOT_LL; vec_bytes: 16 (aligned) or the
 * element size. */
sl_status_t sl_allreduce_spec(sl_jit_spec_t *spec, int kind, sl_dtype_t dtype, int vec_bytes);
sl_status_t sl_allreduce_rmsnorm_spec(sl_jit_spec_t *spec, sl_dtype_t dtype, int hidden, float eps, float weight_bias);
/* Every point the all-reduce module compiles, NVLS included (engine/jit_points.c). */
sl_status_t sl_allreduce_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
