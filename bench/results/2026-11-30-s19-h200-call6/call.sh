#!/usr/bin/env bash
# session 19 call 6 (tree of call7/splitk-l2h.patch, before its poll change): SPLITK phases and CUT costs.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
for r in 1 2; do for sh in 0 8; do for cut in 0 1 2 3; do
  [ $sh = 0 ] && [ $cut != 0 ] && continue
  SL_BENCH_DECODE_SHAPE=$sh SL_BENCH_DECODE_CUT=$cut timeout 60 $B bench moe-local --only moe_layer --tokens 1 > $W/c-$sh-$cut-$r.txt 2>&1
done; done; done
tar -czf $O/out.tgz -C $W .
