/* JIT: device sources embedded at build time, specialized with -D constants, compiled
 * by NVRTC for the device's sm_XX, cached as cubins on disk, launched with the driver API. */
#ifndef SL_JIT_H
#define SL_JIT_H

#include <stdbool.h>
#include <stddef.h>

#include "sl_device.h"
#include "sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Embedded sources -------------------------------------------------------------
 * Every *.cu, *.cuh and *.h under kernels/ and comm/, and every *.cu / *.cuh under
 * runtime/, is embedded by path relative to the repository root ("kernels/rmsnorm.cu").
 * Device code includes other embedded files by that path: #include "kernels/vec.cuh".
 * Plain-C headers shared by a .c and its .cu (index math) live there too. The cache key
 * hashes all embedded files, so editing any of them recompiles every kernel once. */
typedef struct {
  const char *path;
  const char *text;
  size_t size;
} sl_jit_source_t;
/* All embedded sources; *count set. */
const sl_jit_source_t *sl_jit_sources(size_t *count);
const sl_jit_source_t *sl_jit_find_source(const char *path);

/* ---- A specialization ------------------------------------------------------------ */
#define SL_JIT_MAX_DEFINES 32
typedef struct {
  const char *source;   /* embedded path, e.g. "kernels/rmsnorm.cu" */
  const char *entry;    /* extern "C" __global__ function name */
  int num_defines;
  struct {
    char name[48];
    char value[80];
  } defines[SL_JIT_MAX_DEFINES];
} sl_jit_spec_t;

/* Start a spec; add -D constants. Values are formatted with printf rules. */
void sl_jit_spec_init(sl_jit_spec_t *spec, const char *source, const char *entry);
sl_status_t sl_jit_spec_define(sl_jit_spec_t *spec, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A float constant as an exact hexadecimal literal ("0x1.99999ap-4f"): no rounding on the
 * way to the device, and valid for every value (a %g format can yield "1f", which is not). */
sl_status_t sl_jit_spec_define_f32(sl_jit_spec_t *spec, const char *name, float value);
/* "rmsnorm_fwd[HIDDEN=4096 DTYPE=1 ...]" for messages. */
void sl_jit_spec_describe(const sl_jit_spec_t *spec, char *buf, size_t len);

/* ---- Compiling (no GPU needed) --------------------------------------------------- */
typedef struct {
  bool cache_hit;       /* came from the disk cache */
  bool cache_rebuilt;   /* a cache file existed but was corrupt and was rebuilt */
  double compile_ms;    /* NVRTC time (0 on a hit) */
  char cache_path[1200];
} sl_jit_result_t;

/* Compile `spec` for sm_<arch> (e.g. 90, 100) through the disk cache. On success
 * *cubin is malloc'd (caller frees) and *cubin_size set. A compile error returns
 * SL_ERR_JIT with the kernel, its constants and NVRTC's log in the message.
 * SL_ERR_UNSUPPORTED when the build has no NVRTC. */
sl_status_t sl_jit_compile(const sl_jit_spec_t *spec, int arch, void **cubin, size_t *cubin_size,
                           sl_jit_result_t *result);
bool sl_jit_available(void);
/* NVRTC version, e.g. 13000 for 13.0; 0 without NVRTC. */
int sl_jit_nvrtc_version(void);

/* ---- Loaded kernels (CUDA backend) ------------------------------------------------ */
typedef struct sl_kernel sl_kernel_t;

/* Compile (through the cache) for the device's arch, load, and return the function.
 * Memoized per device and spec within the process: the second call is a lookup.
 * The kernel lives until sl_device_close. */
sl_status_t sl_jit_get_kernel(sl_device_t *dev, const sl_jit_spec_t *spec, sl_kernel_t **out);

typedef struct {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;  /* dynamic shared memory */
  sl_stream_t *stream;
  bool cooperative;       /* grid-wide barrier: refused if the grid exceeds co-residency */
  bool pdl;               /* programmatic dependent launch (stream serialization attr) */
} sl_launch_t;

/* Launch with cuLaunchKernelEx; args as for cuLaunchKernel (array of pointers to each
 * argument). The launch status is checked. */
sl_status_t sl_kernel_launch(sl_kernel_t *k, const sl_launch_t *launch, void **args);
/* Co-resident blocks of this kernel per SM at `block_threads` and `shared_bytes` (asked of the
 * driver once per shape, then remembered with the kernel). */
sl_status_t sl_kernel_occupancy(sl_kernel_t *k, int block_threads, size_t shared_bytes, int *blocks_per_sm);
/* Blocks of this kernel the whole device keeps resident at this shape (blocks per SM x SMs):
 * the largest grid for a grid-stride loop or a cooperative launch. */
sl_status_t sl_kernel_resident_blocks(sl_kernel_t *k, int block_threads, size_t shared_bytes, long *blocks);
/* Allow up to `bytes` of dynamic shared memory (above the 48 KiB default; needed before a
 * launch or occupancy query with more). Cheap to call before every launch: the driver is
 * asked only when `bytes` exceeds what this kernel was already allowed. */
sl_status_t sl_kernel_set_max_shared(sl_kernel_t *k, size_t bytes);
const char *sl_kernel_name(const sl_kernel_t *k);

/* ---- Cache maintenance ------------------------------------------------------------ */
typedef struct {
  char file[256];
  char entry[128];
  int arch;
  size_t bytes;
  bool valid;
} sl_jit_cache_entry_t;
/* List cache entries: calls fn for each; stops early if fn returns false. */
sl_status_t sl_jit_cache_list(bool (*fn)(const sl_jit_cache_entry_t *e, void *user), void *user);
/* Remove every cubin in the cache directory; *removed set. */
sl_status_t sl_jit_cache_clear(int *removed);

#ifdef __cplusplus
}
#endif
#endif
