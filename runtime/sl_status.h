/* Status codes and the check-and-propagate macros every Sluice function uses. */
#ifndef SL_STATUS_H
#define SL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* One status enum for the whole runtime: SL_OK is zero, errors are negative. */
typedef enum {
  SL_OK = 0,
  SL_ERR_INVALID = -1,     /* bad argument or configuration value */
  SL_ERR_NOMEM = -2,       /* host or device allocation failed */
  SL_ERR_NOT_FOUND = -3,   /* named thing does not exist (file, kernel, device) */
  SL_ERR_IO = -4,          /* read/write/rename failed */
  SL_ERR_FORMAT = -5,      /* malformed file or message */
  SL_ERR_UNSUPPORTED = -6, /* not available in this build or on this device */
  SL_ERR_CUDA = -7,        /* a CUDA runtime/driver call failed */
  SL_ERR_JIT = -8,         /* NVRTC compile or module load failed */
  SL_ERR_MPI = -9,         /* an MPI call failed */
  SL_ERR_TIMEOUT = -10,    /* a bounded wait expired (a peer stopped answering) */
  SL_ERR_CAPACITY = -11,   /* a fixed capacity would be exceeded */
  SL_ERR_RANGE = -12,      /* an id or index is out of range */
  SL_ERR_NUMERIC = -13,    /* NaN/Inf where a finite value is required */
  SL_ERR_PEER = -14,       /* a peer reported a failure */
  SL_ERR_INTERNAL = -15,   /* a broken invariant: a bug in Sluice */
} sl_status_t;

/* Short name of a status, e.g. "SL_ERR_TIMEOUT". Never NULL. */
const char *sl_status_str(sl_status_t status);

/* The message of the last error raised with SL_ERR on this thread ("" if none). */
const char *sl_last_error(void);
void sl_clear_error(void);

/* Internal: record and log an error at its origin; returns `status`. */
sl_status_t sl_error_raise(sl_status_t status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Internal: log one propagation step ("  from file:line: call"). */
void sl_error_trace(sl_status_t status, const char *file, int line, const char *call);

/* Raise an error at its origin: logs "error: <message> (file:line)" and returns status.
 * Use:  return SL_ERR(SL_ERR_RANGE, "token id %d at position %d >= vocab %d", id, pos, vocab); */
#define SL_ERR(status, ...) sl_error_raise((status), __FILE__, __LINE__, __VA_ARGS__)

/* Call and propagate: on failure logs "from file:line: call" and returns the status. */
#define SL_CHECK(call)                                                                  \
  do {                                                                                  \
    sl_status_t sl_check_status_ = (call);                                              \
    if (sl_check_status_ != SL_OK) {                                                    \
      sl_error_trace(sl_check_status_, __FILE__, __LINE__, #call);                      \
      return sl_check_status_;                                                          \
    }                                                                                   \
  } while (0)

/* Call; on failure store the status in `res` and jump to `label` (single-exit cleanup). */
#define SL_CHECK_GOTO(call, res, label)                                                 \
  do {                                                                                  \
    sl_status_t sl_check_status_ = (call);                                              \
    if (sl_check_status_ != SL_OK) {                                                    \
      sl_error_trace(sl_check_status_, __FILE__, __LINE__, #call);                      \
      (res) = sl_check_status_;                                                         \
      goto label;                                                                       \
    }                                                                                   \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
