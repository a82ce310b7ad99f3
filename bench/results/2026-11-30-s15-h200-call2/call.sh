#!/usr/bin/env bash
# session 15 call 2: SiLU into FP8 with e^-g by ex2.approx (rows "ex2" next to the expf default), its GPU tests;
# the grid barrier next to cooperative_groups grid.sync in the same run
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 150 build-gpu/tests/gpu_test_act > $O/gpu_test_act.txt 2>&1; echo act-rc=$?; tail -3 $O/gpu_test_act.txt
timeout 60 build-gpu/tests/gpu_test_moe_barrier > $O/gpu_test_moe_barrier.txt 2>&1; echo bar-rc=$?; tail -2 $O/gpu_test_moe_barrier.txt
timeout 120 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 1024,8192,32768 --json $O/bench-act.json > $O/bench-act.txt 2>&1; echo rc=$?
timeout 60 build-gpu/sluice bench moe-local --only grid_barrier --json $O/bench-bar.json > $O/bench-bar.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "act_silu_fp8|grid_barrier" $O/table.txt | cut -c1-170
grep -E "grid_barrier" $O/bench-bar.txt | cut -c1-200
