#!/usr/bin/env bash
# Session 31 call 1: the fused RMSNorm T=1024 h=4096 table entry (e=16, 2 rows per block, weight in registers,
# resident) -- gpu_test_norm's table points and the rmsres graph sweep at T=1024; torch_peers' act_*_fp8 rows with
# the triton-ieee peer (not run before); ncu + SASS of the fused RMSNorm at T=1024 h=2048 (Triton 3.43 vs ours 3.49).
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_rmsnorm_table_points' stdbuf -oL timeout 120 build-gpu/tests/gpu_test_norm > $W/gpu_test_norm.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR" $W/gpu_test_norm.txt | tail -4; el
timeout 70 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 4 \
  --ops rmsres --tokens 1024 --hidden 2048,4096 --budget-s 55 > $W/sweep-rmsres.txt 2>&1
echo "sweep rc=$?"; el
timeout 150 python3 bench/torch_peers.py --tokens 1,16,128,1024 --ops 'act_*_fp8' --budget-s 130 \
  --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
M=sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_active.max
nc() { timeout 90 ncu --clock-control none --cache-control none --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics $M --launch-skip 5 \
  --launch-count 1 "$@"; }
P=bench/probes/rms_res_once.py
CUBIN_OUT=$W/triton.cubin nc -k regex:rms_res_row python3 $P 1024 2048 > $W/ncu-triton.txt 2>&1
SL_CACHE_DIR=$W/jc nc -k regex:sl_rmsnorm_fwd python3 $P 1024 2048 --ours build-gpu/libsluice_peer_ffi.so \
  > $W/ncu-ours.txt 2>&1
python3 - $W <<'PY'
import glob, subprocess, sys
W = sys.argv[1]
def sass(path, out):
    d = open(path, 'rb').read()
    d = d[d.index(b'\x7fELF'):]
    open(out + '.elf', 'wb').write(d)
    r = subprocess.run(['cuobjdump', '-sass', out + '.elf'], capture_output=True, text=True)
    open(out, 'w').write(r.stdout + r.stderr)
for f in glob.glob(f'{W}/jc/sl_rmsnorm_fwd-*.cubin'):
    sass(f, f'{W}/sass-ours.txt')
sass(f'{W}/triton.cubin', f'{W}/sass-triton.txt')
PY
rm -f $W/*.elf; rm -rf $W/jc
for f in triton ours; do echo "== $f"; grep -E "Duration|Registers Per|Achieved Occupancy|inst_executed.sum|Warp Cycles Per Issued|cycles_active.max|Block Size|Grid Size" $W/ncu-$f.txt; done
el
grep -E "^==|^ +[0-9]" $W/sweep-rmsres.txt | cut -c1-120
grep -E "act_|triton-ieee|faster" $W/peers.txt | head -60 | cut -c1-150
