#!/usr/bin/env bash
# Session 30 call 1: FP8 group quant and the dequantizers at T=8192/32768 through SL_KQ_TUNE_ROWS (Triton's
# launch shape after session 29's instruction cuts), and bench/probes/graph_nodes.py (SiLU bf16 at T=1/16 in a graph:
# kernel durations and start-to-start, ours vs torch.compile vs the Triton row kernel; this call's version of the
# probe had no fixed-graph column yet).
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 150 python3 bench/probes/graph_nodes.py --lib build-gpu/libsluice_peer_ffi.so > $W/graph_nodes.txt 2>&1
echo "graph_nodes rc=$?"; grep -v Warn $W/graph_nodes.txt | tail -20; el
SL_KQ_TUNE_ROWS=w4u1s0mb16,w4u1s2mb16,w4u2s0mb8,w8u1s0mb8,w8u2s2,w8u2s8 \
  timeout 150 build-gpu/sluice bench kernels --only quant_fp8 --tokens 8192,32768 > $W/tune-q.txt 2>&1
echo "tune-q rc=$?"; el
SL_KQ_TUNE_ROWS=w4u1s0mb16,w4u2s0mb8,w8u1s0mb8,w8u2s0,w8u4s4,w8u2s8 \
  timeout 150 build-gpu/sluice bench kernels --only dequant --tokens 8192,32768 > $W/tune-d.txt 2>&1
echo "tune-d rc=$?"; el
grep -E "T=(8192|32768)" $W/tune-q.txt $W/tune-d.txt | sed 's/target.*//' | cut -c1-150
