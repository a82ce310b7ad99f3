/* Inter-node transport: one CPU proxy thread per rank drives UCX (UCP RMA) on behalf of
 * CPU code and GPU kernels that post put descriptors into a ring (comm/ring.h).
 *
 * Model (what a user of this API can rely on):
 *  - Every rank has one WINDOW of `window_bytes` (the same size on every rank) and
 *    `flag_slots` 64-bit FLAGS. A put copies bytes from the source rank's window at
 *    local_offset into the destination rank's window at remote_offset, and then writes
 *    `epoch` into the destination's flag[flag_index]. The flag never arrives before its
 *    data: a reader that sees the epoch (sl_proxy_wait_flag, or an acquire load of the
 *    flag from a kernel) sees the bytes. Callers divide the window into send and receive
 *    areas as their protocol needs (e.g. one receive region per sender, so no conflicts).
 *  - Epochs follow DESIGN.md: they grow per call and are never reset, and waiters compare
 *    for equality, so a late reader cannot confuse two calls.
 *  - Remote peers are the ranks on OTHER nodes (sl_boot_t's nodes, simulated or real).
 *    Same-node peers use symmetric memory (comm/symm.h), not this proxy, unless
 *    opts.all_peers_remote is set (tests and single-node runs).
 *  - Memory: when UCX supports CUDA memory and the device is a GPU, the window is device
 *    memory registered with UCX and put directly (GPUDirect RDMA): sl_proxy_window gives
 *    host_ptr == NULL. Otherwise (and on the CPU backend) the window is pinned host memory
 *    mapped into the device (staging): host_ptr and dev_ptr alias the same bytes.
 *    sl_proxy_mode says which. Flags are always host-mapped memory.
 *  - Every wait is bounded by SL_TIMEOUT_MS (or opts.timeout_ms). A flag wait that expires
 *    returns SL_ERR_TIMEOUT naming the peer (rank, node, host). The proxy's own flushes are
 *    bounded the same way: a destination that stops progressing fails the proxy with
 *    SL_ERR_TIMEOUT naming it, a peer lost by the transport with SL_ERR_PEER naming it, and
 *    every later call returns that error. Posting into a full ring and quiesce wait twice
 *    the bound (a descriptor takes two flush rounds), so a stuck peer is reported by name
 *    before "ring stayed full" / "did not drain". A failed proxy stays failed: destroy it
 *    and end the job (MPI_Abort).
 *  - Thread safety: post/wait/quiesce may be called from several threads. create and
 *    destroy are collective over boot->world and must be called by every rank.
 *
 * Device producers: sl_proxy_device_ring gives what a kernel passes to sl_ring_post
 * (comm/ring.cuh); the same descriptor layout as the CPU producer, a separate ring.
 *
 * UCX configuration: the usual UCX_* variables apply (UCX_TLS, UCX_NET_DEVICES, ...).
 * When UCX_NET_DEVICES is unset, UCX_TLS (if set) allows InfiniBand transports, and the
 * topology knows the NIC nearest this rank's GPU (runtime/sl_topo.h), the proxy selects
 * that NIC ("mlx5_0:1"). */
#ifndef SL_COMM_PROXY_H
#define SL_COMM_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/ring.h"
#include "runtime/sl_boot.h"
#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_proxy sl_proxy_t;

typedef struct {
  bool all_peers_remote;   /* treat every other rank as remote, same node or not (false) */
  uint32_t ring_slots;     /* descriptors per ring, rounded up to a power of two (0: 1024) */
  long timeout_ms;         /* bound of every wait of this proxy (0: SL_TIMEOUT_MS) */
  const char *net_devices; /* UCX NET_DEVICES to use, e.g. "mlx5_0:1"; NULL: UCX_NET_DEVICES
                              if set, else the NIC nearest the GPU, else UCX's choice */
} sl_proxy_options_t;

typedef enum {
  SL_PROXY_STAGED = 1, /* window in pinned host memory mapped into the device */
  SL_PROXY_DIRECT = 2, /* window in device memory, registered with UCX (GPUDirect RDMA) */
} sl_proxy_mode_t;

/* Collective over boot->world: allocate and register the window and flags, start the
 * proxy thread, exchange worker addresses and remote keys with every remote peer.
 * `opts` may be NULL (defaults). Window and flags start zeroed. */
sl_status_t sl_proxy_create(const sl_boot_t *boot, sl_device_t *dev, size_t window_bytes, size_t flag_slots,
                            const sl_proxy_options_t *opts, sl_proxy_t **out);

/* Collective orderly shutdown: wait for this rank's posted puts (bounded), barrier, close
 * endpoints, stop the thread, unregister and free. Safe on NULL. Returns the first error
 * met on the way (the proxy is freed in any case). */
sl_status_t sl_proxy_destroy(sl_proxy_t *proxy);

/* This rank's window: host_ptr (NULL in direct mode) and dev_ptr (device alias; equal to
 * host_ptr on the CPU backend). Either out pointer may be NULL. */
void sl_proxy_window(const sl_proxy_t *proxy, void **host_ptr, void **dev_ptr);
/* This rank's flags (flag_slots uint64_t): host pointer and device alias. */
void sl_proxy_flags(const sl_proxy_t *proxy, uint64_t **host_ptr, uint64_t **dev_ptr);
sl_proxy_mode_t sl_proxy_mode(const sl_proxy_t *proxy);
/* Is `rank` reached through this proxy? */
bool sl_proxy_is_remote(const sl_proxy_t *proxy, int rank);

/* CPU producer: post a put of `bytes` (0 allowed: a pure signal) from this rank's window
 * at local_offset to dst_rank's window at remote_offset, followed by writing `epoch` into
 * dst_rank's flag[flag_index]. Returns once the descriptor is in the ring (asynchronous):
 * don't modify the source bytes before sl_proxy_quiesce. Waits while the ring is full,
 * bounded: SL_ERR_TIMEOUT names the ring. Bad ranks/offsets/sizes: SL_ERR_RANGE. */
sl_status_t sl_proxy_post_put(sl_proxy_t *proxy, int dst_rank, size_t remote_offset, size_t local_offset, size_t bytes,
                              uint32_t flag_index, uint64_t epoch);

/* Wait until this rank's flag[flag_index] == epoch (acquire), written by src_rank.
 * Timeout: SL_ERR_TIMEOUT naming src_rank, its node and host, the flag, the epoch
 * expected and the value seen. */
sl_status_t sl_proxy_wait_flag(sl_proxy_t *proxy, int src_rank, uint32_t flag_index, uint64_t epoch);

/* Wait until every descriptor published so far on this rank's rings has completed at its
 * destination (data and flag delivered). Kernels that post must have finished first
 * (synchronise their stream). Bounded. */
sl_status_t sl_proxy_quiesce(sl_proxy_t *proxy);

/* Device producers: fill what comm/ring.cuh's sl_ring_dev_t holds, in this order:
 * ring (device alias of the host-mapped device ring), head (producers' counter, device
 * memory; host memory on the CPU backend) and the wait bound in ns. */
typedef struct {
  sl_ring_header_t *ring;
  unsigned long long *head;
  unsigned long long timeout_ns;
} sl_proxy_dev_ring_t;
void sl_proxy_device_ring(const sl_proxy_t *proxy, sl_proxy_dev_ring_t *out);

/* CPU-backend producer on the device ring (same protocol as the kernel side; lets CPU
 * code exercise the device ring and its head counter). */
sl_status_t sl_proxy_post_device_ring(sl_proxy_t *proxy, const sl_ring_desc_t *desc);

/* Tests and diagnostics: while paused the proxy thread consumes no descriptors (it keeps
 * progressing UCX, so it still serves peers' puts into this rank's window). */
void sl_proxy_set_paused(sl_proxy_t *proxy, bool paused);

/* The proxy's failure text ("" while healthy). */
const char *sl_proxy_error(const sl_proxy_t *proxy);

/* Counters for benchmarks and tests. */
typedef struct {
  uint64_t puts;            /* descriptors completed */
  uint64_t bytes;           /* payload bytes completed */
  uint64_t batches;         /* flush rounds */
  uint64_t ring_full_waits; /* posts that found their ring full */
} sl_proxy_stats_t;
void sl_proxy_stats(const sl_proxy_t *proxy, sl_proxy_stats_t *out);

/* The JIT test kernels of comm/proxy_post.cu, registered in engine/jit_points.c:
 * post_pattern writes a pattern into the window and posts one descriptor per block;
 * check_pattern acquires a peer's flags on the GPU and counts wrong bytes. */
sl_status_t sl_proxy_post_kernel_spec(sl_jit_spec_t *spec, int threads);
sl_status_t sl_proxy_check_kernel_spec(sl_jit_spec_t *spec, int threads);
/* Every JIT point of the module (both test kernels), for engine/jit_points.c. */
sl_status_t sl_proxy_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
