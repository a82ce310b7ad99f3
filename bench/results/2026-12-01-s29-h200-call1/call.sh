#!/usr/bin/env bash
# Session 29 call 1: launch sweep of the FP8-out kernels (SiLU/GELU into FP8, FP8 group quant and dequant) at
# T=1024/8192/32768 through SL_KQ_TUNE_ROWS: unroll 1 compiled for the full 2048 threads per SM (mb: 32 registers,
# no spill at unroll 1) against the table's 40-register 6-blocks launch; plus peer_sweep (do_bench) at T=8192.
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_KQ_TUNE_ROWS=w4u1s0,w4u1s0mb16,w4u1s4mb16,w8u1s0mb8,w8u1s1mb8,w8u1s2mb8,w8u1s4mb8,w8u1s4,w8u2s2 \
  timeout 300 build-gpu/sluice bench kernels --only _fp8 --tokens 1024,8192,32768 > $W/tune.txt 2>&1
echo "tune rc=$?"; el
timeout 100 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --rounds 2 --top 8 \
  --tokens 8192 --hidden 2048,4096 --ops fp8q --budget-s 80 > $W/sweep-8192.txt 2>&1
echo "sweep rc=$?"; el
# the summary: per shape the default row and the three best (graph us at T <= 1024, kernel us above)
python3 - $W/tune.txt <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.split("target")[0].split("other")[0].split("the row")[0]
    m = re.match(r"(\S+)\s+(T=\d+ \S+)\s+(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+%)\s+(\S+)\s+(\S+)\s+([\d.]+)\s*$", line)
    if m: rows.setdefault((m[1], m[2]), []).append((m[3], float(m[4]), m[8], float(m[9])))
for (op, shape), rs in rows.items():
    t = int(shape.split()[0][2:])
    key = (lambda r: float(r[2])) if t <= 1024 else (lambda r: r[3])
    best = sorted(rs, key=key)[:3]
    d = rs[0]
    print(f"{op:16s} {shape:13s} dflt {d[0]:6s} {d[1]:7.2f} g {d[2]:>5s} k {d[3]:7.2f} | " +
          "  ".join(f"{b[0]} {b[1]:.2f}/{b[2]}/{b[3]:.2f}" for b in best))
PY
grep -E "^==|^ +[0-9]|^#" $W/sweep-8192.txt | head -30
