#!/usr/bin/env bash
# Session 29 call 4: the FP8 IEEE quantizer without division calls -- sl_kq_rcp_rn (the scale's reciprocal without
# __frcp_rn's range check) and sl_qf_div448_tiny (tiny blocks by exact power-of-two scalings) -- which fits unroll 2
# into 32 registers: gpu_test_quant (test_rcp_rn: every s of the range against __frcp_rn; the tiny blocks bit-exact)
# and gpu_test_act; the FP8-out rows at 6 (table) and 8 blocks per SM (SL_KQ_TUNE_ROWS mb8, s2mb8); ncu of the
# table's launch at T=8192 H=2048 (instructions); torch_peers at T=8192 (rotated, against the Triton group kernel).
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for t in quant act; do
  stdbuf -oL timeout 200 build-gpu/tests/gpu_test_$t > $W/gpu_test_$t.txt 2>&1; echo "test $t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|differ|want" $W/gpu_test_$t.txt | tail -4
done
el
SL_KQ_TUNE_ROWS=mb8,s2mb8 timeout 150 build-gpu/sluice bench kernels --only _fp8 --tokens 1024,8192,32768 \
  --json $W/bench-kernels.json > $W/tune.txt 2>&1; echo "tune rc=$?"; el
M=sm__inst_executed.sum,gpu__time_duration.sum
timeout 60 ncu --clock-control none --section Occupancy --metrics $M --launch-skip 3 --launch-count 1 -k regex:sl_quant_kernel \
  python3 bench/probes/triton_fp8_once.py 8192 2048 --ours build-gpu/libsluice_peer_ffi.so > $W/ncu-ours-def.txt 2>&1
grep -E "inst_executed|time_duration|Registers Per|Achieved Occ" $W/ncu-ours-def.txt; el
timeout 150 python3 bench/torch_peers.py --budget-s 110 --tokens 8192 --ops 'quant_fp8*,act_silu_fp8,act_gelu_fp8' \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
sed -n '/^rotated inputs on both sides/,$p' $W/peers.txt | head -12
