#!/usr/bin/env bash
# Session 30 call 2: the peers' graph times at T <= 1024 by bench/graph_time.py (100 calls per graph, every
# candidate alike) next to do_bench_cudagraph (--graph-dbc), and bench/probes/graph_nodes.py at 20/100/500/3000
# calls per graph (does the graph's size move the time per call?).
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 150 python3 bench/probes/graph_nodes.py --lib build-gpu/libsluice_peer_ffi.so > $W/graph_nodes.txt 2>&1
echo "graph_nodes rc=$?"; grep -v -i warn $W/graph_nodes.txt | grep act_ | cut -c1-150; el
timeout 90 build-gpu/sluice bench kernels --tokens 1,16,1024 --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1
echo "bench rc=$?"; el
left=$(( 520 - ($(date +%s) - t0) )); echo "peers budget $left"
timeout $left python3 bench/torch_peers.py --tokens 1,16,1024 --graph-dbc --budget-s $((left - 30)) \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; grep -v -i warn $W/peers.err | tail -3; el
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
