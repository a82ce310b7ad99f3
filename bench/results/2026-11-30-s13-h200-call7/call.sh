#!/usr/bin/env bash
# session 13 call 7: the MXFP4 quantizer on rows of <= 16 chunks on the resident grid at every size; gpu_test_quant,
# then the MXFP4 rows at T=8192/32768 with the res/full rows
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -1 $O/run.txt; grep -E "Passed|Failed|Timeout" /tmp/g/gpu-tests.log | tail -2
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_GRID=1 timeout 150 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 1024,8192,32768 --json $O/bench-quant.json > $O/quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "T=(1024|8192|32768) " $O/table.txt | cut -c3-60,118-175
