#!/usr/bin/env bash
# Session 25 call 7: the routing kernel's last-block scan with fewer loads in flight per thread (SL_MOE_ROUTE_BATCH
# 32 = default, 81 registers; 16; 8 = 32 registers), so that copy blocks fit beside the routing blocks on their SMs
# (batch-env.patch lets SL_TMP_BATCH pick it for this A/B). Quantized rows at T=16384; two tests at batch 8.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s25-h200-call7/batch-env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
i=0
for b in 32 8 16 32 8; do
  i=$((i + 1)); f=$W/q$i-batch$b.txt
  SL_TMP_BATCH=$b timeout 40 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $f 2>&1
  echo "batch $b rc=$? $(grep -E '^moe_dispatch_quant' $f | grep -vE 'regs|sbulk|staged [0-9]|forced|comparison' |
    sed -E 's/ +/ /g' | cut -d' ' -f5 | tr '\n' ' ')"
done
el
export SL_TMP_BATCH=8
SL_TEST_FILTER='test_skewed_and_overflow' timeout 50 build-gpu/tests/gpu_test_moe_dispatch > $W/test-skewed.txt 2>&1
echo skewed rc=$?; grep -cE "^  ok" $W/test-skewed.txt; grep -E "PASSED|FAILED" $W/test-skewed.txt | tail -1
SL_TEST_FILTER='test_deepseek_shapes' timeout 80 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dsv3.txt 2>&1
echo dsv3 rc=$?; grep -cE "^  ok" $W/test-dsv3.txt; grep -E "PASSED|FAILED" $W/test-dsv3.txt | tail -1
el
