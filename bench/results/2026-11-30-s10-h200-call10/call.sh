#!/usr/bin/env bash
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
timeout 300 build-gpu/sluice bench kernels --json $O/bench-kernels.json > $O/bench-kernels.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O 2>&1 | tail -80
