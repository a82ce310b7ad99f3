"""Our kernels through bench/peer_ffi.c (libsluice_peer_ffi.so, ctypes) on PyTorch's tensors and
current stream (so a CUDA graph PyTorch captures takes them too): what bench/torch_peers.py
(--ours-lib) and bench/probes/peer_sweep.py time in the peers' own harness."""
import ctypes

import torch


class SluicePeerFFI:
    def __init__(self, path, eps):
        c = ctypes
        self.eps = eps
        self.lib = lib = c.CDLL(path)
        lib.sl_peer_ffi_error.restype = c.c_char_p
        lib.sl_peer_ffi_rmsnorm_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_float]
        lib.sl_peer_ffi_rmsnorm_bf16_cfg.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_float,
                                                     c.c_int, c.c_int, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_kq_overrides.argtypes = [c.c_int, c.c_int, c.c_int, c.c_int]
        lib.sl_peer_ffi_kq_overrides.restype = None
        lib.sl_peer_ffi_silu_mul_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_int, c.c_int]
        lib.sl_peer_ffi_quant_fp8_g128_bf16.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_int, c.c_int]
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

    def rms(self, x, w, cfg=None):
        """cfg: (elts, warps, weight_regs, grid_policy, fast_rsqrt) of sl_rmsnorm_args_t; None = the table's."""
        y = torch.empty_like(x)
        self.stream()
        if cfg is None:
            rc = self.lib.sl_peer_ffi_rmsnorm_bf16(y.data_ptr(), x.data_ptr(), w.data_ptr(), x.shape[0], x.shape[1],
                                                   self.eps)
        else:
            rc = self.lib.sl_peer_ffi_rmsnorm_bf16_cfg(y.data_ptr(), x.data_ptr(), w.data_ptr(), x.shape[0],
                                                       x.shape[1], self.eps, *cfg)
        self.check(rc)
        return y

    def kq_overrides(self, warps=0, unroll=0, seg=-1, waves=0):
        """The act/quant launch overrides for the calls that follow (0 / -1 for seg: the table's)."""
        self.lib.sl_peer_ffi_kq_overrides(warps, unroll, seg, waves)

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
