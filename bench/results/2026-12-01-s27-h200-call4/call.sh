#!/usr/bin/env bash
# Session 27 call 4 (final code): MXFP4's half-block lane as the Hopper default (staged swizzled scales, unroll 4, the
# launcher's full grid), SWZ_SPLIT removed: the whole gpu_test_quant, the whole `sluice bench kernels` (issue #3's
# table), then bench/torch_peers.py with ours through the FFI at every token count.
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 240 build-gpu/tests/gpu_test_quant > $W/gpu_test_quant.txt 2>&1; echo "test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED" $W/gpu_test_quant.txt | tail -4; el
timeout 150 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el
left=$(( 570 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 90 ]; then
  timeout $left python3 bench/torch_peers.py --budget-s $((left - 50)) --ours $W/bench-kernels.json \
    --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2>&1
  echo "peers rc=$?"; grep -E "^shapes where" $W/peers.txt
fi
el
grep -E "^quant_mxfp4_(swz|lin) +T=(8192|32768) " $W/bench-kernels.txt | cut -c1-130
