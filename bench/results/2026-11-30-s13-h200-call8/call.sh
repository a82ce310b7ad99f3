#!/usr/bin/env bash
# session 13 call 8: the NVFP4 quantizer with a whole 16-element block per lane (QPAIR; Hopper table on): the NVFP4
# rows at T=1024/8192/32768 with the "single" comparison rows, then gpu_test_quant (test_qpair: forced on and off)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 100 build-gpu/sluice bench kernels --only quant_nvfp4 --tokens 1024,8192,32768 --json $O/bench-quant.json > $O/quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "T=(1024|8192|32768) " $O/table.txt | cut -c3-60,118-175
timeout 230 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; grep -E "OK|FAIL|PASSED|ERROR" $O/gpu_test_quant.txt | tail -12
