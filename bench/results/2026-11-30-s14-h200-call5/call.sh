#!/usr/bin/env bash
# session 14 call 5 (final code): gpu_test_act and gpu_test_quant, then the act/quant/dequant rows of
# `sluice bench kernels` at every T (the table for the note)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_(act|device)$' > $O/run.txt 2>&1; tail -3 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; tail -2 $O/gpu_test_quant.txt
timeout 160 build-gpu/sluice bench kernels --only act_ --json $O/bench-act.json > $O/bench-act.txt 2>&1; echo rc=$?
timeout 240 build-gpu/sluice bench kernels --only quant --json $O/bench-quant.json > $O/bench-quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "T=(8192|32768) " $O/table.txt | grep -v comparison | grep -vE " (unstaged|staged|single|mb6) " | cut -c1-150
