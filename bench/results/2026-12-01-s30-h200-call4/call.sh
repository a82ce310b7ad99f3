#!/usr/bin/env bash
# Session 30 call 4: peer_sweep --graph (bench/graph_time.py's fixed graph) over the RMSNorm launches (plain and
# fused with the residual) at T=1/16 h=4096/7168 and the SiLU launches at T=1, where the fixed-graph peers of
# call 2 are ahead by 1-5 %; and bench/torch_peers.py at T=128 (call 2 ran T=1/16/1024).
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
P="python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 6"
timeout 200 $P --ops rms,rmsres --tokens 1,16 --hidden 4096,7168 --budget-s 180 > $W/sweep-rms.txt 2>&1
echo "sweep-rms rc=$?"; el
timeout 100 $P --ops silu --tokens 1 --hidden 2048,4096,7168 --budget-s 80 > $W/sweep-silu.txt 2>&1
echo "sweep-silu rc=$?"; el
timeout 60 build-gpu/sluice bench kernels --tokens 128 --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1
echo "bench rc=$?"; el
left=$(( 540 - ($(date +%s) - t0) )); echo "peers budget $left"
timeout $left python3 bench/torch_peers.py --tokens 128 --budget-s $((left - 20)) \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
grep -E "^==|^ +[0-9]" $W/sweep-rms.txt $W/sweep-silu.txt | cut -c1-140
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
