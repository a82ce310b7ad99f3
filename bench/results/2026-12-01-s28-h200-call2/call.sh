#!/usr/bin/env bash
# Session 28 call 2: the whole gpu_test_act (GELU's edge check fixed) and the peer FFI's new entries' GPU use; the
# whole `sluice bench kernels` (issue #3's table, GELU rows folded constants); the dequantizers with streaming
# output stores (SL_EXP_DEQ_CS=1, an experiment) interleaved with the default; then bench/torch_peers.py with the
# new peers (fused RMSNorm, GELU, SiLU/GELU into FP8, Triton FP8 group quant, MXFP8/MXFP4/NVFP4 quant, dequant).
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 200 build-gpu/tests/gpu_test_act > $W/gpu_test_act.txt 2>&1; echo "test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|gelu edge" $W/gpu_test_act.txt | tail -6; el
timeout 170 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el
for r in 1 2; do for cs in 0 1; do
  SL_EXP_DEQ_CS=$cs timeout 60 build-gpu/sluice bench kernels --only dequant_ --tokens 8192,32768 \
    > $W/deq-cs$cs-r$r.txt 2>&1; echo "deq cs=$cs r=$r rc=$?"
done; done; el
left=$(( 575 - ($(date +%s) - t0) )); echo "peers budget $left"
if [ $left -gt 90 ]; then
  timeout $left python3 bench/torch_peers.py --budget-s $((left - 45)) --ours $W/bench-kernels.json \
    --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
  echo "peers rc=$?"; grep -E "^shapes where|^# " $W/peers.txt | head -30; tail -5 $W/peers.err
fi
el
for f in $W/deq-cs*.txt; do echo "== $f"; grep -E "^dequant" $f | grep -v mb8 | cut -c1-48,98-150; done
