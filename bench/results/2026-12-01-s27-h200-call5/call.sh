#!/usr/bin/env bash
# Session 27 call 5: bench/torch_peers.py with rotated inputs (issue #3's method: each call on the next of input
# sets that exceed L2 several times, events per call and the profiler's kernel time) next to do_bench's, at every
# T, ours through the FFI; our own `sluice bench kernels` first, on the same machine, for the cross-check.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 150 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; el
left=$(( 570 - ($(date +%s) - t0) )); echo "peers budget $left"
timeout $left python3 bench/torch_peers.py --budget-s $((left - 60)) --ours $W/bench-kernels.json \
  --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2>&1
echo "peers rc=$?"; grep -E "^shapes where|Traceback|Error" $W/peers.txt; el
sed -n '/^same harness, rotated/,/^shapes where a peer is faster with rotated/p' $W/peers.txt
sed -n '/^rotated inputs on both sides/,$p' $W/peers.txt
