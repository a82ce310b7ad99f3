#!/usr/bin/env bash
# Session 33 call 7: the whole `sluice bench kernels` (issue #3's table) with every row timed in the multi-stream launch
# state (launch/bench_util.c, new this session), and bench/torch_peers.py at T <= 1024 with every peer.
O=$1; export OUT=/tmp/g; W=$O
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el built
timeout 220 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el bench
left=$(( 530 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 60 ]; then
  timeout $left python3 bench/torch_peers.py --tokens 1,16,128,1024 --budget-s $((left - 25)) --ours $W/bench-kernels.json \
    --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
  echo "peers rc=$?"; grep -E "^# budget|^# .*stopped" $W/peers.txt | head -3
fi
el peers
sed -n '/^targets:/,$p' $W/table.txt | head -30
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
