#!/usr/bin/env bash
# Session 31 call 2: the RMSNorm launches at T=1024 in fixed CUDA graphs (peer_sweep --graph) with two new
# candidate kinds -- rsqrt for the row's factor up to T=1024 (one wave: the row's latency is the kernel's) and the
# one-row kernel forced on full grids (SL_RMSNORM_LOOP_OFF; the Triton fused row at T=1024 h=2048 issues 186
# instructions per warp to our 264, call 1) -- plain and fused, h=2048/4096/7168; ncu + SASS of SiLU-and-mul at
# T=1 I=4096 against torch.compile (0.01-0.04 us ahead in s30's graphs).
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 200 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 6 \
  --ops rms,rmsres --tokens 1024 --hidden 2048,4096,7168 --budget-s 180 > $W/sweep-rms.txt 2>&1
echo "sweep rc=$?"; el
M=sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,gpu__time_duration.sum,sm__cycles_active.max
nc() { timeout 90 ncu --clock-control none --cache-control none --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section LaunchStats --metrics $M --launch-skip 5 --launch-count 1 "$@"; }
P=bench/probes/act_once.py
TRITON_CACHE_DIR=$W/tc nc -k regex:triton_ python3 $P 1 4096 > $W/ncu-compile.txt 2>&1
SL_CACHE_DIR=$W/jc nc -k regex:sl_act_kernel python3 $P 1 4096 --ours build-gpu/libsluice_peer_ffi.so \
  > $W/ncu-ours.txt 2>&1
for f in $(find $W/tc $W/jc -name '*.cubin' 2>/dev/null); do cuobjdump -sass $f > $W/sass-$(basename $f).txt 2>&1; done
rm -rf $W/tc $W/jc
for f in compile ours; do echo "== $f"; grep -E "Duration|Registers Per|inst_executed.sum|cycles_active.max|Block Size|Grid Size|max \|" $W/ncu-$f.txt; done
el
grep -E "^==|^ +[0-9]|^#" $W/sweep-rms.txt | cut -c1-120
