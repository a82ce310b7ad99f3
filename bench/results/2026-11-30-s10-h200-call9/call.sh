#!/usr/bin/env bash
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; grep -E "tests passed|Failed|FAIL" $O/run.txt | head -5
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
timeout 200 build-gpu/sluice bench kernels --only quant_ --tokens 1,16,8192,32768 > $O/quant.txt 2>&1
grep -E "^(quant|dequant)_(mx|nv)fp4" $O/quant.txt | awk '{printf "%-18s %-8s %-7s %8s %7s graph %s kern %s\n",$1,$2,$3,$5,$7,$(NF-3),$(NF-1)}'
