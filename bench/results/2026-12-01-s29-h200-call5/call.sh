#!/usr/bin/env bash
# Session 29 call 5 (final code): gpu_test_quant, gpu_test_act (GELU into FP8 at 8 blocks per SM, kq_launch.h
# gelu8_blocks), the whole `sluice bench kernels` (issue #3's table) and bench/torch_peers.py with every peer.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for t in act quant; do
  stdbuf -oL timeout 200 build-gpu/tests/gpu_test_$t > $W/gpu_test_$t.txt 2>&1; echo "test $t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|differ|want" $W/gpu_test_$t.txt | tail -4
done
el
timeout 170 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el
left=$(( 570 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 90 ]; then
  timeout $left python3 bench/torch_peers.py --budget-s $((left - 40)) --ours $W/bench-kernels.json \
    --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
  echo "peers rc=$?"; grep -E "^shapes where|^# " $W/peers.txt | head -30; grep -v Warn $W/peers.err | tail -3
fi
el
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt | awk '$NF<1.0'
sed -n '/^rotated inputs on both sides/,$p' $W/peers.txt | awk '$(NF)<1.0 || /shapes/'
