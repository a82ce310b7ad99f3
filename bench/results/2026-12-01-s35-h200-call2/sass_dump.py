"""Session 35 call 2 helper (not committed): SASS of our FP8 group quantizer (IEEE) at T=1024 H=2048 and T=128
H=4096, with and without the FLAT experiment, and of the Triton group kernel at the same shapes."""
import glob, os, subprocess, sys
import torch
sys.path.insert(0, "bench")
from peer_ffi import FP8_GROUP, RULE_IEEE, SluicePeerFFI
from triton_rows import fp8_group_quant, fp8_groups_launch
out, cache = sys.argv[1], os.environ["SL_CACHE_DIR"]
nvd = "/usr/local/cuda/bin/nvdisasm" if os.path.exists("/usr/local/cuda/bin/nvdisasm") else "nvdisasm"
def dis(blob, name):
    i = blob.index(b"\x7fELF")
    p = os.path.join(out, name + ".cubin"); open(p, "wb").write(blob[i:])
    r = subprocess.run([nvd, "-c", p], capture_output=True, text=True)
    open(os.path.join(out, name + ".sass"), "w").write(r.stdout + r.stderr)
ours = SluicePeerFFI("build-gpu/libsluice_peer_ffi.so", 1e-6)
for T, H in ((1024, 2048), (128, 4096)):
    x = torch.randn((T, H), dtype=torch.bfloat16, device="cuda")
    for flat in ("0", "1"):
        if flat == "1": os.environ["SL_EXP_FLAT"] = "1"
        else: os.environ.pop("SL_EXP_FLAT", None)
        before = set(glob.glob(cache + "/**", recursive=True))
        ours.quant(x, FP8_GROUP, RULE_IEEE); torch.cuda.synchronize()
        for f in sorted(set(glob.glob(cache + "/**", recursive=True)) - before):
            if os.path.isfile(f): dis(open(f, "rb").read(), f"ours_flat{flat}_T{T}_H{H}")
    os.environ.pop("SL_EXP_FLAT", None)
    n = T * H // 128
    programs, gpp, warps = fp8_groups_launch(n)
    q = torch.empty((T, H), dtype=torch.float8_e4m3fn, device="cuda")
    s = torch.empty((T, H // 128), dtype=torch.float32, device="cuda")
    k = fp8_group_quant[(programs,)](x, q, s, n, gpp, False, num_warps=warps)
    dis(k.asm["cubin"], f"triton_grp_T{T}_H{H}")
print(sorted(os.listdir(out)))
