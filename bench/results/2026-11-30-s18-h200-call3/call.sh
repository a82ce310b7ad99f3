#!/usr/bin/env bash
# session 18 call 3: the FP4 payload copy compiled for 6 blocks per SM (the table in moe_dispatch.cu); quantized
# dispatch GPU tests; quantized prefill rows T=4096,16384; ncu of the routing kernel (Qwen3, DSv3 T=16384) and of the
# mxfp4 copy with the new stores.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_quantized_*' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/test-quant.txt 2>&1; echo test-rc=$?; tail -3 $W/test-quant.txt
B="timeout 120 build-gpu/sluice bench moe-local"
$B --only quant --tokens 4096,16384 > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/quant.txt | grep -v rows | cut -c24-150
M=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,dram__bytes_write.sum,dram__bytes_read.sum,sm__cycles_active.avg,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
SL_PROFILE_METRICS=$M tests/gpu/profile "moe-local|moe_dispatch|16384|2048|sl_moe_dispatch_route" "moe-local|moe_dispatch|16384|7168|sl_moe_dispatch_route" > $W/prof-route.txt 2>&1; echo prof-rc=$?
SL_BENCH_PAYLOAD=3 SL_PROFILE_METRICS=$M tests/gpu/profile "moe-local|moe_dispatch_quant|16384|2048|sl_moe_dispatch_copy" > $W/prof-copy3.txt 2>&1; echo prof-rc=$?
cp $W/*.txt $O/; tar -czf $O/out.tgz -C $W .
