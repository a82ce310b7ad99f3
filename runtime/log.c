/* Leveled, rank-prefixed logging to stderr; one write per line so ranks don't interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_config.h"
#include "sl_log.h"

static sl_log_level_t log_level = SL_LOG_WARN;
static int log_rank = -1, log_size = 0, log_node = 0;
static int log_all_ranks = -1;

void sl_log_set_level(sl_log_level_t level) { log_level = level; }
sl_log_level_t sl_log_get_level(void) { return log_level; }

void sl_log_set_identity(int rank, int size, int node) {
  log_rank = rank;
  log_size = size;
  log_node = node;
}

static const char *level_name(sl_log_level_t level) {
  switch (level) {
  case SL_LOG_ERROR: return "error";
  case SL_LOG_WARN: return "warn";
  case SL_LOG_INFO: return "info";
  case SL_LOG_DEBUG: return "debug";
  case SL_LOG_TRACE: return "trace";
  default: return "?";
  }
}

void sl_log(sl_log_level_t level, const char *fmt, ...) {
  if (level > log_level || level == SL_LOG_NONE) return;
  if (log_all_ranks < 0) {
    const char *e = getenv("SL_LOG_ALL_RANKS");
    log_all_ranks = e && strcmp(e, "1") == 0;
  }
  /* Rank 0 speaks; the others only when something is wrong. */
  if (level > SL_LOG_WARN && log_rank > 0 && !log_all_ranks) return;
  char line[4096];
  int n;
  if (log_rank >= 0)
    n = snprintf(line, sizeof line, "[sluice %d/%d node%d] %s: ", log_rank, log_size, log_node, level_name(level));
  else
    n = snprintf(line, sizeof line, "[sluice] %s: ", level_name(level));
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}
