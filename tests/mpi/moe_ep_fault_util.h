/* Shared by the MoE fault and kill programs: one unchecked MoE call on the CPU backend where
 * every token has an expert on every rank of the group (so every rank waits on every other). */
#ifndef SL_TEST_MOE_EP_FAULT_UTIL_H
#define SL_TEST_MOE_EP_FAULT_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "comm/moe_ep.h"
#include "kernels/sl_dtype.h"

enum { FAULT_EPR = 2, FAULT_HIDDEN = 128, FAULT_T = 8 };

static sl_status_t fault_make(sl_device_t *dev, MPI_Comm comm, sl_moe_comm_t **h) {
  int size;
  MPI_Comm_size(comm, &size);
  sl_moe_comm_config_t cfg = {.num_experts = FAULT_EPR * size,
                              .top_k = size,
                              .hidden = FAULT_HIDDEN,
                              .payload = SL_MOE_EP_PAYLOAD_BF16,
                              .max_tokens = FAULT_T};
  return sl_moe_comm_create(dev, comm, &cfg, h);
}

/* dispatch (and combine unless skip_combine); returns the first failure */
static sl_status_t fault_call(sl_moe_comm_t *h, int skip_combine) {
  int size = sl_moe_comm_size(h);
  const sl_moe_comm_experts_t *ex = sl_moe_comm_experts(h);
  static uint16_t x[FAULT_T * FAULT_HIDDEN] __attribute__((aligned(16))),
      out[FAULT_T * FAULT_HIDDEN] __attribute__((aligned(16)));
  int32_t ids[FAULT_T * 8];
  float w[FAULT_T * 8];
  for (int i = 0; i < FAULT_T * FAULT_HIDDEN; i++)
    x[i] = sl_f32_to_bf16((float)(i % 13) * 0.25f);
  for (int t = 0; t < FAULT_T; t++)
    for (int k = 0; k < size; k++) {
      ids[t * size + k] = k * FAULT_EPR + t % FAULT_EPR;
      w[t * size + k] = 0.5f;
    }
  sl_moe_comm_dispatch_args_t d = {.num_tokens = FAULT_T, .x = x, .topk_ids = ids, .topk_weights = w};
  sl_status_t s = sl_moe_comm_dispatch(h, &d, NULL);
  if (s != SL_OK || skip_combine) return s;
  sl_moe_comm_combine_args_t c = {.num_tokens = FAULT_T,
                                  .topk_ids = ids,
                                  .topk_weights = w,
                                  .expert_out = ex->expert_x, /* bf16 payload: identity FFN */
                                  .out = out};
  return sl_moe_comm_combine(h, &c, NULL);
}

#endif
