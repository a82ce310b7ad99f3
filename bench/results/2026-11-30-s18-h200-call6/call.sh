#!/usr/bin/env bash
# session 18 call 6 (final code, benchmark): issue #4's table -- grid barrier, dispatch and combine at every T for
# both routings, the Qwen3-30B-A3B layer at T <= 128.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
timeout 30 $B bench moe-local --only grid_barrier > $W/barrier.txt 2>&1; echo rc=$?
timeout 200 $B bench moe-local --only moe_dispatch --json $W/dispatch.json > $W/dispatch.txt 2>&1; echo rc=$?
timeout 90 $B bench moe-local --only moe_combine --json $W/combine.json > $W/combine.txt 2>&1; echo rc=$?
timeout 120 $B bench moe-local --only moe_layer --tokens 1,8,32,128 --json $W/layer.json > $W/layer.txt 2>&1; echo rc=$?
cp $W/*.txt $W/*.json $O/; tar -czf $O/out.tgz -C $W .
cat $W/barrier.txt $W/dispatch.txt $W/combine.txt $W/layer.txt | grep -E "^(grid|moe)" | grep -vE "forced|comparison|phases|stage/" | awk '{printf "%-14s %-14s %-7s %-20s", $1,$2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-140
