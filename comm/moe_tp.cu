// MoE TP combine: each rank's partial sum over its expert range (fp32), then a one-shot
// all-reduce over the symmetric buffers in rank order; decode fuses both in one launch.
// Protocol: comm/moe_ep_layout.h ("Combine (TP)").

#ifndef SL_EP_THREADS
#error "SL_EP_THREADS (threads per block, a multiple of 32) must be defined by the JIT"
#endif
#define SL_EP_WARPS (SL_EP_THREADS / 32)

#include "comm/moe_ep_dev.cuh"

// Partial: sum_k over pairs this rank hosts of w[t,k] * expert_out[row(t,k)], fmaf in k
// order, stored as fp32 in ar[epoch & 1][t] of this rank, then released.
__device__ void tp_partial_token(const ep_params_t &p, int t) {
  const ep_layout_t &l = p.l;
  unsigned char *own = p.peer[l.rank];
  const float *w = p.topk_weights + (long long)t * l.top_k;
  float *dst = p.tp_partial ? p.tp_partial + (long long)t * l.hidden
                            : reinterpret_cast<float *>(own + sl_moe_ep_ar_row(&l, p.epoch, t));
  for (int c = ep_lane(); c < l.hidden / 8; c += 32) {
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[j] = 0.0f;
    for (int k = 0; k < l.top_k; k++) {
      int r = *ep_i32(p.ws, sl_moe_ep_pair_row(&l, t, k));
      if (r < 0) continue;
      uint4 v = *reinterpret_cast<const uint4 *>(p.expert_out + (long long)r * l.hidden + 8LL * c);
      unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        acc[2 * j] = fmaf(w[k], __uint_as_float(u[j] << 16), acc[2 * j]);
        acc[2 * j + 1] = fmaf(w[k], __uint_as_float(u[j] & 0xffff0000u), acc[2 * j + 1]);
      }
    }
    float4 *d4 = reinterpret_cast<float4 *>(dst + 8LL * c);
    d4[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    d4[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
  if (!p.tp_partial) ep_warp_release(ep_flag(own, sl_moe_ep_ar_flag(&l, p.epoch, t)), p.epoch);
}

// All-reduce of token t: acquire every rank's partial, sum in rank order (fp32), round once.
__device__ bool tp_reduce_token(const ep_params_t &p, int t) {
  const ep_layout_t &l = p.l;
  for (int r = 0; r < l.nranks; r++)
    if (!ep_warp_wait(p, ep_flag(p.peer[r], sl_moe_ep_ar_flag(&l, p.epoch, t)), p.epoch, r,
                      (unsigned)(0x80000000u + t)))
      return false;
  for (int c = ep_lane(); c < l.hidden / 8; c += 32) {
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[j] = 0.0f;
    for (int r = 0; r < l.nranks; r++) {
      const float4 *s4 = reinterpret_cast<const float4 *>(p.peer[r] + sl_moe_ep_ar_row(&l, p.epoch, t)) + 2LL * c;
      float4 a = s4[0], b = s4[1];
      acc[0] = __fadd_rn(acc[0], a.x);
      acc[1] = __fadd_rn(acc[1], a.y);
      acc[2] = __fadd_rn(acc[2], a.z);
      acc[3] = __fadd_rn(acc[3], a.w);
      acc[4] = __fadd_rn(acc[4], b.x);
      acc[5] = __fadd_rn(acc[5], b.y);
      acc[6] = __fadd_rn(acc[6], b.z);
      acc[7] = __fadd_rn(acc[7], b.w);
    }
    unsigned o[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      __nv_bfloat162 h = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
      o[j] = *reinterpret_cast<unsigned *>(&h);
    }
    *reinterpret_cast<uint4 *>(p.out + (long long)t * l.hidden + 8LL * c) = make_uint4(o[0], o[1], o[2], o[3]);
  }
  return true;
}

// Decode: combine the local partial into the symmetric buffer and all-reduce it in the same
// launch. A warp only waits on other ranks' flags for the token it has itself published, so
// no grid barrier is needed (and ranks cannot deadlock: every rank's warp w publishes token
// t before waiting on it, in the same token order).
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_tp_combine_fused(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  for (int t = ep_gwarp(); t < p.num_tokens; t += ep_nwarps()) {
    tp_partial_token(p, t);
    if (!tp_reduce_token(p, t)) return;
  }
}
// Prefill: partials for every token, then the all-reduce, as two launches.
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_tp_partial(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  for (int t = ep_gwarp(); t < p.num_tokens; t += ep_nwarps())
    tp_partial_token(p, t);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_tp_allreduce(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  for (int t = ep_gwarp(); t < p.num_tokens; t += ep_nwarps())
    if (!tp_reduce_token(p, t)) return;
}

// With an external all-reduce (comm/allreduce.h, reduced in place in fp32): round to bf16.
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_tp_to_bf16(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  long long n = (long long)p.num_tokens * p.l.hidden / 8;
  for (long long i = (long long)blockIdx.x * SL_EP_THREADS + threadIdx.x; i < n;
       i += (long long)gridDim.x * SL_EP_THREADS) {
    const float4 *s4 = reinterpret_cast<const float4 *>(p.tp_partial) + 2 * i;
    float4 a = s4[0], b = s4[1];
    __nv_bfloat162 h0 = __floats2bfloat162_rn(a.x, a.y), h1 = __floats2bfloat162_rn(a.z, a.w);
    __nv_bfloat162 h2 = __floats2bfloat162_rn(b.x, b.y), h3 = __floats2bfloat162_rn(b.z, b.w);
    uint4 o = make_uint4(*reinterpret_cast<unsigned *>(&h0), *reinterpret_cast<unsigned *>(&h1),
                         *reinterpret_cast<unsigned *>(&h2), *reinterpret_cast<unsigned *>(&h3));
    reinterpret_cast<uint4 *>(p.out)[i] = o;
  }
}
