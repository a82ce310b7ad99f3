/* Leveled, rank-prefixed logging: "[sluice 3/8 node1] warn: ...". */
#ifndef SL_LOG_H
#define SL_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SL_LOG_NONE = 0,
  SL_LOG_ERROR = 1,
  SL_LOG_WARN = 2,
  SL_LOG_INFO = 3,
  SL_LOG_DEBUG = 4,
  SL_LOG_TRACE = 5,
} sl_log_level_t;

/* Level in force (from SL_LOG_LEVEL via sl_config_load; default warn). */
void sl_log_set_level(sl_log_level_t level);
sl_log_level_t sl_log_get_level(void);

/* Identity used in the prefix. Before it is set the prefix is "[sluice]".
 * Rank 0 prints info/debug/trace; other ranks print only warn and error
 * (all ranks speak when SL_LOG_ALL_RANKS=1). */
void sl_log_set_identity(int rank, int size, int node);

void sl_log(sl_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SL_LOG_ERROR(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)
#define SL_LOG_WARN(...) sl_log(SL_LOG_WARN, __VA_ARGS__)
#define SL_LOG_INFO(...) sl_log(SL_LOG_INFO, __VA_ARGS__)
#define SL_LOG_DEBUG(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define SL_LOG_TRACE(...) sl_log(SL_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
