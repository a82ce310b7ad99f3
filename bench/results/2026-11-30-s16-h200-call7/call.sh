#!/usr/bin/env bash
# session 16 call 7: NaN scale bytes' entries without the reference's decodes (fp4_entry), negative refused bytes by their
# magnitude's decode16 + sign flip: gpu_test_quant, the FP4 dequantizer's rows, its stall reasons again
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $W/run.txt 2>&1; tail -3 $W/run.txt; cp /tmp/g/gpu-tests.log $W/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 1024,8192,32768 --json $W/bench-deq.json > $W/bench-deq.txt 2>&1; echo rc=$?
timeout 200 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 --json $W/bench-deq2.json > $W/bench-deq2.txt 2>&1; echo rc=$?
S=smsp__average_warps_issue_stalled
M=smsp__inst_executed.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max
for r in barrier drain lg_throttle long_scoreboard mio_throttle short_scoreboard wait no_instruction not_selected selected math_pipe_throttle; do M=$M,${S}_${r}_per_issue_active.ratio; done
SL_PROFILE_METRICS=$M tests/gpu/profile "kernels|dequant_nvfp4|8192|2048|sl_dequant_kernel" > $W/prof.txt 2>&1
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "dequant" $W/table.txt | cut -c1-150
grep -E "Duration|stalled" $W/prof.txt | sed 's/smsp__average_warps_issue_stalled_//'
