// MoE dispatch/combine across the ranks of a node (EP, and TP's self-only dispatch): peer
// stores + per-token release flags. Protocol and layout: comm/moe_ep_layout.h.
#ifndef SL_EP_PAYLOAD
#error "SL_EP_PAYLOAD (SL_MOE_EP_PAYLOAD_*) must be defined by the JIT"
#endif
#ifndef SL_EP_THREADS
#error "SL_EP_THREADS (threads per block, a multiple of 32) must be defined by the JIT"
#endif
#define SL_EP_WARPS (SL_EP_THREADS / 32)

#include "comm/moe_ep_dev.cuh"

// ---- dispatch phases --------------------------------------------------------------------
// Phase 0 (block 0): zero the counters of the next call and this call's expert counts.
__device__ void ep_reset(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  if (blockIdx.x != 0) return;
  for (int i = threadIdx.x; i < SL_MOE_EP_MAX_RANKS; i += SL_EP_THREADS)
    *ep_i32(p.ws, sl_moe_ep_send_counter(&l, p.epoch + 1, i)) = 0;
  for (int i = threadIdx.x; i < l.experts_per_rank; i += SL_EP_THREADS)
    p.expert_counts[i] = 0;
}

// Credits: wait until destination d acknowledged our previous call (its region is free).
__device__ void ep_wait_credits(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  int d = threadIdx.x;
  if (blockIdx.x != 0 || d >= l.nranks) return;
  if (l.tp && d != l.rank) return;
  ep_wait(p, ep_flag(p.peer[l.rank], sl_moe_ep_ack(&l, d)), p.epoch - 1, d, 0x10000u + d);
}

#if SL_EP_PAYLOAD != SL_MOE_EP_PAYLOAD_BF16
// Quantize one token row into staging, the whole warp at once: 4 elements per lane (one
// 8-byte load), B/4 consecutive lanes per scale block, the block's absmax by a sub-warp
// butterfly over log2(B/4) rounds; then the same quant_formats.h rules as the CPU
// (sl_moe_ep_quant_block), so the codes and scales are bit-identical. Max is order-free.
__device__ void ep_quant_token(const ep_params_t &p, const unsigned short *row, unsigned char *stg) {
  constexpr int B = SL_EP_PAYLOAD == SL_MOE_EP_PAYLOAD_FP8 ? 128 : SL_EP_PAYLOAD == SL_MOE_EP_PAYLOAD_MXFP8 ? 32 : 16;
  constexpr int LPB = B / 4;
  constexpr bool FP4 = SL_EP_PAYLOAD == SL_MOE_EP_PAYLOAD_NVFP4;
  const int fmt = sl_moe_ep_qfmt(SL_EP_PAYLOAD), rule = sl_moe_ep_qrule(SL_EP_PAYLOAD);
  const ep_layout_t &l = p.l;
  int lane = ep_lane();
  unsigned char *scales = stg + sl_moe_ep_align(l.codes_bytes, 16);
  for (int base = 0; base < l.hidden; base += 128) {
    int e0 = base + 4 * lane;
    uint2 raw = *reinterpret_cast<const uint2 *>(row + e0);
    float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                  __uint_as_float(raw.y & 0xffff0000u)};
    float absmax = 0.0f;
    int bad = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      if (!sl_qf_finite(v[j]))
        bad = 1;
      else
        absmax = sl_qf_max(absmax, sl_qf_abs(v[j]));
    }
#pragma unroll
    for (int m = 1; m < LPB; m <<= 1) {
      absmax = sl_qf_max(absmax, __shfl_xor_sync(0xffffffffu, absmax, m));
      bad |= __shfl_xor_sync(0xffffffffu, bad, m);
    }
    sl_qf_scale_t sc = sl_qf_block_scale(fmt, rule, absmax, p.global_scale);
    float sf = sc.scale_f32;
    unsigned char su = sc.scale_u8;
    if (bad) sl_qf_nan_scale(fmt, &sf, &su);
    unsigned c[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
      c[j] = bad ? sl_qf_nan_code(fmt) : sl_qf_encode(fmt, sc, v[j]);
    if (FP4)
      *reinterpret_cast<unsigned short *>(stg + e0 / 2) =
          (unsigned short)(c[0] | (c[1] << 4) | (c[2] << 8) | (c[3] << 12));
    else
      *reinterpret_cast<unsigned *>(stg + e0) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
    if (lane % LPB == 0) {
      int b = e0 / B;
      if (SL_EP_PAYLOAD == SL_MOE_EP_PAYLOAD_FP8)
        *reinterpret_cast<unsigned *>(scales + 4 * b) = __float_as_uint(sf);
      else
        scales[b] = su;
    }
  }
}
#endif

// Route: quantize each token once into staging; take a slot in each destination's region.
__device__ void ep_route(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  int lane = ep_lane();
  for (int t = ep_gwarp(); t < p.num_tokens; t += ep_nwarps()) {
    unsigned char *stg = p.ws + sl_moe_ep_staging(&l, t);
    const unsigned short *row = p.x + (long long)t * l.hidden;
#if SL_EP_PAYLOAD == SL_MOE_EP_PAYLOAD_BF16
    ep_warp_copy16(stg, row, l.codes_bytes);
#else
    ep_quant_token(p, row, stg);
#endif
    const int *ids = p.topk_ids + (long long)t * l.top_k;
    if (lane < l.nranks) {
      int d = lane, any = 0;
      for (int k = 0; k < l.top_k; k++)
        any |= sl_moe_ep_goes_to(&l, ids[k], d);
      int slot = any ? atomicAdd(ep_i32(p.ws, sl_moe_ep_send_counter(&l, p.epoch, d)), 1) : -1;
      *ep_i32(p.ws, sl_moe_ep_send_slot(&l, t, d)) = slot;
    }
    if (lane < l.top_k) {
      int e = ids[lane];
      if (!sl_moe_ep_valid_expert(&l, e)) ep_error(p, SL_MOE_EP_ERR_RANGE, t, lane, e);
      if (l.tp) *ep_i32(p.ws, sl_moe_ep_pair_row(&l, t, lane)) = -1;
    }
  }
}

// Publish: how many tokens each destination gets from us (after the credit).
__device__ void ep_publish(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  int d = threadIdx.x;
  if (blockIdx.x != 0 || d >= l.nranks) return;
  if (l.tp && d != l.rank) return;
  int si = sl_moe_ep_sender_index(&l, l.rank);
  int n = *ep_i32(p.ws, sl_moe_ep_send_counter(&l, p.epoch, d));
  *reinterpret_cast<volatile unsigned long long *>(p.peer[d] + sl_moe_ep_recv_count(&l, si)) = (unsigned long long)n;
  __threadfence_system();
  sl_st_release_sys(ep_flag(p.peer[d], sl_moe_ep_count_flag(&l, si)), p.epoch);
}

// Send: payload + meta into the destination's region, then the token's release flag.
__device__ void ep_send(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  int si = sl_moe_ep_sender_index(&l, l.rank);
  long long items = (long long)p.num_tokens * l.nranks;
  for (long long it = ep_gwarp(); it < items; it += ep_nwarps()) {
    int t = (int)(it / l.nranks), d = (int)(it % l.nranks);
    int slot = *ep_i32(p.ws, sl_moe_ep_send_slot(&l, t, d));
    if (slot < 0) continue;
    unsigned char *entry = p.peer[d] + sl_moe_ep_entry(&l, si, slot);
    ep_warp_copy16(entry, p.ws + sl_moe_ep_staging(&l, t), l.token_bytes);
    if (ep_lane() == 0) {
      sl_moe_ep_meta_t *m = reinterpret_cast<sl_moe_ep_meta_t *>(entry + l.token_bytes);
      const int *ids = p.topk_ids + (long long)t * l.top_k;
      const float *w = p.topk_weights + (long long)t * l.top_k;
      int n = 0;
      for (int k = 0; k < l.top_k; k++) {
        if (!sl_moe_ep_goes_to(&l, ids[k], d)) continue;
        m->entry[n] = (k << 16) | sl_moe_ep_local_expert(&l, ids[k]);
        m->weight[n] = w[k];
        n++;
      }
      m->token = t;
      m->nexp = n;
    }
    ep_warp_release(ep_flag(p.peer[d], sl_moe_ep_tok_flag(&l, si, slot)), p.epoch);
  }
}

// Gather (receiver): acquire each sender's count, then each token, and copy it into the
// expert-major rows of every local expert it was sent to. The (sender, slot) items of all
// senders are numbered consecutively and spread over every warp of the grid.
__device__ void ep_gather(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  unsigned char *own = p.peer[l.rank];
  int lane = ep_lane();
  int start[SL_MOE_EP_MAX_RANKS + 1];
  start[0] = 0;
  for (int si = 0; si < l.nsenders; si++) {
    int s = l.tp ? l.rank : si;
    if (!ep_warp_wait(p, ep_flag(own, sl_moe_ep_count_flag(&l, si)), p.epoch, s, 0x20000u + si)) return;
    start[si + 1] =
        start[si] + (int)*reinterpret_cast<volatile unsigned long long *>(own + sl_moe_ep_recv_count(&l, si));
  }
  int total = start[l.nsenders];
  for (int item = ep_gwarp(); item < total; item += ep_nwarps()) {
    int si = 0;
    while (item >= start[si + 1])
      si++;
    int s = l.tp ? l.rank : si, slot = item - start[si];
    if (!ep_warp_wait(p, ep_flag(own, sl_moe_ep_tok_flag(&l, si, slot)), p.epoch, s, (unsigned)slot)) return;
    const unsigned char *entry = own + sl_moe_ep_entry(&l, si, slot);
    const sl_moe_ep_meta_t *m = reinterpret_cast<const sl_moe_ep_meta_t *>(entry + l.token_bytes);
    int t = m->token, nexp = m->nexp;
    for (int j = 0; j < nexp; j++) {
      int le = m->entry[j] & 0xffff, k = m->entry[j] >> 16;
      int row = 0;
      if (lane == 0) row = atomicAdd(&p.expert_counts[le], 1);
      row = __shfl_sync(0xffffffffu, row, 0);
      if (row >= l.capacity) {
        // Dropped: report it, and give the source a zero row so its combine completes.
        if (lane == 0) ep_error(p, SL_MOE_EP_ERR_CAPACITY, le, l.capacity, s);
        if (l.tp) {
          if (lane == 0) *ep_i32(p.ws, sl_moe_ep_pair_row(&l, t, k)) = -1;
        } else {
          ep_warp_zero16(p.peer[s] + sl_moe_ep_comb_row(&l, t, k), 2LL * l.hidden);
          ep_warp_release(ep_flag(p.peer[s], sl_moe_ep_comb_flag(&l, t, k)), p.epoch);
        }
        continue;
      }
      long long r = sl_moe_ep_expert_row(&l, le, row);
      ep_warp_copy16(p.expert_x + r * l.codes_bytes, entry, l.codes_bytes);
      if (l.scales_bytes)
        ep_warp_copy4(p.expert_scales + r * l.scales_bytes, entry + sl_moe_ep_align(l.codes_bytes, 16), l.scales_bytes);
      if (lane == 0) {
        *ep_i32(p.ws, sl_moe_ep_row_src(&l, r)) = sl_moe_ep_pack_src(&l, s, t, k);
        p.expert_weights[r] = m->weight[j];
        if (l.tp) *ep_i32(p.ws, sl_moe_ep_pair_row(&l, t, k)) = (int)r;
      }
    }
  }
}

// Ack (after every token is gathered): senders may overwrite their regions next call.
__device__ void ep_ack(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  int s = threadIdx.x;
  if (blockIdx.x != 0 || s >= l.nranks) return;
  if (l.tp && s != l.rank) return;
  __threadfence_system();
  sl_st_release_sys(ep_flag(p.peer[s], sl_moe_ep_ack(&l, l.rank)), p.epoch);
}

// ---- combine phases (EP) ----------------------------------------------------------------
// Send back: each expert row to its source's (token, k) slot, with a release flag. The rows
// of all local experts are numbered consecutively (an exclusive prefix of the counts, built
// by warp 0 of each block in shared memory) and spread over every warp of the grid, so a
// few rows in each of many experts still use the whole grid. Every thread of the block
// calls it (it synchronises the block once).
__device__ void ep_combine_send(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  __shared__ int first_row[SL_MOE_EP_MAX_LOCAL_EXPERTS + 1];
  int lane = ep_lane();
  if (threadIdx.x < 32) {
    int carry = 0;
    for (int base = 0; base < l.experts_per_rank; base += 32) {
      int le = base + lane;
      int v = le < l.experts_per_rank ? min(p.expert_counts[le], l.capacity) : 0, x = v;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
      }
      if (le < l.experts_per_rank) first_row[le] = carry + x - v;
      carry += __shfl_sync(0xffffffffu, x, 31);
    }
    if (lane == 0) first_row[l.experts_per_rank] = carry;
  }
  __syncthreads();
  int total = first_row[l.experts_per_rank];
  for (int item = ep_gwarp(); item < total; item += ep_nwarps()) {
    int lo = 0, hi = l.experts_per_rank - 1; // the last expert whose first row is <= item
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (first_row[mid] <= item)
        lo = mid;
      else
        hi = mid - 1;
    }
    long long r = sl_moe_ep_expert_row(&l, lo, item - first_row[lo]);
    int s, t, k;
    sl_moe_ep_unpack_src(&l, *ep_i32(p.ws, sl_moe_ep_row_src(&l, r)), &s, &t, &k);
    ep_warp_copy16(p.peer[s] + sl_moe_ep_comb_row(&l, t, k), p.expert_out + r * l.hidden, 2LL * l.hidden);
    ep_warp_release(ep_flag(p.peer[s], sl_moe_ep_comb_flag(&l, t, k)), p.epoch);
  }
}

// Reduce at the source: out[t] = bf16(sum_k w[t,k] * row(t,k)), fp32 fmaf in k order.
__device__ void ep_combine_reduce(const ep_params_t &p) {
  const ep_layout_t &l = p.l;
  unsigned char *own = p.peer[l.rank];
  for (int t = ep_gwarp(); t < p.num_tokens; t += ep_nwarps()) {
    const int *ids = p.topk_ids + (long long)t * l.top_k;
    const float *w = p.topk_weights + (long long)t * l.top_k;
    bool ok = true;
    for (int k = 0; k < l.top_k && ok; k++)
      if (sl_moe_ep_valid_expert(&l, ids[k]))
        ok = ep_warp_wait(p, ep_flag(own, sl_moe_ep_comb_flag(&l, t, k)), p.epoch, sl_moe_ep_expert_rank(&l, ids[k]),
                          (unsigned)(0x40000000u + t * l.top_k + k));
    if (!ok) return;
    for (int c = ep_lane(); c < l.hidden / 8; c += 32) {
      float acc[8];
#pragma unroll
      for (int j = 0; j < 8; j++)
        acc[j] = 0.0f;
      for (int k = 0; k < l.top_k; k++) {
        if (!sl_moe_ep_valid_expert(&l, ids[k])) continue;
        uint4 v = *reinterpret_cast<const uint4 *>(own + sl_moe_ep_comb_row(&l, t, k) + 16LL * c);
        unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          acc[2 * j] = fmaf(w[k], __uint_as_float(u[j] << 16), acc[2 * j]);
          acc[2 * j + 1] = fmaf(w[k], __uint_as_float(u[j] & 0xffff0000u), acc[2 * j + 1]);
        }
      }
      unsigned o[4];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        __nv_bfloat162 h = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
        o[j] = *reinterpret_cast<unsigned *>(&h);
      }
      *reinterpret_cast<uint4 *>(p.out + (long long)t * l.hidden + 8LL * c) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}

// ---- kernels -----------------------------------------------------------------------------
// Decode: one cooperative launch. The first grid barrier orders the slot counts (and the
// zeroed expert counts, and the credits) before anything is published; the second orders
// every gather before the acks.
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_dispatch_fused(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_reset(p);
  ep_wait_credits(p);
  ep_route(p);
  ep_grid_sync(p);
  ep_publish(p);
  ep_send(p);
  ep_gather(p);
  ep_grid_sync(p);
  ep_ack(p);
  ep_epoch_done(p);
}

// Prefill: the same phases as separate launches, ordered by the stream.
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_route(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_reset(p);
  ep_route(p);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_publish(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_wait_credits(p);
  ep_publish(p);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_send(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_send(p);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_gather(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_gather(p);
}
// One block: the last kernel of a prefill dispatch, so it also records the epoch.
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_ack(const ep_params_t p0) {
  EP_PROLOGUE(p0, 1)
  ep_ack(p);
  __syncthreads();
  ep_epoch_done(p);
}

// Combine, decode: send back and reduce in one cooperative launch (a reducing warp may wait
// on rows this rank sends to itself, so every block must be resident).
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_combine_fused(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  ep_combine_send(p);
  ep_combine_reduce(p);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_combine_send(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  ep_combine_send(p);
}
extern "C" __global__ void __launch_bounds__(SL_EP_THREADS) sl_moe_ep_combine_reduce(const ep_params_t p0) {
  EP_PROLOGUE(p0, 0)
  ep_combine_reduce(p);
}
