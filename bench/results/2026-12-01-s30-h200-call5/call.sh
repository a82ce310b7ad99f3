#!/usr/bin/env bash
# Session 30 call 5: why the Triton fused residual-add RMSNorm row kernel is 3-8 % ahead of ours at decode in an
# L2-resident graph (call 2/4: T=1 h=7168 1.92 vs 1.99 us, T=128 h=7168 2.58 vs 2.79): ncu of one warm launch each
# (--cache-control none: the inputs stay in L2, as in the graphs) at T=1 and T=128 h=7168, and the SASS of both.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
M=sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_active.max
nc() { timeout 90 ncu --clock-control none --cache-control none --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics $M --launch-skip 5 \
  --launch-count 1 "$@"; }
P=bench/probes/rms_res_once.py
for T in 1 128; do
  CUBIN_OUT=$W/triton-$T.cubin nc -k regex:rms_res_row python3 $P $T 7168 > $W/ncu-triton-$T.txt 2>&1
  SL_CACHE_DIR=$W/jc-$T nc -k regex:sl_rmsnorm_fwd python3 $P $T 7168 --ours build-gpu/libsluice_peer_ffi.so \
    > $W/ncu-ours-$T.txt 2>&1
  el
done
python3 - $W <<'PY'
import glob, subprocess, sys
W = sys.argv[1]
def sass(path, out):
    d = open(path, 'rb').read()
    d = d[d.index(b'\x7fELF'):]
    open(out + '.elf', 'wb').write(d)
    r = subprocess.run(['cuobjdump', '-sass', out + '.elf'], capture_output=True, text=True)
    open(out, 'w').write(r.stdout + r.stderr)
for T in (1, 128):
    for f in glob.glob(f'{W}/jc-{T}/sl_rmsnorm_fwd-*.cubin'):
        sass(f, f'{W}/sass-ours-{T}.txt')
    sass(f'{W}/triton-{T}.cubin', f'{W}/sass-triton-{T}.txt')
PY
rm -f $W/*.elf
for f in triton-1 ours-1 triton-128 ours-128; do echo "== $f"; grep -E "Duration|Registers Per|Achieved Occupancy|inst_executed.sum|Warp Cycles Per Issued|cycles_active.max|Block Size|Grid Size" $W/ncu-$f.txt; done
el
