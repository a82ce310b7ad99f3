#!/usr/bin/env bash
# Session 28 call 7: FP8 group-128 quantization's prefill launch at T=8192 against the Triton group kernel (which led
# by 4-11 % in call 4's rotated rows at H <= 4096): bench/probes/peer_sweep.py in do_bench's regime (256 MB fill
# before each call: DRAM-bound), warps 4/8 x 1-2 items or chunks in flight x item layout / segments of 1, 2, table.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 110 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --rounds 2 --top 8 \
  --tokens 8192 --hidden 2048,4096,7168 --ops fp8q --budget-s 90 > $W/sweep-8192.txt 2>&1
echo "sweep rc=$?"; el
grep -E "^==|^ +[0-9]|^#" $W/sweep-8192.txt | head -40
