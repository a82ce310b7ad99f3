/* JIT compile path: embedded sources + -D constants -> NVRTC -> cubin, through a disk cache
 * keyed by a hash of every embedded source, the options, the arch and NVRTC's version. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sl_config.h"
#include "sl_jit.h"
#include "sl_log.h"

#ifdef SLUICE_HAVE_CUDA
#include <nvrtc.h>
#endif

/* ---- specs ------------------------------------------------------------------------ */

const sl_jit_source_t *sl_jit_find_source(const char *path) {
  size_t n;
  const sl_jit_source_t *src = sl_jit_sources(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(src[i].path, path) == 0) return &src[i];
  return NULL;
}

void sl_jit_spec_init(sl_jit_spec_t *spec, const char *source, const char *entry) {
  memset(spec, 0, sizeof *spec);
  spec->source = source;
  spec->entry = entry;
}

/* Launchers build a spec on every call (the spec IS the lookup key of the loaded kernel), so
 * this is on the host's per-launch path: vsnprintf of 10-20 constants plus the description cost
 * ~5 us a call, more than the kernels it launches at decode. The two formats the kernels use
 * get fast paths that produce exactly vsnprintf's text: "%d" by hand, and a float format
 * ("%.9ef", "%af") through a small per-thread memo of the last values formatted. */
static int format_int(char *out, size_t cap, int v) {
  char tmp[16];
  int n = 0;
  unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
  do tmp[n++] = (char)('0' + u % 10u); while ((u /= 10u) != 0);
  if (v < 0) tmp[n++] = '-';
  if ((size_t)n >= cap) return -1;
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = '\0';
  return n;
}

static int format_double_memo(char *out, size_t cap, const char *fmt, double v) {
  enum { SLOTS = 8 };
  static _Thread_local struct {
    const char *fmt;
    uint64_t bits;
    char text[40];
  } memo[SLOTS];
  static _Thread_local unsigned next;
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < SLOTS; i++)
    if (memo[i].fmt == fmt && memo[i].bits == bits) {
      size_t n = strlen(memo[i].text);
      if (n >= cap) return -1;
      memcpy(out, memo[i].text, n + 1);
      return (int)n;
    }
  int n = snprintf(out, cap, fmt, v);
  if (n > 0 && (size_t)n < sizeof memo[0].text && (size_t)n < cap) {
    unsigned i = next++ % SLOTS;
    memo[i].fmt = fmt; /* formats are string literals: the pointer identifies the format */
    memo[i].bits = bits;
    memcpy(memo[i].text, out, (size_t)n + 1);
  }
  return n;
}

sl_status_t sl_jit_spec_define(sl_jit_spec_t *spec, const char *name, const char *fmt, ...) {
  if (spec->num_defines >= SL_JIT_MAX_DEFINES)
    return SL_ERR(SL_ERR_CAPACITY, "kernel %s: more than %d JIT constants", spec->entry, SL_JIT_MAX_DEFINES);
  size_t name_len = strlen(name);
  if (name_len >= sizeof spec->defines[0].name)
    return SL_ERR(SL_ERR_INVALID, "JIT constant name '%s' too long", name);
  char *value = spec->defines[spec->num_defines].value;
  const size_t cap = sizeof spec->defines[0].value;
  va_list ap;
  va_start(ap, fmt);
  int n;
  if (strcmp(fmt, "%d") == 0)
    n = format_int(value, cap, va_arg(ap, int));
  else if (strcmp(fmt, "%.9ef") == 0 || strcmp(fmt, "%af") == 0)
    n = format_double_memo(value, cap, fmt, va_arg(ap, double));
  else
    n = vsnprintf(value, cap, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap) return SL_ERR(SL_ERR_INVALID, "JIT constant %s: value too long", name);
  memcpy(spec->defines[spec->num_defines].name, name, name_len + 1);
  spec->num_defines++;
  return SL_OK;
}

sl_status_t sl_jit_spec_define_f32(sl_jit_spec_t *spec, const char *name, float value) {
  if (value != value || value - value != 0.0f)
    return SL_ERR(SL_ERR_INVALID, "JIT constant %s of %s must be finite", name, spec->entry);
  return sl_jit_spec_define(spec, name, "%af", (double)value);
}

/* "entry[NAME=value NAME=value]", truncated to len - 1 (per launch, hence no snprintf). */
void sl_jit_spec_describe(const sl_jit_spec_t *spec, char *buf, size_t len) {
  if (len == 0) return;
  size_t off = 0;
#define SL_PUT(str)                                         \
  do {                                                      \
    const char *p_ = (str);                                 \
    size_t n_ = strlen(p_);                                 \
    if (n_ > len - 1 - off) n_ = len - 1 - off;             \
    memcpy(buf + off, p_, n_);                              \
    off += n_;                                              \
  } while (0)
  SL_PUT(spec->entry);
  SL_PUT("[");
  for (int i = 0; i < spec->num_defines; i++) {
    if (i) SL_PUT(" ");
    SL_PUT(spec->defines[i].name);
    SL_PUT("=");
    SL_PUT(spec->defines[i].value);
  }
  SL_PUT("]");
#undef SL_PUT
  buf[off] = '\0';
}

/* ---- cache file format -------------------------------------------------------------
 * [header][cubin]. The header repeats the key and carries the cubin's own hash, so a
 * truncated, torn or scribbled file is detected and rebuilt, never loaded. */
#define SL_CUBIN_MAGIC "SLCUBIN1"
typedef struct {
  char magic[8];
  uint32_t arch;
  uint32_t nvrtc_version;
  uint64_t key_hi, key_lo;
  uint64_t payload_bytes;
  uint64_t payload_hash;
  char entry[128];
} cubin_header_t;

bool sl_jit_available(void) {
#ifdef SLUICE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int sl_jit_nvrtc_version(void) {
#ifdef SLUICE_HAVE_CUDA
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return major * 1000 + minor * 10;
#else
  return 0;
#endif
}

static sl_status_t mkdir_p(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s", dir);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return SL_ERR(SL_ERR_IO, "cannot create directory %s: %s (set SL_CACHE_DIR)", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return SL_ERR(SL_ERR_IO, "cannot create directory %s: %s (set SL_CACHE_DIR)", path, strerror(errno));
  return SL_OK;
}

/* Options shared by every compile; part of the cache key. */
static int build_options(const sl_jit_spec_t *spec, int arch, char opts[][128], int max) {
  int n = 0;
  snprintf(opts[n++], 128, "--gpu-architecture=sm_%d", arch);
  snprintf(opts[n++], 128, "-std=c++17");
  snprintf(opts[n++], 128, "-default-device");
  snprintf(opts[n++], 128, "-lineinfo");
  snprintf(opts[n++], 128, "-DSL_ARCH=%d", arch);
  for (int i = 0; i < spec->num_defines && n < max; i++)
    snprintf(opts[n++], 128, "-D%s=%s", spec->defines[i].name, spec->defines[i].value);
  return n;
}

static void cache_key(const sl_jit_spec_t *spec, int arch, char opts[][128], int nopts, XXH128_hash_t *key) {
  XXH3_state_t *st = XXH3_createState();
  XXH3_128bits_reset(st);
  size_t n;
  const sl_jit_source_t *src = sl_jit_sources(&n);
  for (size_t i = 0; i < n; i++) {
    XXH3_128bits_update(st, src[i].path, strlen(src[i].path) + 1);
    XXH3_128bits_update(st, src[i].text, src[i].size);
  }
  XXH3_128bits_update(st, spec->source, strlen(spec->source) + 1);
  XXH3_128bits_update(st, spec->entry, strlen(spec->entry) + 1);
  for (int i = 0; i < nopts; i++) XXH3_128bits_update(st, opts[i], strlen(opts[i]) + 1);
  int ver = sl_jit_nvrtc_version();
  XXH3_128bits_update(st, &ver, sizeof ver);
  XXH3_128bits_update(st, &arch, sizeof arch);
  *key = XXH3_128bits_digest(st);
  XXH3_freeState(st);
}

/* Read a cache file. SL_OK with *cubin set on a valid hit; SL_ERR_NOT_FOUND when absent;
 * SL_ERR_FORMAT when present but corrupt (the caller rebuilds). */
static sl_status_t cache_read(const char *path, const XXH128_hash_t *key, int arch, void **cubin, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return SL_ERR_NOT_FOUND;
  cubin_header_t h;
  sl_status_t s = SL_ERR_FORMAT;
  void *buf = NULL;
  if (fread(&h, sizeof h, 1, f) != 1) goto out;
  if (memcmp(h.magic, SL_CUBIN_MAGIC, 8) != 0 || h.arch != (uint32_t)arch || h.key_hi != key->high64 ||
      h.key_lo != key->low64 || h.payload_bytes == 0 || h.payload_bytes > (256u << 20))
    goto out;
  buf = malloc(h.payload_bytes);
  if (!buf) goto out;
  if (fread(buf, 1, h.payload_bytes, f) != h.payload_bytes) goto out;
  if (fgetc(f) != EOF) goto out; /* trailing bytes: not what we wrote */
  if (XXH3_64bits(buf, h.payload_bytes) != h.payload_hash) goto out;
  *cubin = buf;
  *size = h.payload_bytes;
  buf = NULL;
  s = SL_OK;
out:
  free(buf);
  fclose(f);
  return s;
}

/* Write via a unique temp file + rename: concurrent ranks never observe a torn file. */
static sl_status_t cache_write(const char *dir, const char *path, const XXH128_hash_t *key, int arch,
                               const char *entry, const void *cubin, size_t size) {
  SL_CHECK(mkdir_p(dir));
  char tmp[1300];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tmp, sizeof tmp, "%s.tmp.%d.%ld", path, (int)getpid(), (long)ts.tv_nsec);
  FILE *f = fopen(tmp, "wb");
  if (!f) return SL_ERR(SL_ERR_IO, "cannot write JIT cache file %s: %s", tmp, strerror(errno));
  cubin_header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, SL_CUBIN_MAGIC, 8);
  h.arch = (uint32_t)arch;
  h.nvrtc_version = (uint32_t)sl_jit_nvrtc_version();
  h.key_hi = key->high64;
  h.key_lo = key->low64;
  h.payload_bytes = size;
  h.payload_hash = XXH3_64bits(cubin, size);
  snprintf(h.entry, sizeof h.entry, "%s", entry);
  int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(cubin, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return SL_ERR(SL_ERR_IO, "cannot write JIT cache file %s: %s", path, strerror(e));
  }
  return SL_OK;
}

#ifdef SLUICE_HAVE_CUDA
static sl_status_t nvrtc_compile(const sl_jit_spec_t *spec, const sl_jit_source_t *main_src, int arch,
                                 char opts[][128], int nopts, void **cubin, size_t *size) {
  size_t nsrc;
  const sl_jit_source_t *src = sl_jit_sources(&nsrc);
  const char **hdr_text = calloc(nsrc + 1, sizeof *hdr_text), **hdr_name = calloc(nsrc + 1, sizeof *hdr_name);
  const char **optp = calloc((size_t)nopts + 2, sizeof *optp);
  if (!hdr_text || !hdr_name || !optp) {
    free(hdr_text);
    free(hdr_name);
    free(optp);
    return SL_ERR(SL_ERR_NOMEM, "JIT option arrays");
  }
  for (size_t i = 0; i < nsrc; i++) {
    hdr_text[i] = src[i].text;
    hdr_name[i] = src[i].path;
  }
  /* The toolkit's headers, and CUDA 13's cccl/ (libcu++'s cuda/std, which cooperative_groups
   * includes; CUDA 12 keeps it under include/ itself). */
  char include_opt[600], cccl_opt[620];
  snprintf(include_opt, sizeof include_opt, "-I%s/include", sl_config()->cuda_home);
  snprintf(cccl_opt, sizeof cccl_opt, "-I%s/include/cccl", sl_config()->cuda_home);
  for (int i = 0; i < nopts; i++) optp[i] = opts[i];
  optp[nopts] = include_opt;
  optp[nopts + 1] = cccl_opt;

  char desc[1024];
  sl_jit_spec_describe(spec, desc, sizeof desc);
  sl_status_t s = SL_OK;
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, main_src->text, main_src->path, (int)nsrc, hdr_text, hdr_name);
  if (r != NVRTC_SUCCESS) {
    s = SL_ERR(SL_ERR_JIT, "nvrtcCreateProgram for %s: %s", desc, nvrtcGetErrorString(r));
    goto done;
  }
  r = nvrtcCompileProgram(prog, nopts + 2, optp);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      nvrtcGetProgramLog(prog, log);
      log[log_size] = '\0';
    }
    s = SL_ERR(SL_ERR_JIT, "kernel %s (%s) for sm_%d failed to compile: %s\n%s", desc, spec->source, arch,
               nvrtcGetErrorString(r), log ? log : "(no log)");
    free(log);
  } else {
    r = nvrtcGetCUBINSize(prog, size);
    void *buf = r == NVRTC_SUCCESS ? malloc(*size) : NULL;
    if (!buf || nvrtcGetCUBIN(prog, buf) != NVRTC_SUCCESS) {
      free(buf);
      s = SL_ERR(SL_ERR_JIT, "kernel %s: cannot get the cubin from NVRTC", desc);
    } else {
      *cubin = buf;
    }
  }
  nvrtcDestroyProgram(&prog);
done:
  free(hdr_text);
  free(hdr_name);
  free(optp);
  return s;
}
#endif

sl_status_t sl_jit_compile(const sl_jit_spec_t *spec, int arch, void **cubin, size_t *cubin_size,
                           sl_jit_result_t *result) {
  sl_jit_result_t local;
  if (!result) result = &local;
  memset(result, 0, sizeof *result);
  *cubin = NULL;
  *cubin_size = 0;
  if (arch < 50 || arch > 200) return SL_ERR(SL_ERR_INVALID, "kernel %s: bad arch sm_%d", spec->entry, arch);
  const sl_jit_source_t *main_src = sl_jit_find_source(spec->source);
  if (!main_src)
    return SL_ERR(SL_ERR_NOT_FOUND, "kernel %s: device source %s is not embedded in this build", spec->entry,
                  spec->source);
#ifndef SLUICE_HAVE_CUDA
  (void)build_options;
  (void)cache_key;
  (void)cache_read;
  (void)cache_write;
  return SL_ERR(SL_ERR_UNSUPPORTED, "kernel %s: this build has no NVRTC (no CUDA toolkit)", spec->entry);
#else
  char opts[SL_JIT_MAX_DEFINES + 8][128];
  int nopts = build_options(spec, arch, opts, SL_JIT_MAX_DEFINES + 8);
  XXH128_hash_t key;
  cache_key(spec, arch, opts, nopts, &key);
  const sl_config_t *cfg = sl_config();
  snprintf(result->cache_path, sizeof result->cache_path, "%s/%s-sm%d-%016llx%016llx.cubin", cfg->cache_dir,
           spec->entry, arch, (unsigned long long)key.high64, (unsigned long long)key.low64);
  if (cfg->jit_cache) {
    sl_status_t s = cache_read(result->cache_path, &key, arch, cubin, cubin_size);
    if (s == SL_OK) {
      result->cache_hit = true;
      return SL_OK;
    }
    if (s == SL_ERR_FORMAT) {
      SL_LOG_WARN("JIT cache file %s is corrupt: rebuilding it", result->cache_path);
      result->cache_rebuilt = true;
    }
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  SL_CHECK(nvrtc_compile(spec, main_src, arch, opts, nopts, cubin, cubin_size));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  result->compile_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
  if (cfg->jit_cache) {
    sl_status_t s = cache_write(cfg->cache_dir, result->cache_path, &key, arch, spec->entry, *cubin, *cubin_size);
    if (s != SL_OK) SL_LOG_WARN("continuing without caching %s", spec->entry); /* a cache is an optimisation */
    sl_clear_error();
  }
  return SL_OK;
#endif
}

/* ---- cache maintenance -------------------------------------------------------------- */

static int is_cubin_name(const char *name) {
  size_t n = strlen(name);
  return n > 6 && strcmp(name + n - 6, ".cubin") == 0;
}

sl_status_t sl_jit_cache_list(bool (*fn)(const sl_jit_cache_entry_t *e, void *user), void *user) {
  const char *dir = sl_config()->cache_dir;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? SL_OK : SL_ERR(SL_ERR_IO, "cannot read %s: %s", dir, strerror(errno));
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!is_cubin_name(de->d_name)) continue;
    sl_jit_cache_entry_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.file, sizeof e.file, "%s", de->d_name);
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat st;
    if (stat(path, &st) == 0) e.bytes = (size_t)st.st_size;
    FILE *f = fopen(path, "rb");
    cubin_header_t h;
    if (f && fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, SL_CUBIN_MAGIC, 8) == 0 &&
        h.payload_bytes + sizeof h == e.bytes) {
      e.valid = true;
      e.arch = (int)h.arch;
      h.entry[sizeof h.entry - 1] = '\0';
      snprintf(e.entry, sizeof e.entry, "%s", h.entry);
    }
    if (f) fclose(f);
    if (!fn(&e, user)) break;
  }
  closedir(d);
  return SL_OK;
}

sl_status_t sl_jit_cache_clear(int *removed) {
  *removed = 0;
  const char *dir = sl_config()->cache_dir;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? SL_OK : SL_ERR(SL_ERR_IO, "cannot read %s: %s", dir, strerror(errno));
  struct dirent *de;
  sl_status_t s = SL_OK;
  while ((de = readdir(d))) {
    if (!is_cubin_name(de->d_name) && !strstr(de->d_name, ".cubin.tmp.")) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (unlink(path) == 0)
      (*removed)++;
    else
      s = SL_ERR(SL_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
  }
  closedir(d);
  return s;
}
