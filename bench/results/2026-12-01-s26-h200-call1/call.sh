#!/usr/bin/env bash
# Session 26 call 1: (a) A/B of the split path's routing kernel launched as a programmatic dependent of the previous
# kernel (rpdl.patch, device only: griddepcontrol.wait at its start, the trigger after it; SL_TMP_RPDL=1 sets the
# launch attribute); (b) where the routing ends beside the copy (SL_BENCH_KERNEL_PARTS); (c) ncu of the routing
# kernel alone, DeepSeek-V3 nvfp4 and Qwen3 mxfp4 T=16384, with source counters.
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s26-h200-call1/rpdl.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
row() { grep -E "^moe_dispatch" $1 | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" |
  sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
  awk '{print $1, $2, $3, $4, $7, $NF}' | tr '\n' ';'; echo; }
i=0
for v in 0 1 0 1; do
  i=$((i + 1)); f=$W/d$i-rpdl$v.txt
  if [ $v = 1 ]; then export SL_TMP_RPDL=1; else unset SL_TMP_RPDL; fi
  timeout 90 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 4096,16384 > $f 2>&1; echo "rpdl $v rc=$?"
  row $f
done
unset SL_TMP_RPDL
el
for v in 0 1; do
  if [ $v = 1 ]; then export SL_TMP_RPDL=1; else unset SL_TMP_RPDL; fi
  for p in 3 4; do
    f=$W/parts-p$p-rpdl$v.txt
    SL_BENCH_KERNEL_PARTS=1 SL_BENCH_PAYLOAD=$p timeout 60 build-gpu/sluice bench moe-local --only quant \
      --tokens 16384 > $f 2>&1; echo "parts p$p rpdl $v rc=$?"
    grep -E "kernel parts|^moe_dispatch_quant" $f | sed -E 's/ +/ /g' | cut -c1-110 | head -24
  done
done
unset SL_TMP_RPDL
el
for spec in "7168 4 d" "2048 3 q"; do
  set -- $spec
  SL_BENCH_PAYLOAD=$2 timeout 150 ncu --clock-control none --launch-skip 3 --launch-count 1 -k regex:sl_moe_dispatch_route \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters \
    --section MemoryWorkloadAnalysis --section SchedulerStats -o $W/route-$3 -f \
    build-gpu/sluice bench moe-local --only quant --tokens 16384 --hidden $1 --iters 5 > $W/ncu-$3.log 2>&1
  echo "ncu $3 rc=$?"
  ncu --import $W/route-$3.ncu-rep --print-summary none > $W/ncu-$3-details.txt 2>&1
  grep -E "Duration|Registers|Warp Cycles Per Issued|Achieved Occupancy|Memory Throughput" $W/ncu-$3-details.txt | head -8
  ncu --import $W/route-$3.ncu-rep --page source --csv --print-source sass > $W/ncu-$3-sass.csv 2>&1
  wc -l $W/ncu-$3-sass.csv
done
el
