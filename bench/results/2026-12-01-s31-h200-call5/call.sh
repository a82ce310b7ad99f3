#!/usr/bin/env bash
# Session 31 call 5 (final code): gpu_test_act on the final act16_pack rule (<= 2 blocks per SM); the whole
# `sluice bench kernels` (issue #3's table) and bench/torch_peers.py at T <= 1024 with every peer.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 120 build-gpu/tests/gpu_test_act > $W/gpu_test_act.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR" $W/gpu_test_act.txt | tail -3; el
timeout 200 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el
left=$(( 520 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 60 ]; then
  timeout $left python3 bench/torch_peers.py --tokens 1,16,128,1024 --budget-s $((left - 25)) --ours $W/bench-kernels.json \
    --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
  echo "peers rc=$?"; grep -E "^# budget|^# .*stopped" $W/peers.txt | head -3
fi
el
sed -n '/^targets:/,$p' $W/table.txt | head -20
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0 || /shapes/'
