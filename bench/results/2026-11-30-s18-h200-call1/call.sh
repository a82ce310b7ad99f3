#!/usr/bin/env bash
# session 18 call 1: re-verify (gpu_test_moe_layer, route dispatch under memcheck/racecheck) after session 17's last
# dispatch change; DeepSeek-V3 T=16384 dispatch events vs graph (alone, after T=4096, more iterations); ncu of the
# quantized prefill copy (Qwen3 T=16384, mxfp4 and fp8-g128); quantized rows with whole rows per item.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_layer$|gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -6
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for tool in memcheck racecheck; do
timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu_test_moe_route_dispatch > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $W/san-$tool.txt
done
B="timeout 100 build-gpu/sluice bench moe-local"
SL_BENCH_PAYLOAD=3 $B --only moe_dispatch --tokens 16384 --hidden 7168 > $W/ds-a.txt 2>&1; echo rc=$?
SL_BENCH_PAYLOAD=3 $B --only moe_dispatch --tokens 4096,16384 --hidden 7168 > $W/ds-b.txt 2>&1; echo rc=$?
SL_BENCH_PAYLOAD=3 $B --only moe_dispatch --tokens 16384 --hidden 7168 --iters 40 > $W/ds-c.txt 2>&1; echo rc=$?
for f in a b c; do grep -E "^moe_dispatch" $W/ds-$f.txt | grep "T=16384" | cut -c24-140 | sed "s/^/$f /"; done
$B --only quant --tokens 4096,16384 > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/quant.txt | cut -c24-150
M=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,dram__bytes_write.sum,dram__bytes_read.sum,sm__cycles_active.avg,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_write.sum
for p in 3 1; do
SL_BENCH_PAYLOAD=$p SL_PROFILE_METRICS=$M tests/gpu/profile "moe-local|moe_dispatch_quant|16384|2048|sl_moe_dispatch_copy" > $W/prof$p.txt 2>&1; echo prof$p-rc=$?
done
cp $W/*.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
