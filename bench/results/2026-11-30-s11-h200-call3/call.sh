#!/usr/bin/env bash
# session 11 call 3: the dequant pipelining (DEQ_PIPE) tests and rows
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -2 $O/run.txt
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
SL_KQ_GRID=1 SL_KQ_TUNE=1 timeout 240 build-gpu/sluice bench kernels --only dequant_ --tokens 8192,32768 --json $O/deq.json > $O/deq.txt 2>&1; echo rc=$?
SL_BENCH_KERNEL_TIME=0 SL_PROFILE_TIMEOUT=90 tests/gpu/profile "kernels|dequant_nvfp4|32768|2048|sl_dequant_kernel|1|12" > $O/prof.txt 2>&1; echo rc=$?
grep -E "T=32768" $O/deq.txt | grep -v "s0\|s4 \|s8\|s32" | cut -c1-100 | head -70
