#!/usr/bin/env bash
# session 17 call 6 (final code): the whole local MoE benchmark (issue #4's table: barrier, dispatch, combine, layer).
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 480 build-gpu/sluice bench moe-local --json $W/bench-moe-local.json > $W/bench-moe-local.txt 2>&1; echo rc=$?
cp $W/bench-moe-local.txt $O/; tar -czf $O/out.tgz -C $W .
grep -vE "forced|comparison|phases|stage/" $W/bench-moe-local.txt | awk '{printf "%-14s %-14s %-7s %-24s", $1,$2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-130 | head -120
