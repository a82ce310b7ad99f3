#!/usr/bin/env bash
# Session 28 call 3: decode launch sweeps in the peers' graph harness (bench/probes/peer_sweep.py --graph), where
# call 2 found the new Triton peers faster: FP8 group-128 quantization and SiLU/GELU-and-mul into FP8 against the
# Triton group kernel (warps 1-8, unroll 1-2, item layout or the table's segments), and the fused residual RMSNorm
# against the Triton fused row kernel (elements per thread, warps, weight placement, row factor).
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 230 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 2 --top 5 \
  --tokens 1,16,128 --hidden 2048,7168 --ops fp8q,silu8,gelu8 --budget-s 200 > $W/sweep-fp8.txt 2>&1
echo "sweep fp8 rc=$?"; el
timeout 170 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 2 --top 5 \
  --tokens 1,16 --hidden 4096,7168 --ops rmsres --budget-s 140 > $W/sweep-rmsres.txt 2>&1
echo "sweep rmsres rc=$?"; el
grep -E "^==|^ +[0-9]|^#" $W/sweep-fp8.txt | head -120
grep -E "^==|^ +[0-9]|^#" $W/sweep-rmsres.txt | head -40
