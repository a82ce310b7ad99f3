/* Device layer: backend selection, and the CPU backend (host memory, immediate streams). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device_impl.h"
#include "sl_log.h"

/* CPU "device memory" is host memory aligned like cudaMalloc's, so vector code is valid. */
enum { SL_CPU_ALIGN = 256 };

const char *sl_device_cuda_unavailable_reason(void) { return sl_cuda_unavailable_reason(); }

static void open_cpu(sl_device_info_t *info) {
  memset(info, 0, sizeof *info);
  info->backend = SL_BACKEND_CPU;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  info->sm_count = cores > 0 ? (int)cores : 1;
  snprintf(info->name, sizeof info->name, "cpu (%d cores)", info->sm_count);
}

sl_status_t sl_device_open(sl_device_kind_t kind, int local_rank, sl_device_t **out) {
  sl_device_t *dev = calloc(1, sizeof *dev);
  if (!dev) return SL_ERR(SL_ERR_NOMEM, "device handle");
  pthread_mutex_init(&dev->lock, NULL);
  sl_status_t s = SL_OK;
  if (kind == SL_DEVICE_CPU) {
    open_cpu(&dev->info);
  } else {
    int hint = sl_config()->cuda_device;
    s = sl_cuda_open(hint, local_rank, &dev->info);
    if (s != SL_OK && kind == SL_DEVICE_AUTO) {
      SL_LOG_INFO("no usable GPU (%s): using the CPU backend", sl_cuda_unavailable_reason());
      sl_clear_error();
      open_cpu(&dev->info);
      s = SL_OK;
    } else if (s == SL_ERR_UNSUPPORTED) {
      s = SL_ERR(SL_ERR_UNSUPPORTED, "SL_DEVICE=cuda but no GPU is usable: %s", sl_cuda_unavailable_reason());
    }
  }
  if (s != SL_OK) {
    pthread_mutex_destroy(&dev->lock);
    free(dev);
    return s;
  }
  *out = dev;
  return SL_OK;
}

void sl_device_close(sl_device_t *dev) {
  if (!dev) return;
  if (dev->info.backend == SL_BACKEND_CUDA) sl_cuda_close(dev);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

const sl_device_info_t *sl_device_info(const sl_device_t *dev) { return &dev->info; }

static int is_cuda(const sl_device_t *dev) { return dev->info.backend == SL_BACKEND_CUDA; }

sl_status_t sl_device_malloc(sl_device_t *dev, size_t bytes, void **ptr) {
  *ptr = NULL;
  if (bytes == 0) bytes = 1;
  if (is_cuda(dev)) return sl_cuda_malloc(bytes, ptr);
  size_t rounded = (bytes + SL_CPU_ALIGN - 1) / SL_CPU_ALIGN * SL_CPU_ALIGN;
  *ptr = aligned_alloc(SL_CPU_ALIGN, rounded);
  if (!*ptr) return SL_ERR(SL_ERR_NOMEM, "cannot allocate %zu bytes of (CPU) device memory", bytes);
  return SL_OK;
}

void sl_device_free(sl_device_t *dev, void *ptr) {
  if (!ptr) return;
  if (is_cuda(dev))
    sl_cuda_free(ptr);
  else
    free(ptr);
}

sl_status_t sl_host_alloc_mapped(sl_device_t *dev, size_t bytes, void **host_ptr, void **dev_ptr) {
  if (is_cuda(dev)) return sl_cuda_host_alloc_mapped(bytes, host_ptr, dev_ptr);
  SL_CHECK(sl_device_malloc(dev, bytes, host_ptr));
  *dev_ptr = *host_ptr;
  return SL_OK;
}

void sl_host_free_mapped(sl_device_t *dev, void *host_ptr) {
  if (!host_ptr) return;
  if (is_cuda(dev))
    sl_cuda_host_free(host_ptr);
  else
    free(host_ptr);
}

sl_status_t sl_memcpy(sl_device_t *dev, void *dst, const void *src, size_t bytes, sl_stream_t *stream) {
  if (bytes == 0) return SL_OK;
  if (is_cuda(dev)) return sl_cuda_memcpy(dst, src, bytes, stream ? stream->native : NULL);
  memmove(dst, src, bytes);
  return SL_OK;
}

sl_status_t sl_memset(sl_device_t *dev, void *dst, int byte, size_t bytes, sl_stream_t *stream) {
  if (bytes == 0) return SL_OK;
  if (is_cuda(dev)) return sl_cuda_memset(dst, byte, bytes, stream ? stream->native : NULL);
  memset(dst, byte, bytes);
  return SL_OK;
}

sl_status_t sl_stream_create(sl_device_t *dev, sl_stream_t **out) {
  sl_stream_t *s = calloc(1, sizeof *s);
  if (!s) return SL_ERR(SL_ERR_NOMEM, "stream");
  if (is_cuda(dev)) {
    sl_status_t st = sl_cuda_stream_create(&s->native);
    if (st != SL_OK) {
      free(s);
      return st;
    }
  }
  *out = s;
  return SL_OK;
}

sl_status_t sl_stream_wrap(sl_device_t *dev, void *native, sl_stream_t **out) {
  if (native && !is_cuda(dev)) return SL_ERR(SL_ERR_INVALID, "stream wrap: a native stream on the CPU backend");
  sl_stream_t *s = calloc(1, sizeof *s);
  if (!s) return SL_ERR(SL_ERR_NOMEM, "stream");
  s->native = native;
  s->borrowed = true;
  *out = s;
  return SL_OK;
}

void sl_stream_destroy(sl_device_t *dev, sl_stream_t *stream) {
  if (!stream) return;
  if (is_cuda(dev) && !stream->borrowed) sl_cuda_stream_destroy(stream->native);
  free(stream);
}

sl_status_t sl_stream_sync(sl_device_t *dev, sl_stream_t *stream) {
  if (is_cuda(dev)) return sl_cuda_stream_sync(stream ? stream->native : NULL);
  return SL_OK;
}

void *sl_stream_native(sl_stream_t *stream) { return stream ? stream->native : NULL; }

sl_status_t sl_device_sync(sl_device_t *dev) { return is_cuda(dev) ? sl_cuda_device_sync() : SL_OK; }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

sl_status_t sl_event_create(sl_device_t *dev, sl_event_t **out) {
  sl_event_t *e = calloc(1, sizeof *e);
  if (!e) return SL_ERR(SL_ERR_NOMEM, "event");
  if (is_cuda(dev)) {
    sl_status_t st = sl_cuda_event_create(&e->native);
    if (st != SL_OK) {
      free(e);
      return st;
    }
  }
  *out = e;
  return SL_OK;
}

void sl_event_destroy(sl_device_t *dev, sl_event_t *ev) {
  if (!ev) return;
  if (is_cuda(dev)) sl_cuda_event_destroy(ev->native);
  free(ev);
}

sl_status_t sl_event_record(sl_device_t *dev, sl_event_t *ev, sl_stream_t *stream) {
  if (is_cuda(dev)) return sl_cuda_event_record(ev->native, stream ? stream->native : NULL);
  ev->host_ms = now_ms();
  return SL_OK;
}

sl_status_t sl_event_sync(sl_device_t *dev, sl_event_t *ev) {
  return is_cuda(dev) ? sl_cuda_event_sync(ev->native) : SL_OK;
}

sl_status_t sl_event_elapsed_ms(sl_device_t *dev, sl_event_t *start, sl_event_t *stop, float *ms) {
  if (is_cuda(dev)) return sl_cuda_event_elapsed(start->native, stop->native, ms);
  *ms = (float)(stop->host_ms - start->host_ms);
  return SL_OK;
}

sl_status_t sl_graph_begin_capture(sl_device_t *dev, sl_stream_t *stream) {
  if (!is_cuda(dev)) return SL_ERR(SL_ERR_UNSUPPORTED, "the CPU backend has no graphs");
  if (!stream) return SL_ERR(SL_ERR_INVALID, "graph capture needs a created stream, not the default one");
  return sl_cuda_begin_capture(stream->native);
}

sl_status_t sl_graph_end_capture(sl_device_t *dev, sl_stream_t *stream, sl_graph_t **out) {
  if (!is_cuda(dev)) return SL_ERR(SL_ERR_UNSUPPORTED, "the CPU backend has no graphs");
  sl_graph_t *g = calloc(1, sizeof *g);
  if (!g) return SL_ERR(SL_ERR_NOMEM, "graph");
  sl_status_t s = sl_cuda_end_capture(stream->native, g);
  if (s != SL_OK) {
    free(g);
    return s;
  }
  *out = g;
  return SL_OK;
}

sl_status_t sl_graph_launch(sl_device_t *dev, sl_graph_t *graph, sl_stream_t *stream) {
  if (!is_cuda(dev)) return SL_ERR(SL_ERR_UNSUPPORTED, "the CPU backend has no graphs");
  return sl_cuda_graph_launch(graph, stream ? stream->native : NULL);
}

void sl_graph_destroy(sl_device_t *dev, sl_graph_t *graph) {
  if (!graph) return;
  if (is_cuda(dev)) sl_cuda_graph_destroy(graph);
  free(graph);
}

sl_status_t sl_device_check(sl_device_t *dev, const char *what) {
  return is_cuda(dev) ? sl_cuda_check(what) : SL_OK;
}
