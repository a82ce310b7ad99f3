#!/usr/bin/env bash
# Session 28 call 5: prefill launch sweeps where call 4's peers still led -- FP8 group-128 quantization and SiLU into
# FP8 at T=1024 (CUDA graph) and the quantizer at T=8192 (do_bench, 256 MB flush: DRAM-bound), against the Triton
# group kernel; the fused residual RMSNorm at T=1024 h=2048 against the Triton fused row kernel.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
sw() { timeout $1 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --rounds 2 --top 6 "${@:2}"; }
sw 100 --graph --tokens 1024 --hidden 2048,4096,7168 --ops fp8q,silu8 --budget-s 80 > $W/sweep-1024.txt 2>&1
echo "sweep 1024 rc=$?"; el
sw 60 --graph --tokens 1024 --hidden 2048 --ops rmsres --budget-s 40 > $W/sweep-rmsres.txt 2>&1
echo "sweep rmsres rc=$?"; el
sw 80 --tokens 8192 --hidden 2048,4096 --ops fp8q --budget-s 60 > $W/sweep-8192.txt 2>&1
echo "sweep 8192 rc=$?"; el
cat $W/sweep-1024.txt $W/sweep-rmsres.txt $W/sweep-8192.txt | grep -E "^==|^ +[0-9]|^#" | head -90
