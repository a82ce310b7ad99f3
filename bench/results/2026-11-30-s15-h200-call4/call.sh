#!/usr/bin/env bash
# session 15 call 4: the FP8-out activation at seg 2 (with ex2), the staged NVFP4 quantizer at 8 blocks per SM,
# the grid barrier's outcome by bar.red.or; their GPU tests; barrier probe + bench on one machine
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
nvcc -O3 -std=c++17 -arch=sm_90 -I$PWD bench/probes/barrier_probe.cu -o /tmp/barrier_probe > /dev/null 2>&1
/tmp/barrier_probe 132 > $O/probe132.txt 2>&1
timeout 60 build-gpu/sluice bench moe-local --only grid_barrier --json $O/bench-bar.json > $O/bench-bar.txt 2>&1; echo rc=$?
timeout 60 build-gpu/tests/gpu_test_moe_barrier > $O/gpu_test_moe_barrier.txt 2>&1; echo bar-rc=$?
timeout 150 build-gpu/tests/gpu_test_act > $O/gpu_test_act.txt 2>&1; echo act-rc=$?
timeout 150 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 1,16,128,1024,8192,32768 --json $O/bench-act.json > $O/bench-act.txt 2>&1; echo rc=$?
SL_KQ_TUNE=mb timeout 150 build-gpu/sluice bench kernels --only quant_nvfp4 --tokens 1024,8192,32768 --json $O/bench-nv.json > $O/bench-nv.txt 2>&1; echo rc=$?
SL_TEST_FILTER='test_qwen3_shapes' timeout 120 build-gpu/tests/gpu_test_moe_dispatch > $O/gpu_test_moe_dispatch.txt 2>&1; echo disp-rc=$?
timeout 280 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo quant-rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
for f in act quant moe_barrier moe_dispatch; do tail -1 $O/gpu_test_$f.txt; done
grep -E "act_silu_fp8" $O/table.txt | grep -E "T=(8192|32768|1|16) " | cut -c1-140
grep -E "quant_nvfp4" $O/table.txt | grep -vE "unstaged|single" | cut -c1-140
grep -E "grid_barrier" $O/table.txt | cut -c1-110; grep -E " sl | slold | cg " $O/probe132.txt | head -3
