/* MoE TP combine: local partial sums (fp32, k order) + one-shot all-reduce in rank order,
 * on the CPU backend and as CUDA launches (decode: one fused launch; prefill: two). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/moe_comm_impl.h"
#include "comm/moe_tp.h"

sl_status_t sl_moe_tp_use_allreduce(sl_moe_comm_t *h, sl_comm_t *ar) {
  if (!h->l.tp) return SL_ERR(SL_ERR_INVALID, "moe comm: an external all-reduce is for TP handles only");
  if (ar && sl_comm_size(ar) != h->l.nranks)
    return SL_ERR(SL_ERR_INVALID, "moe TP: the all-reduce spans %d ranks, the MoE group %d: both must be the node",
                  sl_comm_size(ar), h->l.nranks);
  if (ar && !h->tp_partial)
    SL_CHECK(sl_device_malloc(h->dev, (size_t)h->l.max_tokens * h->l.hidden * 4, (void **)&h->tp_partial));
  h->allreduce = ar;
  return SL_OK;
}

sl_status_t sl_moe_tp_combine_cpu(sl_moe_comm_t *h, const sl_moe_ep_params_t *p) {
  const sl_moe_ep_layout_t *l = &h->l;
  unsigned char *own = h->peer[l->rank];
  for (int t = 0; t < p->num_tokens; t++) {
    float *dst =
        h->allreduce ? h->tp_partial + (size_t)t * l->hidden : (float *)(own + sl_moe_ep_ar_row(l, p->epoch, t));
    const float *w = p->topk_weights + (long long)t * l->top_k;
    for (int i = 0; i < l->hidden; i++)
      dst[i] = 0.0f;
    for (int k = 0; k < l->top_k; k++) {
      int r = *(int *)(h->ws + sl_moe_ep_pair_row(l, t, k));
      if (r < 0) continue;
      const uint16_t *row = p->expert_out + (long long)r * l->hidden;
      for (int i = 0; i < l->hidden; i++)
        dst[i] = fmaf(w[k], sl_bf16_to_f32(row[i]), dst[i]);
    }
    if (!h->allreduce) sl_flag_store_release((sl_flag_t *)(own + sl_moe_ep_ar_flag(l, p->epoch, t)), p->epoch);
  }
  if (h->allreduce) {
    size_t n = (size_t)p->num_tokens * l->hidden;
    if (n) SL_CHECK(sl_allreduce(h->allreduce, h->tp_partial, h->tp_partial, n, SL_DTYPE_F32, NULL));
    for (size_t i = 0; i < n; i++)
      p->out[i] = sl_f32_to_bf16(h->tp_partial[i]);
    return SL_OK;
  }
  float *acc = malloc((size_t)l->hidden * sizeof(float));
  if (!acc) return SL_ERR(SL_ERR_NOMEM, "moe TP all-reduce accumulator");
  sl_status_t s = SL_OK;
  for (int t = 0; t < p->num_tokens && s == SL_OK; t++) {
    for (int i = 0; i < l->hidden; i++)
      acc[i] = 0.0f;
    for (int r = 0; r < l->nranks && s == SL_OK; r++) {
      s = sl_moe_comm_cpu_wait(h, h->peer[r], sl_moe_ep_ar_flag(l, p->epoch, t), p->epoch, r,
                               "TP all-reduce partial of token", t);
      const float *src = (const float *)(h->peer[r] + sl_moe_ep_ar_row(l, p->epoch, t));
      for (int i = 0; i < l->hidden && s == SL_OK; i++)
        acc[i] += src[i];
    }
    for (int i = 0; i < l->hidden; i++)
      p->out[(long long)t * l->hidden + i] = sl_f32_to_bf16(acc[i]);
  }
  free(acc);
  return s;
}

sl_status_t sl_moe_tp_combine_gpu(sl_moe_comm_t *h, const sl_moe_ep_params_t *p, sl_moe_comm_path_t path,
                                  sl_stream_t *stream) {
  const char *src = "comm/moe_tp.cu";
  if (path == SL_MOE_COMM_PATH_DECODE) {
    int th = SL_MOE_COMM_DECODE_THREADS;
    return sl_moe_comm_launch(h, src, "sl_moe_tp_combine_fused", th, sl_moe_comm_grid(h, p->num_tokens, th), true, p,
                              stream);
  }
  int th = SL_MOE_COMM_PREFILL_THREADS, grid = sl_moe_comm_grid(h, p->num_tokens, th);
  if (h->allreduce) {
    sl_moe_ep_params_t q = *p;
    q.tp_partial = h->tp_partial;
    size_t n = (size_t)p->num_tokens * h->l.hidden;
    SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_tp_partial", th, grid, false, &q, stream));
    if (n) SL_CHECK(sl_allreduce(h->allreduce, h->tp_partial, h->tp_partial, n, SL_DTYPE_F32, stream));
    return sl_moe_comm_launch(h, src, "sl_moe_tp_to_bf16", th, sl_moe_comm_grid(h, (long long)n / 8 / 32 + 1, th),
                              false, &q, stream);
  }
  SL_CHECK(sl_moe_comm_launch(h, src, "sl_moe_tp_partial", th, grid, false, p, stream));
  return sl_moe_comm_launch(h, src, "sl_moe_tp_allreduce", th, grid, false, p, stream);
}
