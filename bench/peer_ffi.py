"""Our kernels through bench/peer_ffi.c (libsluice_peer_ffi.so, ctypes) on PyTorch's tensors and
current stream (so a CUDA graph PyTorch captures takes them too): what bench/torch_peers.py
(--ours-lib) and bench/probes/peer_sweep.py time in the peers' own harness."""
import ctypes

import torch


# The integer values bench/peer_ffi.c takes: sl_act_kind_t (kernels/act.h), sl_quant_format_t, sl_quant_rule_t and
# sl_quant_layout_t (kernels/quant.h; their values are quant_formats.h's SL_QFMT_*, SL_QRULE_*, SL_QLAYOUT_*).
ACT_SILU, ACT_GELU = 0, 1
FP8_GROUP, MXFP8, MXFP4, NVFP4 = 0, 1, 2, 3
RULE_IEEE, RULE_CEIL, RULE_FLOOR = 0, 1, 2
LAYOUT_LINEAR, LAYOUT_SWIZZLED = 0, 1
BLOCK = {FP8_GROUP: 128, MXFP8: 32, MXFP4: 32, NVFP4: 16}  # elements per scale


class SluicePeerFFI:
    def __init__(self, path, eps):
        c = ctypes
        self.eps = eps
        self.lib = lib = c.CDLL(path)
        lib.sl_peer_ffi_error.restype = c.c_char_p
        lib.sl_peer_ffi_rmsnorm_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_float]
        lib.sl_peer_ffi_rmsnorm_bf16_cfg.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_float,
                                                     c.c_int, c.c_int, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_act16_pack.argtypes = [c.c_int]
        lib.sl_peer_ffi_act16_pack.restype = None
        lib.sl_peer_ffi_rmsnorm_row_loop.argtypes = [c.c_int]
        lib.sl_peer_ffi_rmsnorm_row_loop.restype = None
        lib.sl_peer_ffi_kq_overrides.argtypes = [c.c_int, c.c_int, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_kq_overrides.restype = None
        lib.sl_peer_ffi_silu_mul_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_int, c.c_int]
        lib.sl_peer_ffi_quant_fp8_g128_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int]
        lib.sl_peer_ffi_rmsnorm_residual_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_int,
                                                          c.c_int, c.c_float]
        lib.sl_peer_ffi_rmsnorm_residual_bf16_cfg.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_int,
                                                              c.c_int, c.c_float, c.c_int, c.c_int, c.c_int, c.c_int,
                                                              c.c_int]
        lib.sl_peer_ffi_act_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_act_fp8_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_quant_codes_bytes.argtypes = [c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_quant_codes_bytes.restype = c.c_size_t
        lib.sl_peer_ffi_quant_scales_bytes.argtypes = [c.c_int, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_quant_scales_bytes.restype = c.c_size_t
        lib.sl_peer_ffi_quant_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int, c.c_int,
                                               c.c_int, c.c_float]
        lib.sl_peer_ffi_dequant_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int, c.c_int,
                                                 c.c_float]
        lib.sl_peer_ffi_set_stream.argtypes = [c.c_void_p]
        self.check(lib.sl_peer_ffi_open())
        if lib.sl_peer_ffi_is_gpu() != 1:
            raise RuntimeError("the peer FFI opened the CPU backend, not the GPU")

    def check(self, rc):
        if rc:
            raise RuntimeError(f"peer ffi: {self.lib.sl_peer_ffi_error().decode()}")

    def stream(self):
        """Enqueue the next call on PyTorch's current stream (0: the legacy default stream)."""
        self.check(self.lib.sl_peer_ffi_set_stream(torch.cuda.current_stream().cuda_stream or None))

    def rms_row_loop(self, cfg):
        """Sets the row_loop knob of the calls that follow: cfg's sixth element (SL_RMSNORM_LOOP_*), else 0."""
        self.lib.sl_peer_ffi_rmsnorm_row_loop(cfg[5] if cfg is not None and len(cfg) > 5 else 0)
        return None if cfg is None else cfg[:5]

    def rms(self, x, w, cfg=None):
        """cfg: (elts, warps, weight_regs, grid_policy, fast_rsqrt[, row_loop]) of sl_rmsnorm_args_t; None = the
        table's."""
        y = torch.empty_like(x)
        self.stream()
        cfg = self.rms_row_loop(cfg)
        if cfg is None:
            rc = self.lib.sl_peer_ffi_rmsnorm_bf16(y.data_ptr(), x.data_ptr(), w.data_ptr(), x.shape[0], x.shape[1],
                                                   self.eps)
        else:
            rc = self.lib.sl_peer_ffi_rmsnorm_bf16_cfg(y.data_ptr(), x.data_ptr(), w.data_ptr(), x.shape[0],
                                                       x.shape[1], self.eps, *cfg)
        self.check(rc)
        return y

    def kq_overrides(self, warps=0, unroll=0, seg=-1, waves=0, min_blocks=0):
        """The act/quant launch overrides for the calls that follow (0 / -1 for seg: the table's; min_blocks: the
        blocks per SM the kernel is compiled for)."""
        self.lib.sl_peer_ffi_kq_overrides(warps, unroll, seg, waves, min_blocks)

    def act16_pack(self, nbytes=0):
        """The one-item 16-bit activation's bytes per lane for the calls that follow (16, 8, 4; 0: the table's)."""
        self.lib.sl_peer_ffi_act16_pack(nbytes)

    def silu(self, x):
        y = torch.empty((x.shape[0], x.shape[1] // 2), dtype=x.dtype, device=x.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_silu_mul_bf16(y.data_ptr(), x.data_ptr(), x.shape[0], x.shape[1] // 2))
        return y

    def fp8_group(self, x):
        T, H = x.shape
        q = torch.empty((T, H), dtype=torch.uint8, device=x.device)
        s = torch.empty((T, H // 128), dtype=torch.float32, device=x.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_quant_fp8_g128_bf16(q.data_ptr(), s.data_ptr(), x.data_ptr(), T, H))
        return q, s

    def rms_res(self, x, res, w, cfg=None):
        """residual = x + res written into res (bf16, in place), returns y = rmsnorm(residual) * w [T, H] bf16.
        cfg: (elts, warps, weight_regs, grid_policy, fast_rsqrt[, row_loop]) as rms; None = the table's."""
        y = torch.empty_like(x)
        self.stream()
        cfg = self.rms_row_loop(cfg)
        if cfg is None:
            rc = self.lib.sl_peer_ffi_rmsnorm_residual_bf16(y.data_ptr(), res.data_ptr(), x.data_ptr(), w.data_ptr(),
                                                            x.shape[0], x.shape[1], self.eps)
        else:
            rc = self.lib.sl_peer_ffi_rmsnorm_residual_bf16_cfg(y.data_ptr(), res.data_ptr(), x.data_ptr(),
                                                                w.data_ptr(), x.shape[0], x.shape[1], self.eps, *cfg)
        self.check(rc)
        return y

    def act(self, x, kind):
        """act(x[:, :I]) * x[:, I:] into [T, I] bf16; kind ACT_SILU or ACT_GELU (tanh)."""
        y = torch.empty((x.shape[0], x.shape[1] // 2), dtype=x.dtype, device=x.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_act_bf16(y.data_ptr(), x.data_ptr(), x.shape[0], x.shape[1] // 2, kind))
        return y

    def act_fp8(self, x, kind):
        """The activation fused with FP8 group-128 quantization: (codes [T, I] uint8 (E4M3 bytes), scales [T, I/128]
        fp32 = absmax / 448)."""
        T, I = x.shape[0], x.shape[1] // 2
        q = torch.empty((T, I), dtype=torch.uint8, device=x.device)
        s = torch.empty((T, I // 128), dtype=torch.float32, device=x.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_act_fp8_bf16(q.data_ptr(), s.data_ptr(), x.data_ptr(), T, I, kind))
        return q, s

    def quant(self, x, fmt, rule, layout=LAYOUT_LINEAR, global_scale=1.0):
        """Block-scaled quantization of x [T, H] bf16: (codes uint8 [T, H] (E4M3) or [T, H/2] (E2M1 pairs, element 2i
        in the low nibble), scales: fp32 [T, H/128] for FP8_GROUP, else one byte per block, [T, H/block] when linear,
        flat (128x4 tiles, padded) when swizzled)."""
        T, H = x.shape
        nc = self.lib.sl_peer_ffi_quant_codes_bytes(fmt, T, H)
        ns = self.lib.sl_peer_ffi_quant_scales_bytes(fmt, layout, T, H)
        if T and (not nc or not ns):
            raise RuntimeError(f"peer ffi: no quantization of {T} x {H} in format {fmt}, layout {layout}")
        q = torch.empty((T, nc // max(T, 1)), dtype=torch.uint8, device=x.device)
        if fmt == FP8_GROUP:
            s = torch.empty((T, H // 128), dtype=torch.float32, device=x.device)
        elif layout == LAYOUT_LINEAR:
            s = torch.empty((T, H // BLOCK[fmt]), dtype=torch.uint8, device=x.device)
        else:
            s = torch.empty(ns, dtype=torch.uint8, device=x.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_quant_bf16(q.data_ptr(), s.data_ptr(), x.data_ptr(), T, H, fmt, rule, layout,
                                                   global_scale))
        return q, s

    def dequant(self, q, s, fmt, layout=LAYOUT_LINEAR, global_scale=1.0):
        """bf16 [T, H] from codes and scales as quant() returns them (any dtype of the same bytes: float8 codes too)."""
        T = q.shape[0]
        H = q.shape[1] * (2 if fmt in (MXFP4, NVFP4) else 1)
        y = torch.empty((T, H), dtype=torch.bfloat16, device=q.device)
        self.stream()
        self.check(self.lib.sl_peer_ffi_dequant_bf16(y.data_ptr(), q.data_ptr(), s.data_ptr(), T, H, fmt, layout,
                                                     global_scale))
        return y
