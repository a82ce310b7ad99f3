#!/usr/bin/env bash
# session 13 call 9: final check of the defaults after call 8 (NVFP4 QPAIR on; staged swizzled scales at h=7168 with
# it): gpu_test_quant's test_qpair (the table's staging, forced QPAIR on/off), then the NVFP4 quant rows
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_[q]*' timeout 60 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; grep -E "OK|FAIL|PASSED|ERROR" $O/gpu_test_quant.txt | tail -4
timeout 40 build-gpu/sluice bench kernels --only quant_nvfp4 --tokens 8192,32768 --json $O/bench-quant.json > $O/quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "T=(8192|32768) " $O/table.txt | cut -c3-60,118-175
