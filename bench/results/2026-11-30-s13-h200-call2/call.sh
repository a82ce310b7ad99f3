#!/usr/bin/env bash
# session 13 call 2: the dequantizer's rows grouped by scale sector (SWZ_STAGE in sl_dequant_kernel, forced by the
# stage override): gpu_test_quant (run_staged and test_dequant_any_bytes run it), then the dequant rows with the
# "grouped" comparison rows
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -3 $O/run.txt; grep -E "Passed|Failed|Timeout" /tmp/g/gpu-tests.log | tail -3
grep -B2 -A12 "FAILED\|fail" /tmp/g/gpu-tests.log | head -40
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 1024,8192,32768 --json $O/deq.json > $O/deq.txt 2>&1; echo rc=$?
grep -E "dequant" $O/deq.txt | cut -c1-150
