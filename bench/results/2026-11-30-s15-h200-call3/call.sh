#!/usr/bin/env bash
# session 15 call 3: the tune sweep of the FP8-out activation with ex2 (SL_KQ_TUNE=1), the 40-register
# quantizers at 8 blocks per SM (SL_KQ_TUNE=mb rows "mb8"), the barrier probe and bench on one machine
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
nvcc -O3 -std=c++17 -arch=sm_90 -I$PWD bench/probes/barrier_probe.cu -o /tmp/barrier_probe > /dev/null 2>&1
/tmp/barrier_probe 132 > $O/probe132.txt 2>&1
timeout 60 build-gpu/sluice bench moe-local --only grid_barrier --json $O/bench-bar.json > $O/bench-bar.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 200 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192,32768 --json $O/bench-act.json > $O/bench-act.txt 2>&1; echo rc=$?
SL_KQ_TUNE=mb timeout 250 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --hidden 2048,4096 --json $O/bench-q.json > $O/bench-q.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "act_silu_fp8" $O/table.txt | cut -c1-150
grep -E "mb8" -B1 $O/table.txt | grep -v "^--" | cut -c1-150
grep -E "grid_barrier" $O/table.txt | cut -c1-110; grep -E " sl | cg " $O/probe132.txt | head -2
