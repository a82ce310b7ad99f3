#!/usr/bin/env bash
# session 16 call 4: the per-lane entry rule (T <= one wave) tested and benched; ncu of the FP4 dequantizer vs the probe's stream
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $W/run.txt 2>&1; tail -3 $W/run.txt; cp /tmp/g/gpu-tests.log $W/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 1024,8192 --json $W/bench-deq.json > $W/bench-deq.txt 2>&1; echo rc=$?
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_write.sum,smsp__inst_executed.sum,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__warps_launched.sum
SL_PROFILE_METRICS=$M tests/gpu/profile "kernels|dequant_nvfp4|8192|2048|sl_dequant_kernel" > $W/prof-real.txt 2>&1
nvcc -O3 -arch=sm_90 -I. bench/probes/tail_bw.cu -o $W/tail_bw
timeout 120 ncu --clock-control none --launch-skip 3 --launch-count 1 -k regex:deq_like --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --metrics $M $W/tail_bw deq > $W/prof-probe.txt 2>&1
rm -f $W/tail_bw
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "dequant" $W/table.txt | cut -c1-150
