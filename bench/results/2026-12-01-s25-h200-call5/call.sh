#!/usr/bin/env bash
# Session 25 call 5: the routing kernel's ranking per warp (SL_MOE_ROUTE_WARP_RANK 1: no block barrier between
# rounds, one scan over the warps) vs the round-major ranking (0; rank-env.patch lets SL_TMP_RANK pick it for this
# A/B). GPU tests (default = new ranking), memcheck + racecheck on the odd shapes test, dispatch rows A/B x 2.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s25-h200-call5/rank-env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for r in 1 2; do for v in 1 0; do
  SL_TMP_RANK=$v timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 512,4096,16384 > $W/d-$v-$r.txt 2>&1
  echo "rank$v r$r rc=$?"
  grep -E "^moe_dispatch" $W/d-$v-$r.txt | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" |
    sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
    cut -d' ' -f1-4 | tr '\n' ';'; echo
done; done
el
SL_TEST_FILTER='test_[dqsob]*' timeout 240 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED" $W/test-dispatch.txt | tail -3
el
for tool in memcheck racecheck; do
SL_TEST_FILTER='test_skewed_and_overflow' timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 \
  build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo $tool rc=$?; grep -cE "^  ok" $W/san-$tool.txt
grep "ERROR SUMMARY\|RACECHECK SUMMARY\|FAILED  \]" $W/san-$tool.txt | head -3
done
el
