/* Embedding lookup: out[t] = table[ids[t]] for token ids (int32) into a [vocab, hidden] table.
 * An id outside [0, vocab) reads nothing: its output row is written with zeros, and the
 * first such position (smallest t) and its id are recorded in a device-side error record
 * that sl_embedding_check() turns into SL_ERR_RANGE naming both. The record is one 64-bit
 * word (position << 32 | id), lowered with atomicMin, so among several bad ids the smallest
 * position wins on both backends; all ones means "no error". */
#ifndef SL_EMBEDDING_H
#define SL_EMBEDDING_H

#include "kernels/sl_dtype.h"

#define SL_EMBEDDING_NO_ERROR 0xffffffffffffffffull
/* Encode/decode the error record (shared by the kernel and the host). */
static inline unsigned long long sl_embedding_error_encode(int position, int id) {
  return ((unsigned long long)(unsigned)position << 32) | (unsigned long long)(unsigned)id;
}
static inline int sl_embedding_error_position(unsigned long long rec) {
  return (int)(unsigned)(rec >> 32);
}
static inline int sl_embedding_error_id(unsigned long long rec) {
  return (int)(unsigned)(rec & 0xffffffffull);
}

#ifndef __CUDACC_RTC__
#include <stdint.h>

#include "runtime/sl_device.h"
#include "runtime/sl_jit.h"

typedef struct {
  const int32_t *ids;        /* [tokens] */
  const void *table;         /* [vocab, hidden] dtype */
  void *out;                 /* [tokens, hidden] dtype */
  unsigned long long *error; /* device memory, one word; reset with sl_embedding_error_reset */
  int tokens, vocab, hidden; /* hidden: a multiple of 8 */
  sl_dtype_t dtype;          /* f32, bf16 or f16 (a gather: no conversion) */
  int warps;                 /* warps per block; 0 = the table */
  bool pdl;                  /* as sl_act_args_t's (kernels/act.h) */
} sl_embedding_args_t;

typedef struct {
  int hidden;
  sl_dtype_t dtype;
  int warps;
  int lane_packets; /* 16-byte packets a lane copies per task (1..16): a row is
                       ceil(hidden bytes / (512 * lane_packets)) tasks */
  bool pdl;         /* JIT PDL and the launch attribute (the args' pdl on sm_90+; set by the launcher) */
} sl_embedding_point_t;

/* Asynchronous on CUDA (capturable). The CPU backend also records the error and returns
 * SL_ERR_RANGE at once. */
sl_status_t sl_embedding(sl_device_t *dev, const sl_embedding_args_t *args, sl_stream_t *stream);
sl_status_t sl_embedding_cpu(const sl_embedding_args_t *args);
/* Set the record to "no error" (on `stream`). */
sl_status_t sl_embedding_error_reset(sl_device_t *dev, unsigned long long *error, sl_stream_t *stream);
/* Wait for `stream`, read the record: SL_OK, or SL_ERR_RANGE "token id I at position P is
 * outside the vocabulary [0, V)". The record is left as it was. */
sl_status_t sl_embedding_check(sl_device_t *dev, const unsigned long long *error, int vocab, sl_stream_t *stream);
sl_status_t sl_embedding_validate(const sl_embedding_args_t *args);
sl_status_t sl_embedding_choose(const sl_embedding_args_t *args, int arch, int sm_count, sl_embedding_point_t *pt);
sl_status_t sl_embedding_spec(sl_jit_spec_t *spec, const sl_embedding_point_t *pt);
sl_status_t sl_embedding_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);
#endif

#endif
