/* JIT load and launch: cubins loaded with the driver API, launched with cuLaunchKernelEx.
 * The driver's entry points come from cudart (cudaGetDriverEntryPointByVersion), so the
 * binary does not link libcuda and still starts where no driver is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "sl_config.h"
#include "sl_jit.h"
#include "sl_log.h"

const char *sl_kernel_name(const sl_kernel_t *k) { return k->name; }

#ifndef SLUICE_HAVE_CUDA

sl_status_t sl_jit_get_kernel(sl_device_t *dev, const sl_jit_spec_t *spec, sl_kernel_t **out) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "kernel %s: no CUDA backend in this build", spec->entry);
}
sl_status_t sl_kernel_launch(sl_kernel_t *k, const sl_launch_t *launch, void **args) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no CUDA backend in this build");
}
sl_status_t sl_kernel_occupancy(sl_kernel_t *k, int block_threads, size_t shared_bytes, int *blocks_per_sm) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no CUDA backend in this build");
}
sl_status_t sl_kernel_set_max_shared(sl_kernel_t *k, size_t bytes) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no CUDA backend in this build");
}
sl_status_t sl_kernel_resident_blocks(sl_kernel_t *k, int block_threads, size_t shared_bytes, long *blocks) {
  return SL_ERR(SL_ERR_UNSUPPORTED, "no CUDA backend in this build");
}

#else

#include <cuda.h>
#include <cuda_runtime.h>
#include <xxhash.h>

#include "cuda_check.h"

/* The driver functions we use, resolved once. */
static struct {
  int resolved;
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuGetErrorString)(CUresult, const char **);
} drv;

static sl_status_t resolve(const char *sym, void **fn) {
  enum cudaDriverEntryPointQueryResult q;
  cudaError_t err = cudaGetDriverEntryPointByVersion(sym, fn, 12000, cudaEnableDefault, &q);
  if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn)
    return SL_ERR(SL_ERR_CUDA, "driver entry point %s not found (%s)", sym, cudaGetErrorString(err));
  return SL_OK;
}

static sl_status_t resolve_driver(void) {
  if (drv.resolved) return SL_OK;
  SL_CHECK(resolve("cuModuleLoadData", (void **)&drv.cuModuleLoadData));
  SL_CHECK(resolve("cuModuleUnload", (void **)&drv.cuModuleUnload));
  SL_CHECK(resolve("cuModuleGetFunction", (void **)&drv.cuModuleGetFunction));
  SL_CHECK(resolve("cuLaunchKernelEx", (void **)&drv.cuLaunchKernelEx));
  SL_CHECK(resolve("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                   (void **)&drv.cuOccupancyMaxActiveBlocksPerMultiprocessor));
  SL_CHECK(resolve("cuFuncSetAttribute", (void **)&drv.cuFuncSetAttribute));
  SL_CHECK(resolve("cuGetErrorString", (void **)&drv.cuGetErrorString));
  drv.resolved = 1;
  return SL_OK;
}

static sl_status_t cu_status(CUresult r, const char *what, const char *name) {
  if (r == CUDA_SUCCESS) return SL_OK;
  const char *msg = "unknown";
  if (drv.cuGetErrorString) drv.cuGetErrorString(r, &msg);
  return SL_ERR(SL_ERR_CUDA, "%s (kernel %s): %s (CUresult %d)", what, name, msg, (int)r);
}

sl_status_t sl_jit_get_kernel(sl_device_t *dev, const sl_jit_spec_t *spec, sl_kernel_t **out) {
  if (dev->info.backend != SL_BACKEND_CUDA)
    return SL_ERR(SL_ERR_UNSUPPORTED, "kernel %s: the device is not a CUDA device", spec->entry);
  SL_CHECK(resolve_driver());
  char key[1024];
  sl_jit_spec_describe(spec, key, sizeof key - 32);
  size_t kl = strlen(key);
  snprintf(key + kl, sizeof key - kl, "@%s@sm_%d", spec->source, dev->info.arch);

  kl += strlen(key + kl);
  const uint64_t hash = XXH3_64bits(key, kl);

  pthread_mutex_lock(&dev->lock);
  for (sl_kernel_t **link = &dev->kernels, *k; (k = *link) != NULL; link = &k->next)
    if (k->key_hash == hash && strcmp(k->key, key) == 0) {
      if (link != &dev->kernels) { /* most recently used first: a layer's few kernels stay in front */
        *link = k->next;
        k->next = dev->kernels;
        dev->kernels = k;
      }
      pthread_mutex_unlock(&dev->lock);
      *out = k;
      return SL_OK;
    }
  pthread_mutex_unlock(&dev->lock);

  void *cubin = NULL;
  size_t size = 0;
  sl_jit_result_t res;
  SL_CHECK(sl_jit_compile(spec, dev->info.arch, &cubin, &size, &res));
  SL_LOG_DEBUG("kernel %s: %s (%.1f ms)", key, res.cache_hit ? "cache hit" : "compiled", res.compile_ms);
  sl_kernel_t *k = calloc(1, sizeof *k);
  if (!k) {
    free(cubin);
    return SL_ERR(SL_ERR_NOMEM, "kernel handle");
  }
  snprintf(k->key, sizeof k->key, "%s", key);
  k->key_hash = hash;
  snprintf(k->name, sizeof k->name, "%s", spec->entry);
  cudaSetDevice(dev->info.ordinal); /* makes the primary context current on this thread */
  CUmodule mod;
  sl_status_t s = cu_status(drv.cuModuleLoadData(&mod, cubin), "cuModuleLoadData", spec->entry);
  free(cubin);
  if (s != SL_OK) {
    free(k);
    return s;
  }
  CUfunction fn;
  s = cu_status(drv.cuModuleGetFunction(&fn, mod, spec->entry), "cuModuleGetFunction", spec->entry);
  if (s != SL_OK) {
    drv.cuModuleUnload(mod);
    free(k);
    return s;
  }
  k->module = mod;
  k->function = fn;
  k->sm_count = dev->info.sm_count;
  pthread_mutex_init(&k->occ_lock, NULL);
  pthread_mutex_lock(&dev->lock);
  k->next = dev->kernels;
  dev->kernels = k;
  pthread_mutex_unlock(&dev->lock);
  *out = k;
  return SL_OK;
}

void sl_cuda_close(sl_device_t *dev) {
  for (sl_kernel_t *k = dev->kernels, *next; k; k = next) {
    next = k->next;
    if (drv.cuModuleUnload) drv.cuModuleUnload((CUmodule)k->module);
    pthread_mutex_destroy(&k->occ_lock);
    free(k);
  }
  dev->kernels = NULL;
}

sl_status_t sl_kernel_occupancy(sl_kernel_t *k, int block_threads, size_t shared_bytes, int *blocks_per_sm) {
  pthread_mutex_lock(&k->occ_lock);
  for (int i = 0; i < k->occ_used; i++)
    if (k->occ[i].threads == block_threads && k->occ[i].shared == shared_bytes) {
      *blocks_per_sm = k->occ[i].per_sm;
      pthread_mutex_unlock(&k->occ_lock);
      return SL_OK;
    }
  pthread_mutex_unlock(&k->occ_lock);
  SL_CHECK(cu_status(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, (CUfunction)k->function,
                                                                      block_threads, shared_bytes),
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor", k->name));
  pthread_mutex_lock(&k->occ_lock);
  int slot = k->occ_used < 8 ? k->occ_used++ : 7; /* launchers use one or two shapes per kernel */
  k->occ[slot].threads = block_threads;
  k->occ[slot].shared = shared_bytes;
  k->occ[slot].per_sm = *blocks_per_sm;
  pthread_mutex_unlock(&k->occ_lock);
  return SL_OK;
}

sl_status_t sl_kernel_resident_blocks(sl_kernel_t *k, int block_threads, size_t shared_bytes, long *blocks) {
  int per_sm = 0;
  SL_CHECK(sl_kernel_occupancy(k, block_threads, shared_bytes, &per_sm));
  *blocks = (long)per_sm * k->sm_count;
  return SL_OK;
}

sl_status_t sl_kernel_set_max_shared(sl_kernel_t *k, size_t bytes) {
  /* Launchers call this before every launch: the driver is asked only when the size grows
   * (an attribute set, not a stream operation: also fine during graph capture). */
  pthread_mutex_lock(&k->occ_lock);
  const bool done = bytes <= k->max_shared;
  pthread_mutex_unlock(&k->occ_lock);
  if (done) return SL_OK;
  SL_CHECK(cu_status(drv.cuFuncSetAttribute((CUfunction)k->function,
                                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes),
                     "cuFuncSetAttribute(max dynamic shared)", k->name));
  pthread_mutex_lock(&k->occ_lock);
  if (bytes > k->max_shared) k->max_shared = bytes;
  /* Occupancy answers for shapes above the old limit were computed without this opt-in. */
  k->occ_used = 0;
  pthread_mutex_unlock(&k->occ_lock);
  return SL_OK;
}

sl_status_t sl_kernel_launch(sl_kernel_t *k, const sl_launch_t *l, void **args) {
  unsigned blocks = l->grid[0] * (l->grid[1] ? l->grid[1] : 1) * (l->grid[2] ? l->grid[2] : 1);
  unsigned threads = l->block[0] * (l->block[1] ? l->block[1] : 1) * (l->block[2] ? l->block[2] : 1);
  if (blocks == 0 || threads == 0 || threads > 1024)
    return SL_ERR(SL_ERR_INVALID, "kernel %s: bad launch shape grid=%u block=%u", k->name, blocks, threads);
  CUlaunchAttribute attrs[2];
  unsigned nattrs = 0;
  if (l->cooperative) {
    /* A grid barrier deadlocks unless every block is resident: refuse such a grid. */
    long resident = 0;
    SL_CHECK(sl_kernel_resident_blocks(k, (int)threads, l->shared_bytes, &resident));
    if ((long)blocks > resident)
      return SL_ERR(SL_ERR_INVALID,
                    "kernel %s: cooperative grid of %u blocks exceeds the %ld blocks that can be co-resident (%d SMs)",
                    k->name, blocks, resident, k->sm_count);
    attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[nattrs].value.cooperative = 1;
    nattrs++;
  }
  if (l->pdl) {
    attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[nattrs].value.programmaticStreamSerializationAllowed = 1;
    nattrs++;
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = l->grid[0];
  cfg.gridDimY = l->grid[1] ? l->grid[1] : 1;
  cfg.gridDimZ = l->grid[2] ? l->grid[2] : 1;
  cfg.blockDimX = l->block[0];
  cfg.blockDimY = l->block[1] ? l->block[1] : 1;
  cfg.blockDimZ = l->block[2] ? l->block[2] : 1;
  cfg.sharedMemBytes = l->shared_bytes;
  cfg.hStream = (CUstream)sl_stream_native(l->stream);
  cfg.attrs = nattrs ? attrs : NULL;
  cfg.numAttrs = nattrs;
  return cu_status(drv.cuLaunchKernelEx(&cfg, (CUfunction)k->function, args, NULL), "cuLaunchKernelEx", k->name);
}

#endif
