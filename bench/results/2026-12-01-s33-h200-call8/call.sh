#!/usr/bin/env bash
# Session 33 call 8: what the multi-stream launch state costs a whole MoE decode layer in a graph: `sluice bench
# moe-local --only moe_layer --tokens 1,8,32` in the state every row is now timed in, and with SL_BENCH_ONE_STREAM=1.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
for i in 1 2; do
  timeout 150 $S bench moe-local --only moe_layer --tokens 1,8,32 --json $O/layer-multi-$i.json > $O/layer-multi-$i.txt 2>&1
  SL_BENCH_ONE_STREAM=1 timeout 150 $S bench moe-local --only moe_layer --tokens 1,8,32 --json $O/layer-one-$i.json \
    > $O/layer-one-$i.txt 2>&1
  el "pass $i"
done
for f in $O/layer-*.txt; do echo "== $(basename $f)"; grep -E "^# device" $f | cut -c1-160; grep -E "graph" $f | grep -vE "^#" | sed -E 's/ +/ /g' | cut -c1-140 | head -12; done
