#!/usr/bin/env bash
# Session 36 call 3 (experiment; uncommitted patch: kernels/quant.cu QSKEL + kernels/quant.c env SL_EXP_SKEL): our
# FP8 group quantizer with Triton's group-kernel math (codes e4m3(x * 448/absmax), no NaN/tiny paths) against our
# default and triton-grp in fixed CUDA graphs (tmp_skel_probe.py), and ncu of the three at T=128 H=4096.
O=$1; export OUT=/tmp/run36; mkdir -p $OUT; W=/tmp/w36; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/build-run.txt 2>&1; tail -1 $W/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 240 python3 tmp_skel_probe.py build-gpu/libsluice_peer_ffi.so > $O/skel.txt 2>&1; echo "probe rc=$?"; el probe
M=sm__inst_executed.sum,gpu__time_duration.sum,sm__cycles_active.max,smsp__cycles_active.avg
nc() { timeout 90 ncu --clock-control none --cache-control none --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --metrics $M --launch-skip 5 --launch-count 1 "$@"; }
P=bench/probes/triton_fp8_once.py
nc -k regex:fp8_group_quant python3 $P 128 4096 > $W/ncu-triton.txt 2>&1
nc -k regex:sl_quant_kernel python3 $P 128 4096 --ours build-gpu/libsluice_peer_ffi.so > $W/ncu-ours.txt 2>&1
SL_EXP_SKEL=1 nc -k regex:sl_quant_kernel python3 $P 128 4096 --ours build-gpu/libsluice_peer_ffi.so > $W/ncu-skel.txt 2>&1
for f in triton ours skel; do echo "== $f"; grep -E "Duration|Registers Per|inst_executed.sum|cycles_active|Block Size|Grid Size|Stall|Warp Cycles|Issued Warp|Achieved Occ" $W/ncu-$f.txt; done > $O/ncu.txt
el ncu; cat $O/skel.txt; cat $O/ncu.txt | cut -c1-140
