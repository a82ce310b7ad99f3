#!/usr/bin/env bash
# session 15 call 7: the plain replicated dispatch at unroll 2 / 4 (force_repl_unroll, rows "replicated u2/u4"),
# its GPU tests (every case of the replicated path)
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 120 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 1,8,32,128 --json $W/bench-disp.json > $W/bench-disp.txt 2>&1; echo rc=$?
timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $W/gpu_test_moe_dispatch.txt 2>&1; echo disp-rc=$?; tail -2 $W/gpu_test_moe_dispatch.txt
grep -c "unroll 2)\|unroll 4)" $W/gpu_test_moe_dispatch.txt
cp $W/bench-disp.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "moe_dispatch " $W/bench-disp.txt | grep -E "replicated( |$| u)|T=128" | cut -c1-150
