/* CUDA backend of the device layer (runtime API). Without CUDA in the build every entry
 * reports SL_ERR_UNSUPPORTED, so the CPU backend is all that remains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "sl_log.h"

static char unavailable[256] = "";

const char *sl_cuda_unavailable_reason(void) { return unavailable; }

#ifndef SLUICE_HAVE_CUDA

sl_status_t sl_cuda_open(int hint, int local_rank, sl_device_info_t *info) {
  snprintf(unavailable, sizeof unavailable, "this build has no CUDA backend (configured with SLUICE_CUDA=OFF or no toolkit)");
  return SL_ERR_UNSUPPORTED;
}
void sl_cuda_close(sl_device_t *dev) {}
#define SL_NO_CUDA return SL_ERR(SL_ERR_UNSUPPORTED, "no CUDA backend in this build")
sl_status_t sl_cuda_malloc(size_t bytes, void **ptr) { SL_NO_CUDA; }
void sl_cuda_free(void *ptr) {}
sl_status_t sl_cuda_host_alloc_mapped(size_t bytes, void **host_ptr, void **dev_ptr) { SL_NO_CUDA; }
void sl_cuda_host_free(void *host_ptr) {}
sl_status_t sl_cuda_memcpy(void *dst, const void *src, size_t bytes, void *stream) { SL_NO_CUDA; }
sl_status_t sl_cuda_memset(void *dst, int byte, size_t bytes, void *stream) { SL_NO_CUDA; }
sl_status_t sl_cuda_stream_create(void **native) { SL_NO_CUDA; }
void sl_cuda_stream_destroy(void *native) {}
sl_status_t sl_cuda_stream_sync(void *native) { SL_NO_CUDA; }
sl_status_t sl_cuda_device_sync(void) { SL_NO_CUDA; }
sl_status_t sl_cuda_event_create(void **native) { SL_NO_CUDA; }
void sl_cuda_event_destroy(void *native) {}
sl_status_t sl_cuda_event_record(void *native, void *stream) { SL_NO_CUDA; }
sl_status_t sl_cuda_event_sync(void *native) { SL_NO_CUDA; }
sl_status_t sl_cuda_event_elapsed(void *start, void *stop, float *ms) { SL_NO_CUDA; }
sl_status_t sl_cuda_begin_capture(void *stream) { SL_NO_CUDA; }
sl_status_t sl_cuda_end_capture(void *stream, struct sl_graph *g) { SL_NO_CUDA; }
sl_status_t sl_cuda_graph_launch(struct sl_graph *g, void *stream) { SL_NO_CUDA; }
void sl_cuda_graph_destroy(struct sl_graph *g) {}
sl_status_t sl_cuda_check(const char *what) { return SL_OK; }

#else

#include <cuda_runtime.h>

#include "cuda_check.h"

sl_status_t sl_cuda_status(cudaError_t err, const char *call, const char *file, int line) {
  if (err == cudaSuccess) return SL_OK;
  return sl_error_raise(SL_ERR_CUDA, file, line, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                        cudaGetErrorName(err));
}

sl_status_t sl_cuda_open(int hint, int local_rank, sl_device_info_t *info) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    snprintf(unavailable, sizeof unavailable, "%s",
             err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA devices");
    cudaGetLastError();
    return SL_ERR_UNSUPPORTED; /* not an error under SL_DEVICE=auto; sl_device_open decides */
  }
  int ordinal = hint >= 0 ? hint : local_rank % count;
  if (ordinal >= count)
    return SL_ERR(SL_ERR_INVALID, "SL_CUDA_DEVICE=%d but only %d GPU(s) are visible", ordinal, count);
  SL_CUDA_CHECK(cudaSetDevice(ordinal));
  struct cudaDeviceProp prop;
  SL_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  memset(info, 0, sizeof *info);
  info->backend = SL_BACKEND_CUDA;
  info->ordinal = ordinal;
  info->arch = prop.major * 10 + prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  info->shared_mem_per_block_optin = prop.sharedMemPerBlockOptin;
  info->total_mem = prop.totalGlobalMem;
  snprintf(info->name, sizeof info->name, "%s", prop.name);
  cudaDeviceGetPCIBusId(info->pci_bus_id, sizeof info->pci_bus_id, ordinal);
  /* Force context creation now so later driver-API calls find the primary context. */
  SL_CUDA_CHECK(cudaFree(NULL));
  return SL_OK;
}

sl_status_t sl_cuda_malloc(size_t bytes, void **ptr) {
  cudaError_t err = cudaMalloc(ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return SL_ERR(SL_ERR_NOMEM, "cudaMalloc of %zu bytes: out of device memory", bytes);
  }
  SL_CUDA_CHECK(err);
  return SL_OK;
}
void sl_cuda_free(void *ptr) { cudaFree(ptr); }

sl_status_t sl_cuda_host_alloc_mapped(size_t bytes, void **host_ptr, void **dev_ptr) {
  SL_CUDA_CHECK(cudaHostAlloc(host_ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(*host_ptr, 0, bytes);
  SL_CUDA_CHECK(cudaHostGetDevicePointer(dev_ptr, *host_ptr, 0));
  return SL_OK;
}
void sl_cuda_host_free(void *host_ptr) { cudaFreeHost(host_ptr); }

sl_status_t sl_cuda_memcpy(void *dst, const void *src, size_t bytes, void *stream) {
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
  return SL_OK;
}
sl_status_t sl_cuda_memset(void *dst, int byte, size_t bytes, void *stream) {
  SL_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, (cudaStream_t)stream));
  return SL_OK;
}
sl_status_t sl_cuda_stream_create(void **native) {
  SL_CUDA_CHECK(cudaStreamCreateWithFlags((cudaStream_t *)native, cudaStreamNonBlocking));
  return SL_OK;
}
void sl_cuda_stream_destroy(void *native) { cudaStreamDestroy((cudaStream_t)native); }
sl_status_t sl_cuda_stream_sync(void *native) {
  SL_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)native));
  return SL_OK;
}
sl_status_t sl_cuda_device_sync(void) {
  SL_CUDA_CHECK(cudaDeviceSynchronize());
  return SL_OK;
}
sl_status_t sl_cuda_event_create(void **native) {
  SL_CUDA_CHECK(cudaEventCreate((cudaEvent_t *)native));
  return SL_OK;
}
void sl_cuda_event_destroy(void *native) { cudaEventDestroy((cudaEvent_t)native); }
sl_status_t sl_cuda_event_record(void *native, void *stream) {
  SL_CUDA_CHECK(cudaEventRecord((cudaEvent_t)native, (cudaStream_t)stream));
  return SL_OK;
}
sl_status_t sl_cuda_event_sync(void *native) {
  SL_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)native));
  return SL_OK;
}
sl_status_t sl_cuda_event_elapsed(void *start, void *stop, float *ms) {
  SL_CUDA_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
  return SL_OK;
}
sl_status_t sl_cuda_begin_capture(void *stream) {
  SL_CUDA_CHECK(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal));
  return SL_OK;
}
sl_status_t sl_cuda_end_capture(void *stream, struct sl_graph *g) {
  cudaGraph_t graph;
  SL_CUDA_CHECK(cudaStreamEndCapture((cudaStream_t)stream, &graph));
  cudaGraphExec_t exec;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    cudaGraphDestroy(graph);
    SL_CUDA_CHECK(err);
  }
  g->graph = graph;
  g->exec = exec;
  return SL_OK;
}
sl_status_t sl_cuda_graph_launch(struct sl_graph *g, void *stream) {
  SL_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)g->exec, (cudaStream_t)stream));
  return SL_OK;
}
void sl_cuda_graph_destroy(struct sl_graph *g) {
  if (g->exec) cudaGraphExecDestroy((cudaGraphExec_t)g->exec);
  if (g->graph) cudaGraphDestroy((cudaGraph_t)g->graph);
}
sl_status_t sl_cuda_check(const char *what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    return SL_ERR(SL_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
  return SL_OK;
}

#endif
