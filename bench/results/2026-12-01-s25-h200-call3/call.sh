#!/usr/bin/env bash
# Session 25 call 3: the unordered copy v2 with the racecheck fix; its group size swept (SL_MOE_UNORD_GROUP,
# an experiment knob); scatter_bw's quantized rows with slots by groups of tokens (the unordered copy's order).
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
(cd bench/probes && nvcc -O3 -arch=sm_90 -I../.. scatter_bw.cu -o /tmp/scatter_bw) && timeout 120 /tmp/scatter_bw "" quantized > $W/probe.txt 2>&1; echo probe=$?
grep -E "^(##|fp)" $W/probe.txt | sed -E 's/ +/ /g' | cut -c1-90
el
SL_TEST_FILTER='test_unordered_slots' timeout 150 build-gpu/tests/gpu_test_moe_dispatch > $W/test-unordered.txt 2>&1
echo unordered-test rc=$?; grep -cE "^  ok" $W/test-unordered.txt; grep -E "PASSED|FAILED|fail|differ" $W/test-unordered.txt | head -5
for tool in racecheck memcheck; do
SL_TEST_FILTER='test_unordered_slots' timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 \
  build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo $tool rc=$?; grep "ERROR SUMMARY\|RACECHECK SUMMARY" $W/san-$tool.txt
done
el
for g in 0 8 16 24; do
  if [ $g = 0 ]; then unset SL_MOE_UNORD_GROUP; else export SL_MOE_UNORD_GROUP=$g; fi
  timeout 120 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $W/q-g$g.txt 2>&1; echo "bench group $g rc=$?"
  grep -E "^moe_dispatch_quant" $W/q-g$g.txt | grep -vE "regs|sbulk|staged [0-9]|forced \(comparison: the" |
    sed -E 's/ +/ /g; s/^moe_dispatch_quant //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
    cut -d' ' -f1-5 | tr '\n' ';'; echo
done
el
