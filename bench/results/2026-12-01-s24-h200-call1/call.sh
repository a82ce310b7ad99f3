#!/usr/bin/env bash
# session 24 call 1 (as sent, but for the patch path: it read bench/results/ahead.patch.tmp, a name .gitignore
# keeps off the device, so `patch -R` failed and /tmp/sl-base = /tmp/sl-ahead: both binaries had ahead.patch).
# The direct copy's routing ids loaded a pass ahead (ahead.patch) vs before, A/B on one machine; scatter_bw's
# DeepSeek-V3 quantized rows at compact and dropless capacity; ncu of the direct copy (DSv3 T=16384 mxfp4) and the
# probe's qscatter (compact, dropless).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
t0=$(date +%s)
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
cp build-gpu/sluice /tmp/sl-ahead
SL_TEST_FILTER='test_[qsd]*' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test-rc=$?; tail -2 $W/test.txt
patch -R -p1 < bench/results/ahead.patch.tmp > /dev/null && cmake --build build-gpu --target sluice -j16 > $W/rebuild.txt 2>&1; echo rebuild=$?
cp build-gpu/sluice /tmp/sl-base
echo "t=$(( $(date +%s) - t0 ))"
(cd bench/probes && nvcc -O3 -arch=sm_90 -I../.. scatter_bw.cu -o /tmp/scatter_bw) && timeout 90 /tmp/scatter_bw deepseek > $W/probe.txt 2>&1; echo probe=$?
for r in 1 2; do for v in base ahead; do for p in 3 4; do
  SL_BENCH_PAYLOAD=$p timeout 100 /tmp/sl-$v bench moe-local --only quant --tokens 16384 > $W/q$p-$v-$r.txt 2>&1
  echo "$v r$r p$p rc=$? $(grep -E '^moe_dispatch_quant' $W/q$p-$v-$r.txt | awk '{print $3, $4, $5, $6, $9, $10, $11}' | tr '\n' ';')"
done; done; done
echo "t=$(( $(date +%s) - t0 ))"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,lts__t_sector_op_write_hit_rate.pct,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
NC="timeout 100 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics $M"
$NC --launch-skip 2 --launch-count 1 -k regex:qscatter /tmp/scatter_bw deepseek "quantized: mxfp4" > $W/ncu-probe-compact.txt 2>&1; echo ncu-probe=$?
$NC --launch-skip 50 --launch-count 1 -k regex:qscatter /tmp/scatter_bw deepseek "quantized: mxfp4" > $W/ncu-probe-dropless.txt 2>&1; echo ncu-probe=$?
cp /tmp/sl-ahead build-gpu/sluice
SL_BENCH_PAYLOAD=3 SL_PROFILE_METRICS=$M SL_PROFILE_TIMEOUT=120 tests/gpu/profile "moe-local|moe_dispatch_quant|16384|7168|sl_moe_dispatch_copy_direct" > $W/ncu-direct.txt 2>&1; echo ncu-direct=$?
echo "t=$(( $(date +%s) - t0 ))"
