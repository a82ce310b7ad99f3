/* MoE in the TP deployment (DP=1, TP>1; DESIGN.md deployment 2): the handle of comm/moe_ep.h
 * created with deploy = SL_MOE_DEPLOY_TP. Input is replicated on every rank; dispatch copies
 * each token only into this rank's expert range (no traffic between ranks); combine sums the
 * local pairs in fp32 and all-reduces the partial sums over the symmetric buffers in rank
 * order, so every rank ends with identical bits. Decode fuses combine and all-reduce in one
 * launch; prefill runs them as two launches.
 *
 * The TP-specific pieces (the combine + all-reduce kernels and their CPU twin) live in
 * comm/moe_tp.{c,cu}; everything else is the shared handle. This header only names the
 * entry points for readers looking for "moe_tp". */
#ifndef SL_COMM_MOE_TP_H
#define SL_COMM_MOE_TP_H

#include "comm/allreduce.h"
#include "comm/moe_ep.h"

/* Convenience: a TP handle (cfg->deploy is overridden). */
static inline sl_status_t sl_moe_tp_create(sl_device_t *dev, MPI_Comm comm, const sl_moe_comm_config_t *cfg,
                                           sl_moe_comm_t **out) {
  sl_moe_comm_config_t c = *cfg;
  c.deploy = SL_MOE_DEPLOY_TP;
  return sl_moe_comm_create(dev, comm, &c, out);
}

/* Use `ar` (comm/allreduce.h, over the same node's ranks) for the all-reduce of the TP
 * prefill path and of the CPU backend: the local fp32 partials are all-reduced in place by
 * sl_allreduce (one-shot / two-shot / NCCL by its own rule), then rounded to bf16 (one more
 * launch). Decode keeps the fused combine + one-shot launch. NULL goes back to the built-in
 * one-shot. The handle does not own `ar`. */
sl_status_t sl_moe_tp_use_allreduce(sl_moe_comm_t *h, sl_comm_t *ar);

#endif
