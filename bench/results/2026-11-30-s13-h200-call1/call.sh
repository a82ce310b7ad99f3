#!/usr/bin/env bash
# session 13 call 1: FP4 dequant table entries from two quotients (fp4_entry); gpu_test_quant, dequant rows, tune sweep
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -3 $O/run.txt; grep -E "Passed|Failed|Timeout" /tmp/g/gpu-tests.log | tail -3
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 150 build-gpu/sluice bench kernels --only dequant_ --json $O/deq.json > $O/deq.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 > $O/tune.txt 2>&1; echo rc=$?
grep -E "dequant" $O/deq.txt | grep -E "T=(1|128|8192|32768) " | cut -c1-150
grep -E "dequant" $O/tune.txt | cut -c1-150
