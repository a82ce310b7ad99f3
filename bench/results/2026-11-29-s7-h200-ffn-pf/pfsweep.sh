#!/usr/bin/env bash
# FFN prefetch-distance sweep (session 7): default via tests/gpu/run, then SL_BENCH_FFN_PF=0/2/8.
root=$(pwd)
SL_BENCH_TIMEOUT=200 tests/gpu/run --tests "gpu_test_device$" --bench moe-local --args moe-local "--only moe_layer --tokens 8,32,128" > $OUT/run.log 2>&1
lib=$root/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} SL_CACHE_DIR=$root/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
for pf in 0 2 8; do
  SL_BENCH_FFN_PF=$pf timeout 200 build-gpu/sluice bench moe-local --only moe_layer --tokens 8,32,128 --json $OUT/pf$pf.json > $OUT/pf$pf.txt 2>&1
done
python3 - <<'PY'
import json, os, glob
out = os.environ["OUT"]
for name, f in [("pf4 (default)", out + "/bench-moe-local.json"), ("pf0", out + "/pf0.json"), ("pf2", out + "/pf2.json"), ("pf8", out + "/pf8.json")]:
    if not os.path.exists(f): print(name, "missing"); continue
    for l in open(f):
        try: o = json.loads(l)
        except Exception: continue
        if o.get("op") == "moe_layer" and o.get("path") in ("replicated/gemv",):
            print(f"{name:14s} {o['shape']:22s} {o['path']:18s} graph {o.get('graph_us') or 0:8.2f}  {(o.get('extra') or '')[60:100]}")
PY
