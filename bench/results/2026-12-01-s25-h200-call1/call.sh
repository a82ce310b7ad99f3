#!/usr/bin/env bash
# Prepared in session 24 for the next session with device time (not yet run): apply unordered.patch (the
# unordered copy, slot_order SL_MOE_SLOTS_ANY), build, run its GPU test (and memcheck on it), the other dispatch
# tests, and the quantized dispatch rows at T=4096,16384 with the new "unordered" comparison rows.
# Send from the repository root: bash bench/results/2026-12-01-s24-prep/call.sh $OUT (carry .deps).
O=$1; export OUT=/tmp/g; W=/tmp/wp; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
patch -p1 < bench/results/2026-12-01-s24-prep/unordered.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_unordered_slots' timeout 150 build-gpu/tests/gpu_test_moe_dispatch > $W/test-unordered.txt 2>&1
echo unordered-test rc=$?; grep -cE "^  ok" $W/test-unordered.txt; grep -E "PASSED|FAILED|fail|differ" $W/test-unordered.txt | head -5
SL_TEST_FILTER='test_unordered_slots' timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 \
  build-gpu/tests/gpu_test_moe_dispatch > $W/san-unordered.txt 2>&1; echo memcheck rc=$?; grep "ERROR SUMMARY" $W/san-unordered.txt
el
for r in 1 2; do
  timeout 120 build-gpu/sluice bench moe-local --only quant --tokens 4096,16384 > $W/q-$r.txt 2>&1; echo "bench r$r rc=$?"
  grep -E "^moe_dispatch_quant" $W/q-$r.txt | grep -vE "regs|sbulk|staged [0-9]|forced \(comparison: the" |
    sed -E 's/ +/ /g; s/^moe_dispatch_quant //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
    cut -d' ' -f1-8,10 | tr '\n' ';'; echo
done
el
SL_TEST_FILTER='test_[dqsg]*' timeout 280 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED" $W/test-dispatch.txt | tail -2
el
tar -czf $O/all.tgz -C $W .
