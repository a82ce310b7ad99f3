#!/usr/bin/env bash
# Session 27 call 1: the full `sluice bench kernels` on main (issue #3's table, first full run since session 13),
# then bench/torch_peers.py at T=8192,32768 with ours through the FFI.
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 330 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
el
left=$(( 560 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 60 ]; then
  timeout $left python3 bench/torch_peers.py --budget-s $((left - 40)) --tokens 8192,32768 \
    --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2>&1
  echo "peers rc=$?"; sed -n '/^same harness/,$p' $W/peers.txt | head -60
fi
el
