/* MoE combine host side: configuration, launch, CPU reference.
 *
 * Configuration choice: one warp per (token, chunk of 32 lanes x 16 bytes x unroll), 8
 * warps per block, grid-stride over at most the resident blocks (decode: one item per
 * warp). A lane issues all K x unroll 16-byte loads (and the residual's) before its FMAs
 * (K rows in flight) and prefetches the next item's slots and weights meanwhile.
 * Unroll 1 for every size now: with __launch_bounds__(256, 4) the kernel fits 64
 * registers, 32 warps per SM each with K x 512 bytes in flight (128 KB per SM at K = 8,
 * above what H200 needs to cover DRAM latency). H200 ncu (2026-11-29): the unroll-2
 * build took 116 registers, 25% occupancy, 12.3 scoreboard cycles per instruction, and
 * was the prefill choice (84.8% / 73.5% of copy). Unroll 2 stays compiled for the bench's
 * comparison row (force_unroll). The result is the same for either (k order, fmaf, one
 * rounding). */
#include <math.h>

#include "kernels/moe_combine.h"

static sl_status_t validate(const sl_moe_combine_args_t *a) {
  if (a->num_tokens < 0) return SL_ERR(SL_ERR_INVALID, "moe combine: num_tokens %d < 0", a->num_tokens);
  if (a->hidden <= 0 || a->hidden % 8)
    return SL_ERR(SL_ERR_INVALID, "moe combine: hidden %d must be a positive multiple of 8", a->hidden);
  if (a->top_k < 1 || a->top_k > SL_MOE_MAX_TOPK)
    return SL_ERR(SL_ERR_INVALID, "moe combine: top_k %d outside [1, %d]", a->top_k, SL_MOE_MAX_TOPK);
  if (a->force_unroll < 0 || a->force_unroll > 2)
    return SL_ERR(SL_ERR_INVALID, "moe combine: force_unroll %d (0: choice, 1 or 2)", a->force_unroll);
  if (a->num_tokens > 0 && (!a->expert_out || !a->slots || !a->topk_weights || !a->out))
    return SL_ERR(SL_ERR_INVALID, "moe combine: NULL expert_out, slots, topk_weights or out");
  return SL_OK;
}

static int pick_unroll(int hidden, int num_tokens, int sm_count) {
  (void)hidden, (void)num_tokens, (void)sm_count;
  return 1;
}

/* num_tokens < 0: the unroll-2 kernel (the bench's comparison; jit points). */
sl_status_t sl_moe_combine_spec(int hidden, int top_k, int num_tokens, int sm_count, sl_jit_spec_t *spec,
                                int *unroll) {
  int u = num_tokens < 0 ? 2 : pick_unroll(hidden, num_tokens, sm_count);
  if (unroll) *unroll = u;
  sl_jit_spec_init(spec, "kernels/moe_combine.cu", "sl_moe_combine");
  SL_CHECK(sl_jit_spec_define(spec, "MOE_HIDDEN", "%d", hidden));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_TOPK", "%d", top_k));
  SL_CHECK(sl_jit_spec_define(spec, "MOE_UNROLL", "%d", u));
  return SL_OK;
}

sl_status_t sl_moe_combine_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user),
                                      void *user) {
  static const int hiddens[] = {2048, 7168};
  (void)arch;
  for (int i = 0; i < 2; i++)
    for (int decode = 0; decode < 2; decode++) {
      sl_jit_spec_t spec;
      SL_CHECK(sl_moe_combine_spec(hiddens[i], 8, decode ? 1 : -1, 132, &spec, NULL));
      SL_CHECK(fn(&spec, user));
      if (!decode) continue;
      SL_CHECK(sl_jit_spec_define(&spec, "MOE_PDL", "1")); /* the small-T layer's PDL build */
      SL_CHECK(fn(&spec, user));
    }
  return SL_OK;
}

sl_status_t sl_moe_combine_ref(const sl_moe_combine_args_t *a) {
  SL_CHECK(validate(a));
  const int H = a->hidden, K = a->top_k;
  const uint16_t *eo = a->expert_out, *res = a->residual;
  uint16_t *out = a->out;
  for (int t = 0; t < a->num_tokens; t++)
    for (int h = 0; h < H; h++) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++) {
        const int row = a->slots[(size_t)t * K + k];
        if (row < 0) continue;
        acc = fmaf(a->topk_weights[(size_t)t * K + k], sl_bf16_to_f32(eo[(size_t)row * H + h]), acc);
      }
      if (res) acc = acc + sl_bf16_to_f32(res[(size_t)t * H + h]);
      out[(size_t)t * H + h] = sl_f32_to_bf16(acc);
    }
  return SL_OK;
}

sl_status_t sl_moe_combine(sl_device_t *dev, const sl_moe_combine_args_t *a, sl_stream_t *stream) {
  SL_CHECK(validate(a));
  if (sl_device_backend(dev) != SL_BACKEND_CUDA) return sl_moe_combine_ref(a);
  if (a->num_tokens == 0) return SL_OK;
  sl_jit_spec_t spec;
  int unroll;
  SL_CHECK(sl_moe_combine_spec(a->hidden, a->top_k, a->force_unroll == 2 ? -1 : a->num_tokens,
                               sl_device_info(dev)->sm_count, &spec, &unroll));
  /* PDL build (kernels/moe_combine.cu, MOE_PDL): slots and weights read before
   * griddepcontrol.wait. A separate build so the default kernel is unchanged. */
  const bool pdl = a->pdl && sl_device_info(dev)->arch >= SL_ARCH_HOPPER;
  if (pdl) SL_CHECK(sl_jit_spec_define(&spec, "MOE_PDL", "1"));
  sl_kernel_t *k;
  SL_CHECK(sl_jit_get_kernel(dev, &spec, &k));
  long items = (long)a->num_tokens * sl_moe_chunks_per_row(a->hidden, unroll);
  long blocks = sl_moe_cdiv(items, SL_MOE_COPY_THREADS / 32), resident = 0;
  SL_CHECK(sl_kernel_resident_blocks(k, SL_MOE_COPY_THREADS, 0, &resident));
  if (resident > 0 && blocks > resident) blocks = resident; /* grid-stride */
  const void *eo = a->expert_out, *slots = a->slots, *w = a->topk_weights, *res = a->residual;
  void *out = a->out;
  int T = a->num_tokens;
  void *args[] = {&eo, &slots, &w, &res, &out, &T};
  sl_launch_t l = {.grid = {(unsigned)blocks}, .block = {SL_MOE_COPY_THREADS}, .stream = stream, .pdl = pdl};
  return sl_kernel_launch(k, &l, args);
}
