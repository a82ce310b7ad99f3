/* Device layer: one small interface over the CPU backend and the CUDA backend
 * (memory, copies, streams, events, graphs). Kernels never call CUDA directly. */
#ifndef SL_DEVICE_H
#define SL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "sl_config.h"
#include "sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_BACKEND_CPU = 1, SL_BACKEND_CUDA = 2 } sl_backend_t;

/* Architecture constants, named (compute capability major*10 + minor). */
enum { SL_ARCH_HOPPER = 90, SL_ARCH_BLACKWELL = 100 };

typedef struct sl_device sl_device_t;
typedef struct sl_stream sl_stream_t; /* NULL means the device's default stream */
typedef struct sl_event sl_event_t;
typedef struct sl_graph sl_graph_t;

typedef struct {
  sl_backend_t backend;
  int ordinal;          /* CUDA device index; 0 on CPU */
  int arch;             /* e.g. 90 for sm_90; 0 on CPU */
  int sm_count;         /* multiprocessors; CPU: online cores */
  int max_threads_per_sm;
  size_t shared_mem_per_block_optin;
  size_t total_mem;
  char name[128];
  char pci_bus_id[32];  /* "0000:19:00.0"; "" on CPU */
} sl_device_info_t;

/* Open the backend `kind` (AUTO: CUDA when a GPU is usable, else CPU). The GPU is
 * cfg->cuda_device when >= 0, else local_rank mod #GPUs, so ranks may share one GPU.
 * Asking for CUDA where none is usable fails with SL_ERR_UNSUPPORTED and says why. */
sl_status_t sl_device_open(sl_device_kind_t kind, int local_rank, sl_device_t **out);
void sl_device_close(sl_device_t *dev);
const sl_device_info_t *sl_device_info(const sl_device_t *dev);
static inline sl_backend_t sl_device_backend(const sl_device_t *dev) {
  return sl_device_info(dev)->backend;
}
/* Why CUDA is not usable in this process ("" when it is). */
const char *sl_device_cuda_unavailable_reason(void);

/* Device memory (CPU backend: 256-byte aligned host memory). */
sl_status_t sl_device_malloc(sl_device_t *dev, size_t bytes, void **ptr);
void sl_device_free(sl_device_t *dev, void *ptr);
/* Page-locked host memory mapped into the device's address space; *dev_ptr is the
 * device-side alias (equal to *host_ptr on the CPU backend). For flags and rings. */
sl_status_t sl_host_alloc_mapped(sl_device_t *dev, size_t bytes, void **host_ptr, void **dev_ptr);
void sl_host_free_mapped(sl_device_t *dev, void *host_ptr);

/* Copies in any direction (unified addressing); asynchronous on `stream` on CUDA,
 * immediate on the CPU backend. stream NULL is CUDA's legacy default stream: the streams of
 * sl_stream_create are non-blocking (not ordered after it), and a pageable host -> device
 * copy may still be in flight when the call returns, so sync (sl_device_sync) before another
 * stream reads what a NULL-stream copy or memset wrote. */
sl_status_t sl_memcpy(sl_device_t *dev, void *dst, const void *src, size_t bytes, sl_stream_t *stream);
sl_status_t sl_memset(sl_device_t *dev, void *dst, int byte, size_t bytes, sl_stream_t *stream);

/* Streams and launch cost (H200, CUDA 13; bench/probes/graph_trigger.c): once any stream other than a kernel's own --
 * the legacy NULL stream included -- has carried 8 kernel-class operations (kernels, device copies, memsets of
 * >= 8 KiB), every later short kernel in the process costs ~0.17 us more per launch, in a CUDA graph or not, for
 * good (destroying that stream does not undo it). Multi-stream processes are all in that state; a long kernel or a
 * programmatic dependent launch (sl_launch_t.pdl) hides it. Time decode paths in it (`sluice bench` does). */
sl_status_t sl_stream_create(sl_device_t *dev, sl_stream_t **out);
/* A stream object over a stream someone else owns (a framework's cudaStream_t, e.g. PyTorch's
 * current stream, which may be capturing a CUDA graph): work goes on `native`, and
 * sl_stream_destroy frees only the wrapper, never `native`. NULL wraps CUDA's legacy default
 * stream; on the CPU backend `native` must be NULL. */
sl_status_t sl_stream_wrap(sl_device_t *dev, void *native, sl_stream_t **out);
void sl_stream_destroy(sl_device_t *dev, sl_stream_t *stream);
sl_status_t sl_stream_sync(sl_device_t *dev, sl_stream_t *stream);
/* The backend's handle (cudaStream_t; NULL on CPU), for cuBLAS/NCCL calls. */
void *sl_stream_native(sl_stream_t *stream);
sl_status_t sl_device_sync(sl_device_t *dev);

sl_status_t sl_event_create(sl_device_t *dev, sl_event_t **out);
void sl_event_destroy(sl_device_t *dev, sl_event_t *ev);
sl_status_t sl_event_record(sl_device_t *dev, sl_event_t *ev, sl_stream_t *stream);
sl_status_t sl_event_sync(sl_device_t *dev, sl_event_t *ev);
/* Milliseconds between two recorded events (both must have completed). */
sl_status_t sl_event_elapsed_ms(sl_device_t *dev, sl_event_t *start, sl_event_t *stop, float *ms);

/* CUDA graphs: capture the work issued on `stream` between begin and end, replay it.
 * The CPU backend has no graphs: begin returns SL_ERR_UNSUPPORTED. */
sl_status_t sl_graph_begin_capture(sl_device_t *dev, sl_stream_t *stream);
sl_status_t sl_graph_end_capture(sl_device_t *dev, sl_stream_t *stream, sl_graph_t **out);
sl_status_t sl_graph_launch(sl_device_t *dev, sl_graph_t *graph, sl_stream_t *stream);
void sl_graph_destroy(sl_device_t *dev, sl_graph_t *graph);

/* Check for an asynchronous device error (e.g. a faulting kernel); SL_OK on CPU. */
sl_status_t sl_device_check(sl_device_t *dev, const char *what);

#ifdef __cplusplus
}
#endif
#endif
