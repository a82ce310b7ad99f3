/* Status names, the per-thread last error, and the origin/propagation log lines. */
#include <stdarg.h>
#include <stdio.h>

#include "sl_log.h"
#include "sl_status.h"

static _Thread_local char last_error[2048];

const char *sl_status_str(sl_status_t status) {
  switch (status) {
  case SL_OK: return "SL_OK";
  case SL_ERR_INVALID: return "SL_ERR_INVALID";
  case SL_ERR_NOMEM: return "SL_ERR_NOMEM";
  case SL_ERR_NOT_FOUND: return "SL_ERR_NOT_FOUND";
  case SL_ERR_IO: return "SL_ERR_IO";
  case SL_ERR_FORMAT: return "SL_ERR_FORMAT";
  case SL_ERR_UNSUPPORTED: return "SL_ERR_UNSUPPORTED";
  case SL_ERR_CUDA: return "SL_ERR_CUDA";
  case SL_ERR_JIT: return "SL_ERR_JIT";
  case SL_ERR_MPI: return "SL_ERR_MPI";
  case SL_ERR_TIMEOUT: return "SL_ERR_TIMEOUT";
  case SL_ERR_CAPACITY: return "SL_ERR_CAPACITY";
  case SL_ERR_RANGE: return "SL_ERR_RANGE";
  case SL_ERR_NUMERIC: return "SL_ERR_NUMERIC";
  case SL_ERR_PEER: return "SL_ERR_PEER";
  case SL_ERR_INTERNAL: return "SL_ERR_INTERNAL";
  }
  return "SL_ERR_UNKNOWN";
}

const char *sl_last_error(void) { return last_error; }
void sl_clear_error(void) { last_error[0] = '\0'; }

sl_status_t sl_error_raise(sl_status_t status, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  sl_log(SL_LOG_ERROR, "%s: %s (%s:%d)", sl_status_str(status), last_error, file, line);
  return status;
}

void sl_error_trace(sl_status_t status, const char *file, int line, const char *call) {
  sl_log(SL_LOG_DEBUG, "  from %s:%d: %s -> %s", file, line, call, sl_status_str(status));
}
