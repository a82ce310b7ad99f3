#!/usr/bin/env bash
# session 15 call 5: the write-heavy stream ceiling (bench/probes/mix_bw.cu); the FP8-out activation's sweep at
# T=8192 I=2048 with seg 2; the MoE tests that use the grid barrier (+ sanitizer on the fused dispatch); the
# quant/dequant rows at T >= 8192 for the final table
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_(device|moe_barrier|moe_dispatch|moe_layer_decode)$' > $W/run.txt 2>&1; tail -4 $W/run.txt
cp /tmp/g/gpu-tests.log $W/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/mix_bw.cu -o /tmp/mix_bw > /dev/null 2>&1 && /tmp/mix_bw > $W/mix_bw.txt 2>&1
for tool in memcheck racecheck; do
  SL_TEST_FILTER='test_qwen3_shapes' timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo san-$tool-rc=$?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $W/san-$tool.txt | head -2
done
SL_KQ_TUNE=1 timeout 100 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192 --hidden 2048 --json $W/bench-acttune.json > $W/bench-acttune.txt 2>&1; echo rc=$?
timeout 300 build-gpu/sluice bench kernels --only quant --tokens 8192,32768 --json $W/bench-quant.json > $W/bench-quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $W/mix_bw.txt $O/; tar -czf $O/out.tgz -C $W .
cat $W/mix_bw.txt
grep -E "act_silu_fp8" $W/table.txt | cut -c1-140
grep -E "T=(8192|32768) " $W/table.txt | grep -E "^  (quant|dequant)" | grep -vE " (unstaged|staged|single|pair|mb6) " | cut -c1-140
