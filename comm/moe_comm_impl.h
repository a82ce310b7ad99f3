/* Internal to comm/moe_ep.c and comm/moe_tp.c: the handle, the CPU waits and the launch
 * helper they share. Not a public header. */
#ifndef SL_MOE_COMM_IMPL_H
#define SL_MOE_COMM_IMPL_H
#ifndef __CUDACC_RTC__

#include "comm/allreduce.h"
#include "comm/moe_ep.h"
#include "comm/symm.h"
#include "kernels/sl_dtype.h"
#include "runtime/sl_boot.h"

struct sl_moe_comm {
  sl_device_t *dev;
  sl_backend_t backend;
  sl_moe_comm_config_t cfg;
  sl_moe_ep_layout_t l;
  sl_symm_t *symm;
  unsigned char *peer[SL_MOE_EP_MAX_RANKS];
  sl_moe_transport_t transport[SL_MOE_EP_MAX_RANKS];
  unsigned char *ws;               /* device (CUDA) or host memory */
  sl_flag_timeout_t *timeout_host; /* host-mapped on CUDA (device alias below) */
  sl_flag_timeout_t *timeout_dev;
  sl_moe_comm_experts_t experts;
  unsigned long long epoch; /* calls so far; dispatch n and its combine use epoch n */
  int sm_count, sm_budget;
  long timeout_ms;
  sl_status_t failed;   /* a previous call timed out: the handle is unusable */
  sl_comm_t *allreduce; /* TP prefill: comm1's all-reduce when set (moe_tp.h) */
  float *tp_partial;    /* [max_tokens, H] fp32 for it */
  struct sl_moe_net *net; /* handles over several nodes (comm/moe_internode.h); NULL: node */
};

/* Parameters of the current call for the kernels / the CPU backend. */
void sl_moe_comm_params(const sl_moe_comm_t *h, sl_moe_ep_params_t *p);

/* CPU backend: bounded acquire wait on a flag in shared memory; SL_ERR_TIMEOUT naming the
 * peer on expiry (what: "dispatch count", ...; index: the slot or token). */
sl_status_t sl_moe_comm_cpu_wait(sl_moe_comm_t *h, const unsigned char *base, long long off, unsigned long long epoch,
                                 int peer, const char *what, long index);

/* CUDA backend: launch `entry` of `source` with the call's parameters. */
sl_status_t sl_moe_comm_launch(sl_moe_comm_t *h, const char *source, const char *entry, int threads, int grid,
                               bool cooperative, const sl_moe_ep_params_t *p, sl_stream_t *stream);
/* Blocks for `items` warp work items at `threads` per block, capped by the SM budget. */
int sl_moe_comm_grid(const sl_moe_comm_t *h, long long items, int threads);

/* TP combine (comm/moe_tp.c). */
sl_status_t sl_moe_tp_combine_cpu(sl_moe_comm_t *h, const sl_moe_ep_params_t *p);
sl_status_t sl_moe_tp_combine_gpu(sl_moe_comm_t *h, const sl_moe_ep_params_t *p, sl_moe_comm_path_t path,
                                  sl_stream_t *stream);

#define SL_MOE_COMM_DECODE_THREADS 128  /* 4 warps: decode spreads tokens over many SMs */
#define SL_MOE_COMM_PREFILL_THREADS 256 /* 8 warps per block for the split launches */

#endif
#endif
