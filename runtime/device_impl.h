/* Internal: the device structs shared by device.c, device_cuda.c and jit_launch.c. */
#ifndef SL_DEVICE_IMPL_H
#define SL_DEVICE_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "sl_device.h"
#include "sl_jit.h"

struct sl_kernel {
  struct sl_kernel *next;
  char key[1024];       /* spec description + arch: the memo key */
  uint64_t key_hash;    /* XXH3 of key: compared first on the per-launch lookup */
  char name[128];
  void *module;         /* CUmodule */
  void *function;       /* CUfunction */
  int sm_count;         /* of the device it was loaded on */
  /* Occupancy answers per launch shape, asked of the driver once (launchers size grids on
   * every call). */
  pthread_mutex_t occ_lock;
  int occ_used;
  struct {
    int threads;
    size_t shared;
    int per_sm;
  } occ[8];
  size_t max_shared;    /* dynamic shared bytes allowed so far (sl_kernel_set_max_shared); 0: default */
};

struct sl_device {
  sl_device_info_t info;
  pthread_mutex_t lock;
  struct sl_kernel *kernels; /* loaded kernels, freed at close */
};

struct sl_stream {
  void *native;  /* cudaStream_t */
  bool borrowed; /* sl_stream_wrap: `native` is not ours to destroy */
};
struct sl_event {
  void *native;   /* cudaEvent_t */
  double host_ms; /* CPU backend: time of record */
};
struct sl_graph {
  void *graph; /* cudaGraph_t */
  void *exec;  /* cudaGraphExec_t */
};

/* CUDA backend entry points (device_cuda.c); stubs returning SL_ERR_UNSUPPORTED without CUDA. */
sl_status_t sl_cuda_open(int ordinal_hint, int local_rank, sl_device_info_t *info);
void sl_cuda_close(sl_device_t *dev);
sl_status_t sl_cuda_malloc(size_t bytes, void **ptr);
void sl_cuda_free(void *ptr);
sl_status_t sl_cuda_host_alloc_mapped(size_t bytes, void **host_ptr, void **dev_ptr);
void sl_cuda_host_free(void *host_ptr);
sl_status_t sl_cuda_memcpy(void *dst, const void *src, size_t bytes, void *stream);
sl_status_t sl_cuda_memset(void *dst, int byte, size_t bytes, void *stream);
sl_status_t sl_cuda_stream_create(void **native);
void sl_cuda_stream_destroy(void *native);
sl_status_t sl_cuda_stream_sync(void *native);
sl_status_t sl_cuda_device_sync(void);
sl_status_t sl_cuda_event_create(void **native);
void sl_cuda_event_destroy(void *native);
sl_status_t sl_cuda_event_record(void *native, void *stream);
sl_status_t sl_cuda_event_sync(void *native);
sl_status_t sl_cuda_event_elapsed(void *start, void *stop, float *ms);
sl_status_t sl_cuda_begin_capture(void *stream);
sl_status_t sl_cuda_end_capture(void *stream, struct sl_graph *g);
sl_status_t sl_cuda_graph_launch(struct sl_graph *g, void *stream);
void sl_cuda_graph_destroy(struct sl_graph *g);
sl_status_t sl_cuda_check(const char *what);
const char *sl_cuda_unavailable_reason(void);

#endif
