#!/usr/bin/env bash
# session 20 call 12: DCHAIN -- the default (_DL) with the down items' sums as one FMA chain per 16-byte packet
# (dl-ch, in every list of the decode GPU test), then the T=1 rows twice.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_layer_decode$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "FAIL|rror" /tmp/g/gpu-tests.log | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for r in 1 2; do
  timeout 150 build-gpu/sluice bench moe-local --only moe_layer --tokens 1 > $W/layer1-$r.txt 2>&1; echo run=$r rc=$?
  grep -E "^moe_layer" $W/layer1-$r.txt | grep -E "decode-kernel( +[0-9]|.*pr-if( |-dl))" | grep -v phases | cut -c42-150
  grep -E "pr-if-dl(-ch)? phases" $W/layer1-$r.txt | grep -v "gate_up end" | grep -oE "start.*" | cut -c1-290
done
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
