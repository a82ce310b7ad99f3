/* Subcommands of the `sluice` command. Each lives in its own file under launch/. */
#ifndef SL_CMD_H
#define SL_CMD_H

#include "runtime/sluice.h"

/* Every subcommand gets the initialised runtime and its own arguments (argv[0] is the
 * subcommand's name); returns a process exit code. */
typedef int (*sl_cmd_fn)(sl_runtime_t *rt, int argc, char **argv);

int sl_cmd_info(sl_runtime_t *rt, int argc, char **argv);
int sl_cmd_selfcheck(sl_runtime_t *rt, int argc, char **argv);
int sl_cmd_jit(sl_runtime_t *rt, int argc, char **argv);
/* `sluice bench <what>` */
int sl_cmd_bench_kernels(sl_runtime_t *rt, int argc, char **argv);
int sl_cmd_bench_moe_local(sl_runtime_t *rt, int argc, char **argv);
int sl_cmd_bench_allreduce(sl_runtime_t *rt, int argc, char **argv);
int sl_cmd_bench_moe(sl_runtime_t *rt, int argc, char **argv);


#endif
