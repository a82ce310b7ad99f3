#!/usr/bin/env bash
# session 19 call 7 (calls 2, 3, 5 were the same with the layer1 rows; on the tree of splitk-l2h.patch):
# SPLITK -- GPU test, then shapes 0/8 x L2 hints.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_layer_decode$' > $W/run.txt 2>&1; tail -2 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
# calls 2, 3, 5 also: timeout 150 $B bench moe-local --only moe_layer --tokens 1 > $W/layer1.txt
for r in 1 2; do for m in 0 3; do for sh in 0 8; do
  SL_BENCH_DECODE_SHAPE=$sh SL_BENCH_DECODE_L2=$m timeout 60 $B bench moe-local --only moe_layer --tokens 1 > $W/l2-$sh-$m-$r.txt 2>&1
done; done; done
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
