/* NVLS multicast buffers (host side). UNTESTED ON HARDWARE; runs only with SL_NVLS=1.
 * Multicast handles are POSIX file descriptors: rank 0 creates the object and exports an fd,
 * the others duplicate it with pidfd_getfd (Linux >= 5.6, same user), import it, and every
 * rank adds its device, binds its own physical memory and maps the multicast range. */
#include "comm/nvls.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/sl_log.h"

sl_status_t sl_nvls_spec(sl_jit_spec_t *spec, sl_dtype_t dtype, int threads) {
  if (dtype != SL_DTYPE_F32 && dtype != SL_DTYPE_BF16 && dtype != SL_DTYPE_F16)
    return SL_ERR(SL_ERR_INVALID, "NVLS all-reduce of %s: only f32, bf16, f16", sl_dtype_name(dtype));
  sl_jit_spec_init(spec, "comm/nvls.cu", "sl_nvls_allreduce");
  SL_CHECK(sl_jit_spec_define(spec, "AR_DTYPE", "%d", (int)dtype));
  SL_CHECK(sl_jit_spec_define(spec, "AR_THREADS", "%d", threads));
  SL_CHECK(sl_jit_spec_define(spec, "AR_VEC", "%d", 16 / (int)sl_dtype_bytes(dtype, 1)));
  return SL_OK;
}

sl_status_t sl_nvls_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user) {
  if (arch < SL_ARCH_HOPPER) return SL_OK; /* multimem needs sm_90 */
  static const sl_dtype_t dtypes[] = {SL_DTYPE_BF16, SL_DTYPE_F16, SL_DTYPE_F32};
  for (int d = 0; d < 3; d++) {
    sl_jit_spec_t spec;
    SL_CHECK(sl_nvls_spec(&spec, dtypes[d], 512));
    SL_CHECK(fn(&spec, user));
  }
  return SL_OK;
}

#if !defined(SLUICE_HAVE_CUDA)

sl_status_t sl_nvls_create(const sl_config_t *cfg, sl_device_t *dev, MPI_Comm comm, size_t bytes, sl_nvls_t **out) {
  *out = NULL;
  return SL_ERR(SL_ERR_UNSUPPORTED, "NVLS: no CUDA backend in this build");
}
void sl_nvls_destroy(sl_nvls_t *n) {
  (void)n;
}
void *sl_nvls_multicast(const sl_nvls_t *n) {
  return NULL;
}
void *sl_nvls_unicast(const sl_nvls_t *n) {
  return NULL;
}

#else

#include <cuda.h>
#include <cuda_runtime.h>

struct sl_nvls {
  size_t bytes;
  CUmemGenericAllocationHandle mc, mem;
  CUdeviceptr mc_va, uc_va;
  int device;
  bool have_mc, have_mem, mc_mapped, uc_mapped, bound;
};

static struct {
  int resolved;
  CUresult (*cuMulticastGetGranularity)(size_t *, const CUmulticastObjectProp *, CUmulticastGranularity_flags);
  CUresult (*cuMulticastCreate)(CUmemGenericAllocationHandle *, const CUmulticastObjectProp *);
  CUresult (*cuMulticastAddDevice)(CUmemGenericAllocationHandle, CUdevice);
  CUresult (*cuMulticastBindMem)(CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t, size_t,
                                 unsigned long long);
  CUresult (*cuMulticastUnbind)(CUmemGenericAllocationHandle, CUdevice, size_t, size_t);
  CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                           unsigned long long);
  CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
  CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
} drv;

static sl_status_t resolve(const char *sym, void **fn) {
  enum cudaDriverEntryPointQueryResult q;
  cudaError_t err = cudaGetDriverEntryPointByVersion(sym, fn, 12010, cudaEnableDefault, &q);
  if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn)
    return SL_ERR(SL_ERR_UNSUPPORTED, "NVLS: driver entry point %s not found (driver too old?)", sym);
  return SL_OK;
}

static sl_status_t resolve_driver(void) {
  if (drv.resolved) return SL_OK;
#define SL_RESOLVE(name) SL_CHECK(resolve(#name, (void **)&drv.name))
  SL_RESOLVE(cuMulticastGetGranularity);
  SL_RESOLVE(cuMulticastCreate);
  SL_RESOLVE(cuMulticastAddDevice);
  SL_RESOLVE(cuMulticastBindMem);
  SL_RESOLVE(cuMulticastUnbind);
  SL_RESOLVE(cuMemExportToShareableHandle);
  SL_RESOLVE(cuMemImportFromShareableHandle);
  SL_RESOLVE(cuMemCreate);
  SL_RESOLVE(cuMemRelease);
  SL_RESOLVE(cuMemAddressReserve);
  SL_RESOLVE(cuMemAddressFree);
  SL_RESOLVE(cuMemMap);
  SL_RESOLVE(cuMemUnmap);
  SL_RESOLVE(cuMemSetAccess);
  SL_RESOLVE(cuDeviceGetAttribute);
#undef SL_RESOLVE
  drv.resolved = 1;
  return SL_OK;
}

#define SL_CU(call)                                                                                                    \
  do {                                                                                                                 \
    CUresult r_ = (call);                                                                                              \
    if (r_ != CUDA_SUCCESS) return SL_ERR(SL_ERR_CUDA, "NVLS: %s failed (CUresult %d)", #call, (int)r_);               \
  } while (0)

/* Agree that every rank succeeded so far; a failure anywhere fails everywhere. */
static sl_status_t agree(MPI_Comm comm, sl_status_t mine) {
  int ok = mine == SL_OK, all = 0;
  SL_MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm));
  if (mine != SL_OK) return mine;
  return all ? SL_OK : SL_ERR(SL_ERR_PEER, "NVLS: a peer failed to set up the multicast buffer");
}

static sl_status_t setup(sl_nvls_t *n, sl_device_t *dev, MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  n->device = sl_device_info(dev)->ordinal;
  sl_status_t st = resolve_driver();
  if (st == SL_OK) {
    int supported = 0;
    if (drv.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, n->device) != CUDA_SUCCESS ||
        !supported)
      st = SL_ERR(SL_ERR_UNSUPPORTED, "NVLS: GPU %d does not support multicast objects", n->device);
  }
  SL_CHECK(agree(comm, st));

  CUmulticastObjectProp mp;
  memset(&mp, 0, sizeof mp);
  mp.numDevices = (unsigned)size;
  mp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  SL_CU(drv.cuMulticastGetGranularity(&gran, &mp, CU_MULTICAST_GRANULARITY_RECOMMENDED));
  n->bytes = (n->bytes + gran - 1) / gran * gran;
  mp.size = n->bytes;

  /* Rank 0 creates the object (the only cuMulticastCreate; reached only with SL_NVLS=1). */
  long owner[2] = {(long)getpid(), -1};
  st = SL_OK;
  if (rank == 0) {
    int fd = -1;
    if (drv.cuMulticastCreate(&n->mc, &mp) != CUDA_SUCCESS)
      st = SL_ERR(SL_ERR_CUDA, "NVLS: cuMulticastCreate of %zu bytes failed", n->bytes);
    else if ((n->have_mc = true, drv.cuMemExportToShareableHandle(&fd, n->mc, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                                  0)) != CUDA_SUCCESS)
      st = SL_ERR(SL_ERR_CUDA, "NVLS: exporting the multicast handle failed");
    owner[1] = fd;
  }
  SL_CHECK(agree(comm, st));
  SL_MPI_CHECK(MPI_Bcast(owner, 2, MPI_LONG, 0, comm));
  if (rank != 0) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)owner[0], 0);
    int fd = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, (int)owner[1], 0) : -1;
    if (pidfd >= 0) close(pidfd);
    if (fd < 0)
      st = SL_ERR(SL_ERR_UNSUPPORTED, "NVLS: cannot duplicate rank 0's multicast fd (pidfd_getfd needs Linux >= 5.6 "
                                      "and ptrace permission over rank 0)");
    else if (drv.cuMemImportFromShareableHandle(&n->mc, (void *)(long)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) !=
             CUDA_SUCCESS)
      st = SL_ERR(SL_ERR_CUDA, "NVLS: importing the multicast handle failed");
    else
      n->have_mc = true;
    if (fd >= 0) close(fd);
#else
    st = SL_ERR(SL_ERR_UNSUPPORTED, "NVLS: this system has no pidfd_getfd to share the multicast handle");
#endif
  }
  SL_CHECK(agree(comm, st));
  st = drv.cuMulticastAddDevice(n->mc, n->device) == CUDA_SUCCESS
           ? SL_OK
           : SL_ERR(SL_ERR_CUDA, "NVLS: cuMulticastAddDevice(GPU %d) failed", n->device);
  /* Every device must be added before memory is bound. */
  SL_CHECK(agree(comm, st));

  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.location.id = n->device;
  ap.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  SL_CU(drv.cuMemCreate(&n->mem, n->bytes, &ap, 0));
  n->have_mem = true;
  SL_CU(drv.cuMulticastBindMem(n->mc, 0, n->mem, 0, n->bytes, 0));
  n->bound = true;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = n->device;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  SL_CU(drv.cuMemAddressReserve(&n->uc_va, n->bytes, gran, 0, 0));
  SL_CU(drv.cuMemMap(n->uc_va, n->bytes, 0, n->mem, 0));
  n->uc_mapped = true;
  SL_CU(drv.cuMemSetAccess(n->uc_va, n->bytes, &acc, 1));
  SL_CU(drv.cuMemAddressReserve(&n->mc_va, n->bytes, gran, 0, 0));
  SL_CU(drv.cuMemMap(n->mc_va, n->bytes, 0, n->mc, 0));
  n->mc_mapped = true;
  SL_CU(drv.cuMemSetAccess(n->mc_va, n->bytes, &acc, 1));
  if (cudaMemset((void *)n->uc_va, 0, n->bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
    return SL_ERR(SL_ERR_CUDA, "NVLS: clearing the multicast buffer failed");
  return SL_OK;
}

sl_status_t sl_nvls_create(const sl_config_t *cfg, sl_device_t *dev, MPI_Comm comm, size_t bytes, sl_nvls_t **out) {
  *out = NULL;
  /* The policy gate: no driver call of any kind below this line without SL_NVLS=1. */
  if (!cfg->nvls) return SL_ERR(SL_ERR_UNSUPPORTED, "NVLS is disabled (SL_NVLS=0, the default)");
  if (sl_device_backend(dev) != SL_BACKEND_CUDA) return SL_ERR(SL_ERR_UNSUPPORTED, "NVLS needs the CUDA backend");
  SL_LOG_WARN("SL_NVLS=1: creating an NVLink multicast object; this path is UNTESTED on hardware");
  sl_nvls_t *n = calloc(1, sizeof *n);
  if (!n) return SL_ERR(SL_ERR_NOMEM, "NVLS descriptor");
  n->bytes = bytes;
  sl_status_t st = setup(n, dev, comm);
  sl_status_t all = agree(comm, st);
  if (all != SL_OK) {
    sl_nvls_destroy(n);
    return all;
  }
  *out = n;
  return SL_OK;
}

void sl_nvls_destroy(sl_nvls_t *n) {
  if (!n) return;
  if (n->mc_mapped) drv.cuMemUnmap(n->mc_va, n->bytes);
  if (n->mc_va) drv.cuMemAddressFree(n->mc_va, n->bytes);
  if (n->uc_mapped) drv.cuMemUnmap(n->uc_va, n->bytes);
  if (n->uc_va) drv.cuMemAddressFree(n->uc_va, n->bytes);
  if (n->bound) drv.cuMulticastUnbind(n->mc, n->device, 0, n->bytes);
  if (n->have_mem) drv.cuMemRelease(n->mem);
  if (n->have_mc) drv.cuMemRelease(n->mc);
  free(n);
}

void *sl_nvls_multicast(const sl_nvls_t *n) {
  return (void *)n->mc_va;
}
void *sl_nvls_unicast(const sl_nvls_t *n) {
  return (void *)n->uc_va;
}

#endif
