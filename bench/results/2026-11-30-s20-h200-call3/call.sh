#!/usr/bin/env bash
# session 20 call 3: ISK-bulk (the down rows of a block's pairs, contiguous in w_down_t, by one bulk copy; the
# partial after the last round) and the default decode shape on 128 blocks (SL_BENCH_DECODE_GRID); the decode GPU
# test, the T=1 rows twice, then once with every forced decode row on 128 blocks.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_layer_decode$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "FAIL|rror" /tmp/g/gpu-tests.log | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for r in 1 2 g128; do
  [ $r = g128 ] && export SL_BENCH_DECODE_GRID=128
  timeout 150 build-gpu/sluice bench moe-local --only moe_layer --tokens 1 > $W/layer1-$r.txt 2>&1; echo run=$r rc=$?
  grep -E "^moe_layer" $W/layer1-$r.txt | grep -E "pr-if |isk" | grep -v phases | cut -c42-150
  grep -E "(pr-if|isk.*) phases" $W/layer1-$r.txt | grep -v "gate_up end" | grep -oE "start.*" | cut -c1-290
done
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
