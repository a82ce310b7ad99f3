#!/usr/bin/env bash
# session 16 call 6: ncu stall reasons of the T=8192 h=2048 kernels below 92 % (FP4 dequant, NVFP4/MXFP4/FP8 quant)
# and of the probe's dequant-shaped stream
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
S=smsp__average_warps_issue_stalled
M=smsp__inst_executed.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max
for r in barrier drain lg_throttle long_scoreboard membar mio_throttle short_scoreboard wait no_instruction not_selected selected math_pipe_throttle dispatch_stall branch_resolving imc_miss misc sleeping tex_throttle; do M=$M,${S}_${r}_per_issue_active.ratio; done
export SL_PROFILE_METRICS=$M
tests/gpu/profile "kernels|dequant_nvfp4|8192|2048|sl_dequant_kernel" "kernels|quant_nvfp4|8192|2048|sl_quant_kernel" \
  "kernels|quant_mxfp4|8192|2048|sl_quant_kernel" "kernels|quant_fp8|8192|2048|sl_quant_kernel" > $W/prof.txt 2>&1
nvcc -O3 -arch=sm_90 -I. bench/probes/tail_bw.cu -o $W/tail_bw
timeout 120 ncu --clock-control none --launch-skip 3 --launch-count 1 -k regex:deq_like --section SpeedOfLight --metrics $M $W/tail_bw deq > $W/prof-probe.txt 2>&1
timeout 200 ncu --clock-control none --launch-skip 3 --launch-count 1 -k regex:sl_dequant_kernel --section SourceCounters --print-details all \
  build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192 --hidden 2048 --iters 5 > $W/prof-src.txt 2>&1
rm -f $W/tail_bw
cp $W/prof.txt $O/; tar -czf $O/out.tgz -C $W .
