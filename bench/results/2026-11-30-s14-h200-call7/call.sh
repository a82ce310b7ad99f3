#!/usr/bin/env bash
# session 14 call 7: the local MoE benchmark at every shape (issue #4's table; no MoE code changed this session)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 420 build-gpu/sluice bench moe-local --json $O/bench-moe-local.json > $O/bench-moe-local.txt 2>&1; echo rc=$?
grep -vE "forced|comparison" $O/bench-moe-local.txt | cut -c1-160 | head -90
