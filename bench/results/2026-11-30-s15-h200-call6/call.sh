#!/usr/bin/env bash
# session 15 call 6: the local MoE benchmark at every shape (issue #4's table, with the grid barrier's bar.red.or)
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 420 build-gpu/sluice bench moe-local --json $W/bench-moe-local.json > $W/bench-moe-local.txt 2>&1; echo rc=$?
cp $W/bench-moe-local.txt $O/; tar -czf $O/out.tgz -C $W .
grep -vE "forced|comparison" $W/bench-moe-local.txt | cut -c1-160 | head -90
