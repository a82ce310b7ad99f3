/* Symmetric memory: one buffer per rank of a communicator (a node), same size and layout on
 * every rank, every peer's buffer addressable by every rank.
 *
 *  - CUDA backend: cudaMalloc on each rank, CUDA IPC handles exchanged over MPI, peers'
 *    handles opened (works between processes sharing one GPU too). A rank uses its own
 *    local pointer for itself (a process cannot open its own IPC handle).
 *  - CPU backend: POSIX shared memory, one object per rank named
 *    "/sluice-<creator pid>-<job id>-<seq>-<rank>", mapped by every rank of the
 *    communicator, then unlinked as soon as all ranks have mapped it, so neither a normal
 *    exit nor an abort leaves a name behind. A crash in the short window between create
 *    and unlink leaves a name whose creator pid is dead: the start-up sweep
 *    (sl_symm_sweep_stale, run by sl_symm_create) removes those.
 *
 * Buffers start zeroed (flags in them read as epoch 0, "never signalled").
 * Pointers are device pointers on CUDA, host pointers on the CPU backend.
 */
#ifndef SL_COMM_SYMM_H
#define SL_COMM_SYMM_H

#include <mpi.h>
#include <stddef.h>

#include "runtime/sl_device.h"
#include "runtime/sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most ranks a symmetric buffer (and so a node-level communicator) may span. */
#define SL_SYMM_MAX_RANKS 8

typedef struct sl_symm sl_symm_t;

/* Collective over `comm` (every rank calls it with the same `bytes`): allocate `bytes`
 * (rounded up to 4 KiB) on each rank and map every peer's buffer. `tag` names the user in
 * messages ("allreduce"). The communicator must fit in SL_SYMM_MAX_RANKS. */
sl_status_t sl_symm_create(sl_device_t *dev, MPI_Comm comm, size_t bytes, const char *tag, sl_symm_t **out);

/* Collective when all ranks are alive: waits (bounded by 2 x SL_TIMEOUT_MS) until every rank has
 * stopped using the buffers, then unmaps and frees. When a peer does not arrive in time
 * (it died or stalled) it still frees its own resources and returns. NULL is a no-op. */
void sl_symm_destroy(sl_symm_t *symm);

int sl_symm_rank(const sl_symm_t *symm); /* this rank in the communicator */
int sl_symm_size(const sl_symm_t *symm); /* ranks in the communicator */
size_t sl_symm_bytes(const sl_symm_t *symm);
/* This rank's buffer. */
void *sl_symm_local(const sl_symm_t *symm);
/* `peer`'s buffer as addressable from this rank (peer == own rank gives the local buffer). */
void *sl_symm_peer(const sl_symm_t *symm, int peer);

/* Remove /dev/shm/sluice-<pid>-* objects whose creator pid no longer exists (jobs that were
 * killed inside the create window). Safe to run concurrently; *removed (may be NULL) is the
 * number of names removed. */
sl_status_t sl_symm_sweep_stale(int *removed);

/* Job id shared by the ranks of this process's jobs (rank 0's pid and start time, agreed
 * over MPI at the first sl_symm_create); 0 before then. Part of every shm name. */
unsigned long long sl_symm_job_id(void);

#ifdef __cplusplus
}
#endif
#endif
