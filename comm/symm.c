/* Symmetric memory across the ranks of a node: CUDA IPC on the GPU, POSIX shm on the CPU. */
#include "comm/symm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/sl_boot.h"
#include "runtime/sl_config.h"
#include "runtime/sl_log.h"

#ifdef SLUICE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define SHM_PREFIX "sluice-"
#define SHM_DIR "/dev/shm"

struct sl_symm {
  sl_device_t *dev;
  sl_backend_t backend;
  MPI_Comm comm; /* dup of the caller's communicator */
  int rank, size;
  size_t bytes;
  char tag[32];
  void *local;
  void *peers[SL_SYMM_MAX_RANKS];
};

static unsigned long long job_id;
static unsigned seq;

unsigned long long sl_symm_job_id(void) {
  return job_id;
}

int sl_symm_rank(const sl_symm_t *s) {
  return s->rank;
}
int sl_symm_size(const sl_symm_t *s) {
  return s->size;
}
size_t sl_symm_bytes(const sl_symm_t *s) {
  return s->bytes;
}
void *sl_symm_local(const sl_symm_t *s) {
  return s->local;
}
void *sl_symm_peer(const sl_symm_t *s, int peer) {
  if (peer < 0 || peer >= s->size) return NULL;
  return s->peers[peer];
}

/* ---- the stale-name sweep ------------------------------------------------------------ */

sl_status_t sl_symm_sweep_stale(int *removed) {
  int n = 0;
  if (removed) *removed = 0;
  DIR *d = opendir(SHM_DIR);
  if (!d) return SL_OK; /* no /dev/shm: nothing can be stale */
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)) != 0) continue;
    char *end;
    long pid = strtol(e->d_name + strlen(SHM_PREFIX), &end, 10);
    if (end == e->d_name + strlen(SHM_PREFIX) || *end != '-' || pid <= 0) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* creator alive (or not ours to judge) */
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) {
      n++;
      SL_LOG_INFO("removed stale shared memory %s%s (creator pid %ld is gone)", SHM_DIR, name, pid);
    }
  }
  closedir(d);
  if (removed) *removed = n;
  return SL_OK;
}

/* ---- collective helpers -------------------------------------------------------------- */

/* Barrier bounded by `limit_ms`: true when every rank arrived in time. On false the request
 * stays pending inside MPI (it completes if the late rank ever arrives), so the caller must
 * NOT free `comm` then: MPI would progress the request on a freed communicator. */
static bool bounded_barrier(MPI_Comm comm, long limit_ms) {
  MPI_Request req;
  if (MPI_Ibarrier(comm, &req) != MPI_SUCCESS) return false;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long ms = (t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L;
    if (ms > limit_ms) return false; /* the request is abandoned: a peer is gone */
    usleep(200);
  }
}

/* All ranks agree: every rank's ok flag is ANDed. */
static sl_status_t agree(MPI_Comm comm, int ok, int *all_ok) {
  *all_ok = ok;
  SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, all_ok, 1, MPI_INT, MPI_LAND, comm));
  return SL_OK;
}

/* ---- CPU backend: POSIX shm ------------------------------------------------------------ */

static void shm_name(char *buf, size_t len, long pid, unsigned long long job, unsigned sq, int rank) {
  snprintf(buf, len, "/" SHM_PREFIX "%ld-%llx-%u-%d", pid, job, sq, rank);
}

static sl_status_t create_shm(sl_symm_t *s) {
  /* Every rank learns every creator's pid, to open the peers' names. */
  long pids[SL_SYMM_MAX_RANKS], me = (long)getpid();
  SL_MPI_CHECK(MPI_Allgather(&me, 1, MPI_LONG, pids, 1, MPI_LONG, s->comm));
  unsigned sq = seq++;
  char name[128];
  shm_name(name, sizeof name, me, job_id, sq, s->rank);
  sl_status_t st = SL_OK;
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    st = SL_ERR(SL_ERR_IO, "%s: shm_open(%s) failed: %s; check that /dev/shm is writable and not full", s->tag, name,
                strerror(errno));
  } else if (ftruncate(fd, (off_t)s->bytes) != 0) {
    st = SL_ERR(SL_ERR_NOMEM, "%s: ftruncate(%s, %zu) failed: %s; /dev/shm may be too small", s->tag, name, s->bytes,
                strerror(errno));
  } else {
    void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      st = SL_ERR(SL_ERR_NOMEM, "%s: mmap of %s (%zu bytes) failed: %s", s->tag, name, s->bytes, strerror(errno));
    else
      s->local = s->peers[s->rank] = p; /* ftruncate zero-fills */
  }
  if (fd >= 0) close(fd);
  int all_ok;
  sl_status_t as = agree(s->comm, st == SL_OK, &all_ok);
  if (st == SL_OK && (as != SL_OK || !all_ok))
    st = SL_ERR(SL_ERR_PEER, "%s: a peer failed to create its shared memory", s->tag);
  if (st == SL_OK) {
    for (int r = 0; r < s->size && st == SL_OK; r++) {
      if (r == s->rank) continue;
      char peer_name[128];
      shm_name(peer_name, sizeof peer_name, pids[r], job_id, sq, r);
      int pfd = shm_open(peer_name, O_RDWR, 0600);
      if (pfd < 0) {
        st = SL_ERR(SL_ERR_IO, "%s: cannot open rank %d's shared memory %s: %s", s->tag, r, peer_name, strerror(errno));
        break;
      }
      void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
      close(pfd);
      if (p == MAP_FAILED)
        st = SL_ERR(SL_ERR_NOMEM, "%s: mmap of rank %d's %s failed: %s", s->tag, r, peer_name, strerror(errno));
      else
        s->peers[r] = p;
    }
    /* Unlink only after every rank has mapped every name. */
    sl_status_t as2 = agree(s->comm, st == SL_OK, &all_ok);
    if (st == SL_OK && (as2 != SL_OK || !all_ok))
      st = SL_ERR(SL_ERR_PEER, "%s: a peer failed to map the shared memory", s->tag);
  }
  if (s->local) shm_unlink(name);
  return st;
}

static void destroy_shm(sl_symm_t *s) {
  for (int r = 0; r < s->size; r++)
    if (s->peers[r]) munmap(s->peers[r], s->bytes);
}

/* ---- CUDA backend: IPC ------------------------------------------------------------------ */

#ifdef SLUICE_HAVE_CUDA
static sl_status_t create_ipc(sl_symm_t *s) {
  sl_status_t st = sl_device_malloc(s->dev, s->bytes, &s->local);
  cudaIpcMemHandle_t mine, all[SL_SYMM_MAX_RANKS];
  memset(&mine, 0, sizeof mine);
  if (st == SL_OK) {
    s->peers[s->rank] = s->local;
    cudaError_t err = cudaMemset(s->local, 0, s->bytes);
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaIpcGetMemHandle(&mine, s->local);
    if (err != cudaSuccess)
      st = SL_ERR(SL_ERR_CUDA, "%s: preparing the IPC buffer failed: %s", s->tag, cudaGetErrorString(err));
  }
  int all_ok;
  sl_status_t as = agree(s->comm, st == SL_OK, &all_ok);
  if (st == SL_OK && (as != SL_OK || !all_ok))
    st = SL_ERR(SL_ERR_PEER, "%s: a peer failed to allocate its buffer", s->tag);
  if (st != SL_OK) return st;
  SL_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, s->comm));
  for (int r = 0; r < s->size && st == SL_OK; r++) {
    if (r == s->rank) continue; /* own handle cannot be opened by its own process */
    cudaError_t err = cudaIpcOpenMemHandle(&s->peers[r], all[r], cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      s->peers[r] = NULL;
      st = SL_ERR(SL_ERR_CUDA,
                  "%s: cudaIpcOpenMemHandle of rank %d's buffer failed: %s; are the ranks on one node "
                  "with peer access between their GPUs?",
                  s->tag, r, cudaGetErrorString(err));
    }
  }
  sl_status_t as2 = agree(s->comm, st == SL_OK, &all_ok);
  if (st == SL_OK && (as2 != SL_OK || !all_ok))
    st = SL_ERR(SL_ERR_PEER, "%s: a peer failed to open the IPC handles", s->tag);
  return st;
}

static void destroy_ipc(sl_symm_t *s) {
  for (int r = 0; r < s->size; r++)
    if (r != s->rank && s->peers[r]) cudaIpcCloseMemHandle(s->peers[r]);
  if (s->local) sl_device_free(s->dev, s->local);
}
#endif

/* ---- public ------------------------------------------------------------------------------ */

sl_status_t sl_symm_create(sl_device_t *dev, MPI_Comm comm, size_t bytes, const char *tag, sl_symm_t **out) {
  *out = NULL;
  if (bytes == 0) return SL_ERR(SL_ERR_INVALID, "%s: symmetric buffer of 0 bytes", tag);
  sl_symm_t *s = calloc(1, sizeof *s);
  if (!s) return SL_ERR(SL_ERR_NOMEM, "%s: symmetric buffer descriptor", tag);
  s->dev = dev;
  s->backend = sl_device_backend(dev);
  s->bytes = (bytes + 4095) & ~(size_t)4095;
  snprintf(s->tag, sizeof s->tag, "%s", tag ? tag : "symm");
  sl_status_t st = SL_OK;
  if (MPI_Comm_dup(comm, &s->comm) != MPI_SUCCESS) {
    free(s);
    return SL_ERR(SL_ERR_MPI, "%s: MPI_Comm_dup failed", tag);
  }
  MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s->comm, &s->rank);
  MPI_Comm_size(s->comm, &s->size);
  if (s->size > SL_SYMM_MAX_RANKS) {
    st = SL_ERR(SL_ERR_CAPACITY, "%s: %d ranks on one node, at most %d are supported (SL_SYMM_MAX_RANKS)", s->tag,
                s->size, SL_SYMM_MAX_RANKS);
    goto fail;
  }
  if (s->backend == SL_BACKEND_CPU) {
    if (job_id == 0) {
      /* Job id: rank 0's pid and start time, so two jobs never pick the same names. */
      unsigned long long id = ((unsigned long long)getpid() << 32) ^ (unsigned long long)time(NULL);
      SL_CHECK_GOTO(sl_mpi_status(MPI_Bcast(&id, 1, MPI_UNSIGNED_LONG_LONG, 0, s->comm), "MPI_Bcast(job id)"), st,
                    fail);
      job_id = id ? id : 1;
      SL_CHECK_GOTO(sl_symm_sweep_stale(NULL), st, fail);
    }
    SL_CHECK_GOTO(create_shm(s), st, fail);
  } else {
#ifdef SLUICE_HAVE_CUDA
    SL_CHECK_GOTO(create_ipc(s), st, fail);
#else
    st = SL_ERR(SL_ERR_UNSUPPORTED, "%s: no CUDA backend in this build", s->tag);
    goto fail;
#endif
  }
  SL_LOG_DEBUG("%s: symmetric buffer of %zu bytes on %d ranks", s->tag, s->bytes, s->size);
  *out = s;
  return SL_OK;
fail:
  if (s->backend == SL_BACKEND_CPU) destroy_shm(s);
#ifdef SLUICE_HAVE_CUDA
  else
    destroy_ipc(s);
#endif
  MPI_Comm_free(&s->comm);
  free(s);
  return st;
}

void sl_symm_destroy(sl_symm_t *s) {
  if (!s) return;
  /* Peers may still read this rank's buffer until they are done; wait for them, bounded.
   * Twice the timeout: a peer that is itself timing out on a third rank arrives up to one
   * timeout late. */
  long limit_ms = 2 * sl_config()->timeout_ms;
  bool all_arrived = bounded_barrier(s->comm, limit_ms);
  if (!all_arrived)
    SL_LOG_WARN("%s: not every rank reached the teardown within %ld ms; freeing this rank's memory anyway", s->tag,
                limit_ms);
  if (s->backend == SL_BACKEND_CPU) destroy_shm(s);
#ifdef SLUICE_HAVE_CUDA
  else
    destroy_ipc(s);
#endif
  if (all_arrived) MPI_Comm_free(&s->comm); /* else leaked on purpose: see bounded_barrier */
  free(s);
}
