#!/usr/bin/env bash
# session 11 call 1 (main at 040d938: staged swizzled scales opt-in, forced in the "w8 staged" rows)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -3 $O/run.txt
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
timeout 200 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --json $O/quant.json > $O/quant.txt 2>&1; echo rc=$?
timeout 100 build-gpu/sluice bench kernels --only qknorm --tokens 4096 > $O/qk.txt 2>&1; echo rc=$?
