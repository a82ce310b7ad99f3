#!/usr/bin/env bash
# session 16 call 10: ncu stall-reason survey of the other T=8192 h=2048 rows below 92 % (a barrier or serial stall like
# the FP4 dequantizer's?), with the final code
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
S=smsp__average_warps_issue_stalled
M=smsp__inst_executed.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max,sm__warps_active.avg.pct_of_peak_sustained_active
for r in barrier drain lg_throttle long_scoreboard membar mio_throttle short_scoreboard wait no_instruction not_selected selected math_pipe_throttle branch_resolving; do M=$M,${S}_${r}_per_issue_active.ratio; done
export SL_PROFILE_METRICS=$M
tests/gpu/profile "kernels|act_silu_fp8|8192|2048|sl_act_kernel" "kernels|quant_mxfp8|8192|2048|sl_quant_kernel" \
  "kernels|dequant_fp8|8192|2048|sl_dequant_kernel" "kernels|dequant_nvfp4|8192|2048|sl_dequant_kernel" \
  "kernels|quant_mxfp4|8192|4096|sl_quant_kernel" > $W/prof.txt 2>&1
cp $W/prof.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "=====|Duration|stalled|Issued Warp|Achieved Occ|Grid Size|Registers Per" $W/prof.txt | sed 's/smsp__average_warps_issue_stalled_//' | awk '$NF+0 > 0.7 || /=====|Duration|Issued|Occ|Grid|Regist/' | cut -c1-110
