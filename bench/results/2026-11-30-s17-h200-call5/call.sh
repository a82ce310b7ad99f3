#!/usr/bin/env bash
# session 17 call 5 (experiment, not committed: SL_XU=2 = the replicated dispatch at 2 vectors per lane per item, 7
# warps -> 2 blocks per DSv3 token); ncu stall reasons of the DSv3 T=128 replicated dispatch (default) and of the
# Qwen3 T=16384 fp8-g128 prefill copy.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for i in 1 2; do for u in 1 2; do
SL_XU=$u timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 32,128 --hidden 7168 > $W/disp-u$u-$i.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/disp-u$u-$i.txt | grep -vE "bal |scan|fused-coop| w[0-9]" | awk -v u=$u '{printf "u%s %-6s %-10s %s %s %s\n", u, $3, $4, $(NF-1), $NF, $5}' | cut -c1-100
done; done
M=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,dram__bytes_write.sum,dram__bytes_read.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min
SL_PROFILE_METRICS=$M tests/gpu/profile "moe-local|moe_dispatch|128|7168|sl_moe_dispatch_replicated" "moe-local|moe_dispatch_quant|16384|2048|sl_moe_dispatch_copy" > $W/prof.txt 2>&1; echo prof-rc=$?
cp $W/disp-*.txt $W/prof.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "=====|Duration|Registers|Achieved Occupancy|Warp Cycles Per Issued|ratio|sectors|bytes_|cycles_active|Memory Throughput|DRAM Throughput|Block Size|Grid Size" $W/prof.txt | cut -c1-130 | head -80
