/* MoE dispatch/combine across the ranks of a node (TP and EP deployments): buffer layout,
 * slot arithmetic, payload packing and the per-token quantization, as plain C shared by the
 * CPU backend (comm/moe_ep.c) and the kernels (comm/moe_ep.cu, comm/moe_tp.cu), so the two
 * backends move the same bytes to the same places.
 *
 * Protocol (one call = dispatch, the caller's expert FFN, combine; every rank of the group
 * calls each collectively; `epoch` = 1, 2, 3, ... per call, never reset):
 *
 *  Memory. Each rank holds one symmetric buffer (comm/symm.h) that every peer can address:
 *    count_flag[s], recv_count[s]   written by sender s: how many tokens s sent here
 *    ack[r]                         written by receiver r: "I finished reading your tokens"
 *    tok_flag[s][slot]              written by sender s, one per token it sent here
 *    recv region [s][slot]          written by sender s: token payload + meta (one region
 *                                   per sender, so senders never contend for slots)
 *    comb_flag[t*K+k], comb[t*K+k]  written by the rank hosting expert k of this rank's
 *                                   token t: that expert's output row (EP only)
 *    ar_flag[p][t], ar[p][t]        TP only: this rank's fp32 partial sum of token t,
 *                                   written by this rank, read by every peer; p = epoch & 1
 *  Dispatch (sender s, receiver r, both roles on every rank):
 *    1. route: for each token, for each destination rank hosting any of its top-k experts
 *       (in rank order), slot = send_counter[d]++ (atomics at the sender); quantize the
 *       token once into local staging.
 *    2. publish: wait ack[d] == epoch-1 in s's memory (d has finished reading s's previous
 *       tokens, so its region may be overwritten), then recv_count[s] = n, release
 *       count_flag[s] = epoch in d's memory.
 *    3. send: peer-store payload + meta into d's region [s][slot], then release
 *       tok_flag[s][slot] = epoch.
 *    4. gather (receiver r): acquire count_flag[s] == epoch, then per slot acquire
 *       tok_flag == epoch, then copy the payload into expert-major rows (row from an atomic
 *       on expert_counts[e]; row_src remembers (s, t, k) for combine).
 *    5. ack: when every token of every sender is gathered, release ack[r] = epoch in each
 *       sender's memory.
 *  Combine (EP): each expert row goes back to its source: peer-store into comb[t*K+k] of
 *    rank s, release comb_flag[t*K+k] = epoch. The source acquires the K flags of each of
 *    its tokens and sums w[t,k] * row in k order in fp32 (fmaf), rounding once to bf16.
 *    A comb slot of call n+1 is written only after s sent token t of call n+1, i.e. after
 *    s finished combine n: no overwrite of unread data, and flags move n -> n+1 only.
 *  Combine (TP): input is replicated; each rank dispatched only to itself (its expert
 *    range); it sums its local pairs in k order (fp32), stores the partial in ar[p][t],
 *    releases ar_flag[p][t] = epoch, then acquires every rank's flag and sums the partials
 *    in rank order (fp32), rounding once: every rank gets identical bits. Rank q writes
 *    ar[p] again only at epoch n+2, which it reaches only after reading every rank's n+1
 *    partial, which each rank writes after reading n: parity double-buffering suffices.
 *  Every wait is bounded (SL_TIMEOUT_MS); a timeout names the peer that did not write. */
#ifndef SL_MOE_EP_LAYOUT_H
#define SL_MOE_EP_LAYOUT_H

#include "comm/flags.h"
#include "kernels/quant_formats.h"

#ifndef __CUDACC_RTC__
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define SL_EP_FN static __device__ __forceinline__
#else
#define SL_EP_FN static inline
#endif

#define SL_MOE_EP_MAX_RANKS 8 /* one node (= SL_SYMM_MAX_RANKS) */
#define SL_MOE_EP_MAX_TOPK 16
#define SL_MOE_EP_MAX_LOCAL_EXPERTS 1024 /* combine's shared-memory prefix of expert counts */
#define SL_MOE_EP_ALIGN 256

/* Payload of a dispatched token (values shared with the JIT constant SL_EP_PAYLOAD). */
#define SL_MOE_EP_PAYLOAD_BF16 0  /* bf16 copy of x */
#define SL_MOE_EP_PAYLOAD_FP8 1   /* E4M3 + fp32 scale per 128 (absmax / 448, IEEE) */
#define SL_MOE_EP_PAYLOAD_MXFP8 2 /* E4M3 + E8M0 scale per 32 (RCEIL: nothing saturates) */
#define SL_MOE_EP_PAYLOAD_NVFP4 3 /* E2M1 + E4M3 scale per 16 + fp32 tensor scale */
#define SL_MOE_EP_NUM_PAYLOADS 4

/* Device error codes (workspace error record). */
#define SL_MOE_EP_ERR_RANGE 1    /* a: token, b: k, c: expert id */
#define SL_MOE_EP_ERR_CAPACITY 2 /* a: local expert, b: capacity, c: sender */
#define SL_MOE_EP_ERR_BARRIER 3  /* a: block, b: blocks; a grid barrier timed out */

typedef struct {
  /* configuration */
  int nranks, rank, tp;
  int num_experts, experts_per_rank, top_k, hidden, payload;
  int max_tokens, capacity, nsenders;
  /* bytes per token */
  long long codes_bytes, scales_bytes, token_bytes, meta_bytes, entry_bytes;
  /* symmetric buffer (same offsets on every rank) */
  long long off_count_flag, off_recv_count, off_ack, off_tok_flag, off_comb_flag, off_ar_flag;
  long long off_recv, off_comb, off_ar, symm_bytes;
  /* local workspace (device memory on CUDA) */
  long long ws_err, ws_claim, ws_barrier, ws_epoch, ws_send_counter, ws_send_slot, ws_staging, ws_row_src, ws_pair_row,
      ws_bytes;
} sl_moe_ep_layout_t;

/* Meta of one dispatched token, after its payload in the receive entry. */
typedef struct {
  int token;                        /* index at the source */
  int nexp;                         /* experts of this token on the receiving rank */
  int entry[SL_MOE_EP_MAX_TOPK];    /* (k << 16) | local expert, in k order */
  float weight[SL_MOE_EP_MAX_TOPK]; /* topk_weights[t, k] */
} sl_moe_ep_meta_t;

/* Everything a kernel (or the CPU backend) needs for one call, passed by value. */
typedef struct {
  sl_moe_ep_layout_t l;
  unsigned char *peer[SL_MOE_EP_MAX_RANKS]; /* symmetric buffers; peer[rank] is this rank's */
  unsigned char *ws;                        /* local workspace */
  unsigned char *expert_x, *expert_scales;
  int *expert_counts;
  float *expert_weights;
  const unsigned short *x; /* [T, H] bf16 */
  const int *topk_ids;
  const float *topk_weights;
  const unsigned short *expert_out; /* [E_local * capacity, H] bf16 */
  unsigned short *out;              /* [T, H] bf16 */
  float *tp_partial;                /* TP with an external all-reduce (comm/allreduce.h):
                                       local fp32 partials [T, H]; NULL: the built-in
                                       one-shot over the symmetric buffer */
  int num_tokens;
  float global_scale;
  unsigned long long epoch, timeout_ns; /* CUDA: epoch is read from the workspace by each
                                           kernel (so a replayed CUDA graph advances it);
                                           the CPU backend uses the host's count */
  sl_flag_timeout_t *timeout_rec;       /* host-mapped on CUDA */
} sl_moe_ep_params_t;

SL_EP_FN long long sl_moe_ep_align(long long x, long long a) {
  return (x + a - 1) / a * a;
}

SL_EP_FN int sl_moe_ep_block_elems(int payload) {
  return payload == SL_MOE_EP_PAYLOAD_FP8     ? 128
         : payload == SL_MOE_EP_PAYLOAD_MXFP8 ? 32
         : payload == SL_MOE_EP_PAYLOAD_NVFP4 ? 16
                                              : 0;
}
SL_EP_FN int sl_moe_ep_qfmt(int payload) {
  return payload == SL_MOE_EP_PAYLOAD_FP8     ? SL_QFMT_FP8_GROUP
         : payload == SL_MOE_EP_PAYLOAD_MXFP8 ? SL_QFMT_MXFP8
                                              : SL_QFMT_NVFP4;
}
SL_EP_FN int sl_moe_ep_qrule(int payload) {
  return payload == SL_MOE_EP_PAYLOAD_FP8 ? SL_QRULE_IEEE : SL_QRULE_CEIL;
}
/* Bytes of codes of one row (bf16: the copy itself). */
SL_EP_FN long long sl_moe_ep_codes_bytes(int payload, int hidden) {
  return payload == SL_MOE_EP_PAYLOAD_BF16 ? 2LL * hidden : payload == SL_MOE_EP_PAYLOAD_NVFP4 ? hidden / 2 : hidden;
}
/* Bytes of scales of one row: fp32 per 128 (FP8), one byte per block otherwise. */
SL_EP_FN long long sl_moe_ep_scales_bytes(int payload, int hidden) {
  if (payload == SL_MOE_EP_PAYLOAD_BF16) return 0;
  long long blocks = hidden / sl_moe_ep_block_elems(payload);
  return payload == SL_MOE_EP_PAYLOAD_FP8 ? 4 * blocks : blocks;
}

/* Rank hosting expert e (contiguous ranges of experts_per_rank) and its local index. */
SL_EP_FN int sl_moe_ep_expert_rank(const sl_moe_ep_layout_t *l, int e) {
  return e / l->experts_per_rank;
}
SL_EP_FN int sl_moe_ep_local_expert(const sl_moe_ep_layout_t *l, int e) {
  return e % l->experts_per_rank;
}
SL_EP_FN int sl_moe_ep_valid_expert(const sl_moe_ep_layout_t *l, int e) {
  return e >= 0 && e < l->num_experts;
}
/* Whether rank d receives pair (t, k) with expert e: EP: d hosts e; TP: d is this rank and
 * hosts e (input is replicated, nothing crosses ranks in dispatch). */
SL_EP_FN int sl_moe_ep_goes_to(const sl_moe_ep_layout_t *l, int e, int d) {
  return sl_moe_ep_valid_expert(l, e) && sl_moe_ep_expert_rank(l, e) == d && (!l->tp || d == l->rank);
}
/* Index of sender s in a receiver's regions (TP: one region, this rank's own). */
SL_EP_FN int sl_moe_ep_sender_index(const sl_moe_ep_layout_t *l, int s) {
  return l->tp ? 0 : s;
}
SL_EP_FN int sl_moe_ep_num_dests(const sl_moe_ep_layout_t *l) {
  return l->nranks;
}

/* Row origin, packed: (sender * max_tokens + token) * K + k. */
SL_EP_FN int sl_moe_ep_pack_src(const sl_moe_ep_layout_t *l, int s, int t, int k) {
  return (s * l->max_tokens + t) * l->top_k + k;
}
SL_EP_FN void sl_moe_ep_unpack_src(const sl_moe_ep_layout_t *l, int packed, int *s, int *t, int *k) {
  *k = packed % l->top_k;
  int st = packed / l->top_k;
  *t = st % l->max_tokens;
  *s = st / l->max_tokens;
}

/* Offsets inside a symmetric buffer. */
SL_EP_FN long long sl_moe_ep_count_flag(const sl_moe_ep_layout_t *l, int si) {
  return l->off_count_flag + 8LL * si;
}
SL_EP_FN long long sl_moe_ep_recv_count(const sl_moe_ep_layout_t *l, int si) {
  return l->off_recv_count + 8LL * si;
}
SL_EP_FN long long sl_moe_ep_ack(const sl_moe_ep_layout_t *l, int r) {
  return l->off_ack + 8LL * r;
}
SL_EP_FN long long sl_moe_ep_tok_flag(const sl_moe_ep_layout_t *l, int si, int slot) {
  return l->off_tok_flag + 8LL * ((long long)si * l->max_tokens + slot);
}
SL_EP_FN long long sl_moe_ep_entry(const sl_moe_ep_layout_t *l, int si, int slot) {
  return l->off_recv + l->entry_bytes * ((long long)si * l->max_tokens + slot);
}
SL_EP_FN long long sl_moe_ep_comb_flag(const sl_moe_ep_layout_t *l, int t, int k) {
  return l->off_comb_flag + 8LL * ((long long)t * l->top_k + k);
}
SL_EP_FN long long sl_moe_ep_comb_row(const sl_moe_ep_layout_t *l, int t, int k) {
  return l->off_comb + 2LL * l->hidden * ((long long)t * l->top_k + k);
}
SL_EP_FN long long sl_moe_ep_ar_flag(const sl_moe_ep_layout_t *l, unsigned long long epoch, int t) {
  return l->off_ar_flag + 8LL * ((long long)(epoch & 1ull) * l->max_tokens + t);
}
SL_EP_FN long long sl_moe_ep_ar_row(const sl_moe_ep_layout_t *l, unsigned long long epoch, int t) {
  return l->off_ar + 4LL * l->hidden * ((long long)(epoch & 1ull) * l->max_tokens + t);
}
/* Local workspace: send counters (two sets by epoch parity: a call zeroes the other set,
 * which the next call uses), slot of each (token, destination), staging of quantized tokens,
 * origin of every expert row, and (TP) the expert row of each (token, k). */
SL_EP_FN long long sl_moe_ep_send_counter(const sl_moe_ep_layout_t *l, unsigned long long epoch, int d) {
  return l->ws_send_counter + 4LL * ((long long)(epoch & 1ull) * SL_MOE_EP_MAX_RANKS + d);
}
SL_EP_FN long long sl_moe_ep_send_slot(const sl_moe_ep_layout_t *l, int t, int d) {
  return l->ws_send_slot + 4LL * ((long long)t * SL_MOE_EP_MAX_RANKS + d);
}
SL_EP_FN long long sl_moe_ep_staging(const sl_moe_ep_layout_t *l, int t) {
  return l->ws_staging + l->token_bytes * (long long)t;
}
SL_EP_FN long long sl_moe_ep_row_src(const sl_moe_ep_layout_t *l, long long row) {
  return l->ws_row_src + 4LL * row;
}
SL_EP_FN long long sl_moe_ep_pair_row(const sl_moe_ep_layout_t *l, int t, int k) {
  return l->ws_pair_row + 4LL * ((long long)t * l->top_k + k);
}
/* Expert-major buffers [E_local, capacity, ...]: row of slot `slot` of local expert le. */
SL_EP_FN long long sl_moe_ep_expert_row(const sl_moe_ep_layout_t *l, int le, int slot) {
  return (long long)le * l->capacity + slot;
}

/* Fill the layout; returns 0, or a negative code naming the bad field (the host turns it
 * into a message): -1 ranks, -2 experts, -3 top_k, -4 hidden, -5 payload, -6 tokens. */
SL_EP_FN int sl_moe_ep_layout_init(sl_moe_ep_layout_t *l, int nranks, int rank, int tp, int num_experts, int top_k,
                                   int hidden, int payload, int max_tokens, int capacity) {
  if (nranks < 1 || nranks > SL_MOE_EP_MAX_RANKS || rank < 0 || rank >= nranks) return -1;
  if (num_experts < nranks || num_experts % nranks || num_experts / nranks > SL_MOE_EP_MAX_LOCAL_EXPERTS) return -2;
  if (top_k < 1 || top_k > SL_MOE_EP_MAX_TOPK || top_k > num_experts) return -3;
  if (hidden < 128 || hidden % 128) return -4;
  if (payload < 0 || payload >= SL_MOE_EP_NUM_PAYLOADS) return -5;
  if (max_tokens < 1 || (long long)nranks * max_tokens * top_k >= (1LL << 31)) return -6;
  l->nranks = nranks;
  l->rank = rank;
  l->tp = tp;
  l->num_experts = num_experts;
  l->experts_per_rank = num_experts / nranks;
  l->top_k = top_k;
  l->hidden = hidden;
  l->payload = payload;
  l->max_tokens = max_tokens;
  l->nsenders = tp ? 1 : nranks;
  /* dropless: a token picks an expert at most once, so an expert receives at most one row
   * per token of every sender */
  l->capacity = capacity > 0 ? capacity : l->nsenders * max_tokens;
  l->codes_bytes = sl_moe_ep_codes_bytes(payload, hidden);
  l->scales_bytes = sl_moe_ep_scales_bytes(payload, hidden);
  l->token_bytes = sl_moe_ep_align(l->codes_bytes, 16) + sl_moe_ep_align(l->scales_bytes, 16);
  l->meta_bytes = sl_moe_ep_align((long long)sizeof(sl_moe_ep_meta_t), 16);
  l->entry_bytes = l->token_bytes + l->meta_bytes;
  long long a = SL_MOE_EP_ALIGN, off = 0;
  l->off_count_flag = off;
  off = sl_moe_ep_align(off + 8LL * SL_MOE_EP_MAX_RANKS, a);
  l->off_recv_count = off;
  off = sl_moe_ep_align(off + 8LL * SL_MOE_EP_MAX_RANKS, a);
  l->off_ack = off;
  off = sl_moe_ep_align(off + 8LL * SL_MOE_EP_MAX_RANKS, a);
  l->off_tok_flag = off;
  off = sl_moe_ep_align(off + 8LL * l->nsenders * max_tokens, a);
  l->off_comb_flag = off;
  off = sl_moe_ep_align(off + (tp ? 0 : 8LL * max_tokens * top_k), a);
  l->off_ar_flag = off;
  off = sl_moe_ep_align(off + (tp ? 16LL * max_tokens : 0), a);
  l->off_recv = off;
  off = sl_moe_ep_align(off + l->entry_bytes * l->nsenders * max_tokens, a);
  l->off_comb = off;
  off = sl_moe_ep_align(off + (tp ? 0 : 2LL * hidden * max_tokens * top_k), a);
  l->off_ar = off;
  off = sl_moe_ep_align(off + (tp ? 8LL * hidden * max_tokens : 0), a);
  l->symm_bytes = off;
  off = 0;
  l->ws_err = off;
  l->ws_claim = off + 16;
  l->ws_barrier = off + 32; /* u64 generation, then u32 arrivals */
  l->ws_epoch = off + 48;   /* u64: epoch of the last dispatch (CUDA: graph replays advance it) */
  off = a;
  l->ws_send_counter = off;
  off = sl_moe_ep_align(off + 4LL * 2 * SL_MOE_EP_MAX_RANKS, a);
  l->ws_send_slot = off;
  off = sl_moe_ep_align(off + 4LL * SL_MOE_EP_MAX_RANKS * max_tokens, a);
  l->ws_staging = off;
  off = sl_moe_ep_align(off + l->token_bytes * max_tokens, a);
  l->ws_row_src = off;
  off = sl_moe_ep_align(off + 4LL * l->experts_per_rank * l->capacity, a);
  l->ws_pair_row = off;
  off = sl_moe_ep_align(off + 4LL * max_tokens * top_k, a);
  l->ws_bytes = off;
  return 0;
}

/* ---- payload: one token quantized once at the sender ------------------------------------ */
SL_EP_FN float sl_moe_ep_bf16_f32(unsigned short b) {
  return sl_qf_float((uint32_t)b << 16);
}

/* Quantize one block of n (16/32/128) bf16 elements: codes (bytes, or nibbles for FP4 with
 * element 2i in the low nibble) and the block's scale, exactly as kernels/quant.c does (the
 * same quant_formats.h rules; a block holding NaN/Inf gets the format's NaN scale). */
SL_EP_FN void sl_moe_ep_quant_block(int payload, const unsigned short *x, int n, float global_scale,
                                    unsigned char *codes, unsigned char *scale) {
  int fmt = sl_moe_ep_qfmt(payload), fp4 = sl_qfmt_is_fp4(fmt);
  float absmax = 0.0f;
  int bad = 0;
  for (int i = 0; i < n; i++) {
    float v = sl_moe_ep_bf16_f32(x[i]);
    if (!sl_qf_finite(v))
      bad = 1;
    else
      absmax = sl_qf_max(absmax, sl_qf_abs(v));
  }
  sl_qf_scale_t s = sl_qf_block_scale(fmt, sl_moe_ep_qrule(payload), absmax, global_scale);
  float sf = s.scale_f32;
  unsigned char su = s.scale_u8;
  if (bad) sl_qf_nan_scale(fmt, &sf, &su);
  for (int i = 0; i < n; i += 2) {
    unsigned char c0 = bad ? sl_qf_nan_code(fmt) : sl_qf_encode(fmt, s, sl_moe_ep_bf16_f32(x[i]));
    unsigned char c1 = bad ? sl_qf_nan_code(fmt) : sl_qf_encode(fmt, s, sl_moe_ep_bf16_f32(x[i + 1]));
    if (fp4) {
      codes[i / 2] = (unsigned char)(c0 | (c1 << 4));
    } else {
      codes[i] = c0;
      codes[i + 1] = c1;
    }
  }
  if (fmt == SL_QFMT_FP8_GROUP) {
    uint32_t u = sl_qf_bits(sf);
    for (int b = 0; b < 4; b++)
      scale[b] = (unsigned char)(u >> (8 * b));
  } else {
    scale[0] = su;
  }
}

/* Quantize block `b` of a token row into a staging entry (codes first, then scales). */
SL_EP_FN void sl_moe_ep_quant_token_block(const sl_moe_ep_layout_t *l, const unsigned short *row, int b,
                                          float global_scale, unsigned char *staging) {
  int n = sl_moe_ep_block_elems(l->payload);
  int fp4 = l->payload == SL_MOE_EP_PAYLOAD_NVFP4;
  int sbytes = l->payload == SL_MOE_EP_PAYLOAD_FP8 ? 4 : 1;
  unsigned char *codes = staging + (long long)b * n / (fp4 ? 2 : 1);
  unsigned char *scale = staging + sl_moe_ep_align(l->codes_bytes, 16) + (long long)b * sbytes;
  sl_moe_ep_quant_block(l->payload, row + (long long)b * n, n, global_scale, codes, scale);
}

/* Dequantize element i of an expert row (codes + scales as laid out in expert_x /
 * expert_scales); bf16 payload reads the copy. For tests and reference FFNs. */
SL_EP_FN float sl_moe_ep_dequant(int payload, const unsigned char *codes, const unsigned char *scales, int i,
                                 float global_scale) {
  if (payload == SL_MOE_EP_PAYLOAD_BF16) {
    const unsigned char *p = codes + 2LL * i;
    return sl_moe_ep_bf16_f32((unsigned short)(p[0] | (p[1] << 8)));
  }
  int fmt = sl_moe_ep_qfmt(payload), n = sl_moe_ep_block_elems(payload), b = i / n;
  unsigned char code = sl_qfmt_is_fp4(fmt) ? (unsigned char)((codes[i / 2] >> (4 * (i & 1))) & 15u) : codes[i];
  float sf = 0.0f;
  unsigned char su = 0;
  if (fmt == SL_QFMT_FP8_GROUP) {
    uint32_t u = (uint32_t)scales[4 * b] | ((uint32_t)scales[4 * b + 1] << 8) | ((uint32_t)scales[4 * b + 2] << 16) |
                 ((uint32_t)scales[4 * b + 3] << 24);
    sf = sl_qf_float(u);
  } else {
    su = scales[b];
  }
  return sl_qf_decode(fmt, code, sf, su, global_scale);
}

#endif
