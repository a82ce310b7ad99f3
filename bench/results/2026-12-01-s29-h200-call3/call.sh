#!/usr/bin/env bash
# Session 29 call 3: why our FP8 group quantizer trails the Triton group kernel at T=8192 H=2048 by kernel time:
# ncu of Triton's kernel (bench/probes/triton_fp8_once.py), ours at Triton's launch shape (4 warps, one 256-element
# chunk per warp, 16 blocks per SM) and ours at the table's, and the SASS of each (cuobjdump -sass). The saved SASS
# of ours is trimmed to sl_quant_kernel (the cubin holds the dequantizer too).
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread NCCL_NVLS_ENABLE=0 SL_NVLS=0
M=sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
nc() { timeout 90 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section LaunchStats --metrics $M --launch-skip 3 --launch-count 1 "$@"; }
P=bench/probes/triton_fp8_once.py
CUBIN_OUT=$W/triton.cubin PTX_OUT=$W/triton.ptx nc -k regex:fp8_group_quant python3 $P 8192 2048 > $W/ncu-triton.txt 2>&1
SL_CACHE_DIR=$W/jc-w4 nc -k regex:sl_quant_kernel python3 $P 8192 2048 --ours build-gpu/libsluice_peer_ffi.so \
  --launch 4,1,0,16 > $W/ncu-ours-w4.txt 2>&1
SL_CACHE_DIR=$W/jc-def nc -k regex:sl_quant_kernel python3 $P 8192 2048 --ours build-gpu/libsluice_peer_ffi.so \
  > $W/ncu-ours-def.txt 2>&1
python3 - $W <<'PY'
import glob, os, subprocess, sys
W = sys.argv[1]
def sass(path, out):
    d = open(path, 'rb').read()
    d = d[d.index(b'\x7fELF'):]
    open(out + '.elf', 'wb').write(d)
    r = subprocess.run(['cuobjdump', '-sass', out + '.elf'], capture_output=True, text=True)
    open(out, 'w').write(r.stdout + r.stderr)
for name, pat in (('w4', 'jc-w4'), ('def', 'jc-def')):
    for f in glob.glob(f'{W}/{pat}/sl_quant_kernel-*.cubin'):
        sass(f, f'{W}/sass-ours-{name}.txt')
sass(f'{W}/triton.cubin', f'{W}/sass-triton.txt')
PY
for f in triton ours-w4 ours-def; do echo "== $f"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|No Eligible|inst_executed.sum|Warp Cycles Per Issued" $W/ncu-$f.txt; done
el
