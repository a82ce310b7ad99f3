#!/usr/bin/env bash
# session 14 call 9 (the final code): gpu_test_quant, then the MXFP4 quantizer rows at T=8192/32768 (the whole-block
# lane only on rows of more than 16 chunks now)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; tail -2 $O/gpu_test_quant.txt
timeout 60 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 8192,32768 --json $O/bench-mx.json > $O/bench-mx.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "quant_mxfp4" $O/table.txt | cut -c1-150
