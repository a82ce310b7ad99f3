/* A flat C ABI over the kernel-library ops that bench/torch_peers.py compares with PyTorch and
 * Triton peers (RMSNorm plain and fused with the residual add, SiLU/GELU-and-mul into bf16 or
 * FP8, FP8 group-128 / MXFP8 / MXFP4 / NVFP4 quantization, FP8 and NVFP4 dequantization), built
 * as the shared library libsluice_peer_ffi.so. A Python harness loads it with ctypes
 * (bench/peer_ffi.py) and runs our kernels on tensors the framework allocated, so ours and the
 * peers are timed by the same timer with the same L2 treatment (triton.testing.do_bench, the
 * PyTorch profiler): `torch_peers.py --ours-lib`.
 *
 * Conventions: one device per process, opened by sl_peer_ffi_open (the GPU when there is one, the
 * CPU backend otherwise: then pointers are host memory); work goes on CUDA's legacy default
 * stream -- PyTorch's default stream -- unless sl_peer_ffi_set_stream names another (PyTorch's
 * current stream, e.g. one capturing a CUDA graph), and is asynchronous; every call returns 0 or
 * an sl_status_t, and sl_peer_ffi_error() says what went wrong. Dense rows; bf16 activations;
 * formats, rules, layouts and activation kinds are the integer values of kernels/quant.h
 * (sl_quant_format_t, sl_quant_rule_t, sl_quant_layout_t) and kernels/act.h (sl_act_kind_t). */
#include <stdbool.h>
#include <stddef.h>

#include "kernels/act.h"
#include "kernels/kq_launch.h"
#include "kernels/quant.h"
#include "kernels/rmsnorm.h"
#include "runtime/sl_config.h"
#include "runtime/sl_device.h"
#include "runtime/sl_status.h"

#define SL_PEER_FFI_EXPORT __attribute__((visibility("default")))

static sl_device_t *g_dev;
static sl_stream_t *g_stream; /* sl_peer_ffi_set_stream's wrapper; NULL: the legacy default stream */

static int no_device(void) {
  return SL_ERR(SL_ERR_INVALID, "peer ffi: sl_peer_ffi_open was not called (or failed)");
}

/* Open the device SL_DEVICE names (auto: the GPU, or the CPU backend without one); idempotent. */
SL_PEER_FFI_EXPORT int sl_peer_ffi_open(void) {
  if (g_dev) return SL_OK;
  return sl_device_open(sl_config()->device, 0, &g_dev);
}

/* The stream the calls that follow enqueue on: a cudaStream_t the caller owns (PyTorch's
 * torch.cuda.current_stream().cuda_stream), or NULL for the legacy default stream. */
SL_PEER_FFI_EXPORT int sl_peer_ffi_set_stream(void *native) {
  if (!g_dev) return no_device();
  if (g_stream && sl_stream_native(g_stream) == native) return SL_OK;
  sl_stream_t *s = NULL;
  if (native) SL_CHECK(sl_stream_wrap(g_dev, native, &s));
  sl_stream_destroy(g_dev, g_stream);
  g_stream = s;
  return SL_OK;
}

/* 1 when the device is a GPU (pointers are device memory), 0 on the CPU backend, -1 unopened. */
SL_PEER_FFI_EXPORT int sl_peer_ffi_is_gpu(void) {
  return g_dev ? sl_device_backend(g_dev) == SL_BACKEND_CUDA : -1;
}

/* The last error's text (this thread's). */
SL_PEER_FFI_EXPORT const char *sl_peer_ffi_error(void) {
  return sl_last_error();
}

/* The RMSNorm row_loop knob (SL_RMSNORM_LOOP_*) the _cfg calls that follow pass; 0 (AUTO) restores the default;
 * the calls with the table's launch always take AUTO. For bench/probes/peer_sweep.py (the one-row kernel forced on
 * full grids: SL_RMSNORM_LOOP_OFF). */
static int g_rms_row_loop;
SL_PEER_FFI_EXPORT void sl_peer_ffi_rmsnorm_row_loop(int row_loop) {
  g_rms_row_loop = row_loop;
}

/* sl_rmsnorm on bf16 tensors with the given knobs (residual NULL: the plain norm). */
static int rms_at(void *y, void *residual, const void *x, const void *w, int rows, int hidden, float eps, int elts,
                  int warps, int weight_regs, int grid_policy, int fast_rsqrt, int row_loop) {
  if (!g_dev) return no_device();
  const sl_rmsnorm_args_t a = {.x = x,
                               .y = y,
                               .residual = residual,
                               .weight = w,
                               .rows = rows,
                               .hidden = hidden,
                               .in_dtype = SL_DTYPE_BF16,
                               .out_dtype = SL_DTYPE_BF16,
                               .w_dtype = SL_DTYPE_BF16,
                               .res_dtype = SL_DTYPE_BF16,
                               .eps = eps,
                               .elts = elts,
                               .warps = warps,
                               .weight_regs = weight_regs,
                               .grid_policy = grid_policy,
                               .fast_rsqrt = fast_rsqrt,
                               .row_loop = row_loop};
  return sl_rmsnorm(g_dev, &a, g_stream);
}

/* y = rmsnorm(x) * w, [rows, hidden] bf16, weight [hidden] bf16, fp32 accumulation (sl_rmsnorm),
 * with the launch knobs of sl_rmsnorm_args_t given (0 = the table's for each): elements per
 * thread, warps per block, weight placement (SL_RMSNORM_WEIGHT_*), grid policy
 * (SL_RMSNORM_GRID_*) and row factor (SL_RMSNORM_RSQ_*); bench/probes/peer_sweep.py times each
 * choice in the peers' harness. */
SL_PEER_FFI_EXPORT int sl_peer_ffi_rmsnorm_residual_bf16_cfg(void *y, void *residual, const void *x, const void *w,
                                                             int rows, int hidden, float eps, int elts, int warps,
                                                             int weight_regs, int grid_policy, int fast_rsqrt);
SL_PEER_FFI_EXPORT int sl_peer_ffi_rmsnorm_bf16_cfg(void *y, const void *x, const void *w, int rows, int hidden,
                                                    float eps, int elts, int warps, int weight_regs, int grid_policy,
                                                    int fast_rsqrt) {
  /* the fused entry without a residual is the plain norm (sl_rmsnorm) */
  return sl_peer_ffi_rmsnorm_residual_bf16_cfg(y, NULL, x, w, rows, hidden, eps, elts, warps, weight_regs,
                                               grid_policy, fast_rsqrt);
}

/* The same with the table's launch choice (what the peers are compared with). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_rmsnorm_bf16(void *y, const void *x, const void *w, int rows, int hidden,
                                                float eps) {
  return rms_at(y, NULL, x, w, rows, hidden, eps, 0, 0, 0, 0, 0, SL_RMSNORM_LOOP_AUTO);
}

/* The act/quant launch overrides (kernels/kq_launch.h) for the calls that follow: warps per
 * block, items in flight per warp, segment length, the full-grid waves and the blocks per SM the
 * kernel is compiled for (MIN_BLOCKS); 0 (the segment: -1) restores the table's for each. For
 * bench/probes/peer_sweep.py. */
SL_PEER_FFI_EXPORT void sl_peer_ffi_kq_overrides(int warps, int unroll, int seg, int waves, int min_blocks) {
  sl_kq_set_warps_override(warps);
  sl_kq_set_min_blocks_override(min_blocks);
  sl_kq_set_unroll_override(unroll);
  sl_kq_set_seg_override(seg < 0 ? SL_KQ_SEG_TABLE : seg);
  sl_kq_set_full_grid_waves_override(waves);
}

/* The one-item (decode) 16-bit activation's bytes of gate and of up per lane for the calls that follow (16, 8 or 4;
 * 0 restores the table's: kernels/kq_launch.h act16_pack). For bench/probes/peer_sweep.py. */
SL_PEER_FFI_EXPORT void sl_peer_ffi_act16_pack(int bytes) {
  sl_kq_set_act16_pack_override(bytes);
}

/* y[t] = silu(x[t, :inter]) * x[t, inter:], x [rows, 2 inter] bf16, y [rows, inter] bf16 (sl_act). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_act_bf16(void *y, const void *x, int rows, int inter, int kind);
SL_PEER_FFI_EXPORT int sl_peer_ffi_quant_bf16(void *codes, void *scales, const void *x, int rows, int hidden,
                                              int format, int rule, int layout, float global_scale);
SL_PEER_FFI_EXPORT int sl_peer_ffi_silu_mul_bf16(void *y, const void *x, int rows, int inter) {
  return sl_peer_ffi_act_bf16(y, x, rows, inter, SL_ACT_SILU_MUL);
}

/* FP8 E4M3 per-token-group (128) quantization of x [rows, hidden] bf16: codes [rows, hidden]
 * bytes, fp32 scales [rows, hidden / 128] = absmax / 448 (sl_quant, IEEE rule, linear). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_quant_fp8_g128_bf16(void *codes, float *scales, const void *x, int rows,
                                                       int hidden) {
  return sl_peer_ffi_quant_bf16(codes, scales, x, rows, hidden, SL_QUANT_FP8_GROUP, SL_QUANT_RULE_IEEE,
                                SL_QUANT_LAYOUT_LINEAR, 1.0f);
}

/* Fused residual add and RMSNorm: residual = x + residual (rounded to bf16 and written back in
 * place), y = rmsnorm(residual) * w from the stored sum; x, residual, y [rows, hidden] bf16 (y
 * must not overlap x or residual), weight [hidden] bf16, fp32 accumulation (sl_rmsnorm with
 * .residual; NULL: the plain norm), with the launch knobs of sl_rmsnorm_args_t as
 * sl_peer_ffi_rmsnorm_bf16_cfg (0 = the table's for each; bench/probes/peer_sweep.py). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_rmsnorm_residual_bf16_cfg(void *y, void *residual, const void *x, const void *w,
                                                             int rows, int hidden, float eps, int elts, int warps,
                                                             int weight_regs, int grid_policy, int fast_rsqrt) {
  return rms_at(y, residual, x, w, rows, hidden, eps, elts, warps, weight_regs, grid_policy, fast_rsqrt,
                g_rms_row_loop);
}

/* The same with the table's launch choice (what the peers are compared with). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_rmsnorm_residual_bf16(void *y, void *residual, const void *x, const void *w,
                                                         int rows, int hidden, float eps) {
  return rms_at(y, residual, x, w, rows, hidden, eps, 0, 0, 0, 0, 0, SL_RMSNORM_LOOP_AUTO);
}

/* y[t] = act(x[t, :inter]) * x[t, inter:], x [rows, 2 inter] bf16, y [rows, inter] bf16, act
 * SL_ACT_SILU_MUL (0) or SL_ACT_GELU_TANH_MUL (1) (sl_act). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_act_bf16(void *y, const void *x, int rows, int inter, int kind) {
  if (!g_dev) return no_device();
  const sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                           .num_tokens = rows,
                           .inter = inter,
                           .in_dtype = SL_DTYPE_BF16,
                           .out_dtype = SL_DTYPE_BF16,
                           .in = x,
                           .out = y};
  return sl_act(g_dev, &a, g_stream);
}

/* The same activation fused with FP8 E4M3 per-token-group (128) quantization of its fp32
 * outputs: codes [rows, inter] bytes, fp32 scales [rows, inter / 128] = absmax / 448 (IEEE
 * rule); inter a multiple of 128 (sl_act, out_dtype SL_DTYPE_FP8_E4M3). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_act_fp8_bf16(void *codes, float *scales, const void *x, int rows, int inter,
                                                int kind) {
  if (!g_dev) return no_device();
  const sl_act_args_t a = {.kind = (sl_act_kind_t)kind,
                           .num_tokens = rows,
                           .inter = inter,
                           .in_dtype = SL_DTYPE_BF16,
                           .out_dtype = SL_DTYPE_FP8_E4M3,
                           .in = x,
                           .out = codes,
                           .out_scales = scales};
  return sl_act(g_dev, &a, g_stream);
}

/* Bytes of the codes and of the scales sl_peer_ffi_quant_bf16 writes for `rows` x `hidden` in
 * `format` / `layout` (what the caller allocates; the swizzled layout pads to 128x4 tiles); 0 for
 * an unknown format or layout or a hidden size that is not a multiple of the format's block. */
static bool quant_shape_ok(int format, int layout, int rows, int hidden) {
  return format >= SL_QUANT_FP8_GROUP && format <= SL_QUANT_NVFP4 &&
         (layout == SL_QUANT_LAYOUT_LINEAR || layout == SL_QUANT_LAYOUT_SWIZZLED) && rows >= 0 && hidden > 0 &&
         hidden % sl_qfmt_block(format) == 0;
}
SL_PEER_FFI_EXPORT size_t sl_peer_ffi_quant_codes_bytes(int format, int rows, int hidden) {
  if (!quant_shape_ok(format, SL_QUANT_LAYOUT_LINEAR, rows, hidden)) return 0;
  return sl_quant_codes_bytes((sl_quant_format_t)format, rows, hidden);
}
SL_PEER_FFI_EXPORT size_t sl_peer_ffi_quant_scales_bytes(int format, int layout, int rows, int hidden) {
  if (!quant_shape_ok(format, layout, rows, hidden)) return 0;
  return sl_quant_scales_bytes((sl_quant_format_t)format, (sl_quant_layout_t)layout, rows, hidden);
}

/* Block-scaled quantization of x [rows, hidden] bf16 (sl_quant): format SL_QUANT_FP8_GROUP (0),
 * MXFP8 (1), MXFP4 (2) or NVFP4 (3); rule SL_QUANT_RULE_IEEE (0), CEIL (1, MX "RCEIL") or FLOOR
 * (2), ignored for NVFP4; layout SL_QUANT_LAYOUT_LINEAR (0, [rows, hidden / block]) or SWIZZLED
 * (1, byte scales only); global_scale the NVFP4 encode scale (> 0; ignored otherwise). codes:
 * [rows, hidden] bytes (E4M3) or [rows, hidden / 2] (E2M1, element 2i in the low nibble); scales:
 * fp32 for FP8 group-128, else one byte (E8M0 / E4M3) per block. No NaN check (graph-capturable). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_quant_bf16(void *codes, void *scales, const void *x, int rows, int hidden,
                                              int format, int rule, int layout, float global_scale) {
  if (!g_dev) return no_device();
  const sl_quant_args_t a = {.format = (sl_quant_format_t)format,
                             .rule = (sl_quant_rule_t)rule,
                             .layout = (sl_quant_layout_t)layout,
                             .num_tokens = rows,
                             .hidden = hidden,
                             .in_dtype = SL_DTYPE_BF16,
                             .in = x,
                             .codes = codes,
                             .scales = scales,
                             .global_scale = global_scale};
  return sl_quant(g_dev, &a, g_stream);
}

/* Dequantization into y [rows, hidden] bf16 (sl_dequant) of codes and scales as
 * sl_peer_ffi_quant_bf16 writes them (same format, layout and global_scale). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_dequant_bf16(void *y, const void *codes, const void *scales, int rows, int hidden,
                                                int format, int layout, float global_scale) {
  if (!g_dev) return no_device();
  const sl_dequant_args_t a = {.format = (sl_quant_format_t)format,
                               .layout = (sl_quant_layout_t)layout,
                               .num_tokens = rows,
                               .hidden = hidden,
                               .codes = codes,
                               .scales = scales,
                               .global_scale = global_scale,
                               .out_dtype = SL_DTYPE_BF16,
                               .out = y};
  return sl_dequant(g_dev, &a, g_stream);
}

/* Wait for the calls' stream (what the calls above enqueued). */
SL_PEER_FFI_EXPORT int sl_peer_ffi_sync(void) {
  if (!g_dev) return no_device();
  SL_CHECK(sl_stream_sync(g_dev, g_stream));
  return sl_device_check(g_dev, "peer ffi work");
}

SL_PEER_FFI_EXPORT void sl_peer_ffi_close(void) {
  sl_stream_destroy(g_dev, g_stream);
  g_stream = NULL;
  if (g_dev) sl_device_close(g_dev);
  g_dev = NULL;
}
