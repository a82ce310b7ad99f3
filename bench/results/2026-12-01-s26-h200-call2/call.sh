#!/usr/bin/env bash
# Session 26 call 2: the routing's warp_peers by ballots (the working tree) against __match_any_sync (match-env.patch,
# device only: SL_TMP_MATCH=1 -> MOE_RANK_MATCH 1). A/B of the dispatch table at T=512,4096,16384 (two rounds); then, if
# the ballots are not slower, gpu_test_moe_dispatch test_[dqsob]* and memcheck / racecheck on test_skewed_and_overflow
# (they were: the tests ran in call 3).
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s26-h200-call2/match-env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
row() { grep -E "^moe_dispatch" $1 | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" |
  sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
  awk '{print $1, $2, $3, $5, $7}' | tr '\n' ';'; echo; }
for r in 1 2; do for v in 1 0; do
  f=$W/d-match$v-r$r.txt
  if [ $v = 1 ]; then export SL_TMP_MATCH=1; else unset SL_TMP_MATCH; fi
  timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 512,4096,16384 > $f 2>&1
  echo "match$v r$r rc=$?"; row $f
done; done
unset SL_TMP_MATCH
el
SL_BENCH_KERNEL_PARTS=1 SL_BENCH_PAYLOAD=4 timeout 60 build-gpu/sluice bench moe-local --only quant --tokens 16384 \
  --hidden 7168 > $W/parts-ballot.txt 2>&1; echo "parts rc=$?"
grep -E "kernel parts|^moe_dispatch_quant" $W/parts-ballot.txt | sed -E 's/ +/ /g' | cut -c1-110 | head -4
# d T=16384 nvfp4 is the last row of each table: mean of the two rounds per arm
m=$(for r in 1 2; do grep -E "^moe_dispatch_quant +deepseek-v3 T=16384 +route\+copy +[0-9]" $W/d-match1-r$r.txt | tail -1 | awk '{print $5}'; done | awk '{s+=$1} END {print s/NR}')
b=$(for r in 1 2; do grep -E "^moe_dispatch_quant +deepseek-v3 T=16384 +route\+copy +[0-9]" $W/d-match0-r$r.txt | tail -1 | awk '{print $5}'; done | awk '{s+=$1} END {print s/NR}')
echo "dsv3 nvfp4 mean: match $m ballot $b"
el
if awk -v m="$m" -v b="$b" 'BEGIN {exit !(b <= m + 0.2)}'; then
  SL_TEST_FILTER='test_[dqsob]*' timeout 260 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
  echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED" $W/test-dispatch.txt | tail -3
  el
  for tool in memcheck racecheck; do
    SL_TEST_FILTER='test_skewed_and_overflow' timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 \
      build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo $tool rc=$?; grep -cE "^  ok" $W/san-$tool.txt
    grep "ERROR SUMMARY\|RACECHECK SUMMARY\|FAILED  \]" $W/san-$tool.txt | head -3
  done
  el
fi
