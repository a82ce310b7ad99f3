#!/usr/bin/env bash
# session 17 call 1: the dispatch's quantizer = the kernel library's fast one (quant_dev.cuh); the last block's
# expert totals after its copies. GPU tests of dispatch and layer; dispatch rows at the decode and prefill T.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_layer$' > $W/run.txt 2>&1; tail -5 $W/run.txt
grep -E "tests passed|Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -8
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 300 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 1,8,32,128,16384 --json $W/disp.json > $W/disp.txt 2>&1; echo rc=$?
cp $W/disp.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
grep -vE "bal |scan|rows|nopdl" $W/disp.txt | awk '{printf "%-18s %-14s %-6s %-12s", $1,$2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-150 | head -80
