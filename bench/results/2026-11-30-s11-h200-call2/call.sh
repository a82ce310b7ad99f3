#!/usr/bin/env bash
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
SL_KQ_GRID=1 timeout 240 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --json $O/quant.json > $O/quant.txt 2>&1; echo rc=$?
SL_KQ_GRID=1 timeout 120 build-gpu/sluice bench kernels --only act_ --tokens 8192,32768 --json $O/act.json > $O/act.txt 2>&1; echo rc=$?
SL_BENCH_KERNEL_TIME=0 SL_PROFILE_TIMEOUT=90 tests/gpu/profile "kernels|quant_nvfp4|32768|2048|sl_quant_kernel" "kernels|dequant_nvfp4|32768|2048|sl_dequant_kernel" "kernels|quant_mxfp4|32768|2048|sl_quant_kernel" > $O/prof.txt 2>&1; echo rc=$?
grep -E "T=32768" $O/quant.txt | cut -c1-110 | head -60
