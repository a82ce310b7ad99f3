#!/usr/bin/env bash
# Session 26 call 3: the direct copy's claimed rounds (the working tree then: round 0 static, later rounds claimed by
# an atomic on ONE counter the routing's last block zeroes) against its static grid-stride walk (env.patch, device
# only: SL_TMP_STATIC=1 -> MOE_DIRECT_CLAIMS 0; that arm still issued the claims' atomics), both with the routing's
# ballot ranking; quantized rows at T=4096,16384, two rounds. Then the dispatch GPU tests (test_[dqsob]*, with
# test_direct_copy's new claimed-rounds case) and compute-sanitizer on test_direct_copy (memcheck, racecheck) and
# test_skewed_and_overflow (memcheck).
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s26-h200-call3/env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
row() { grep -E "^moe_dispatch_quant" $1 | grep -vE "regs|sbulk|staged [0-9]" | awk '{
  m = substr($2, 1, 1); if ($5 ~ /^[0-9]/) { p = "def"; u = $5 } else { p = $5; u = $6 }
  for (i = 1; i < NF; i++) if ($i == "payload") pl = $(i + 1); sub(",", "", pl);
  printf "%s%s %s %s %s; ", m, substr($3, 3), pl, p, u }'; echo; }
for r in 1 2; do for v in 1 0; do
  f=$W/q-static$v-r$r.txt
  if [ $v = 1 ]; then export SL_TMP_STATIC=1; else unset SL_TMP_STATIC; fi
  timeout 90 build-gpu/sluice bench moe-local --only quant --tokens 4096,16384 > $f 2>&1
  echo "static$v r$r rc=$?"; row $f
done; done
unset SL_TMP_STATIC
el
SL_BENCH_KERNEL_PARTS=1 SL_BENCH_PAYLOAD=4 timeout 60 build-gpu/sluice bench moe-local --only quant --tokens 16384 \
  > $W/parts-claims.txt 2>&1; echo "parts rc=$?"
grep -E "kernel parts|^moe_dispatch_quant" $W/parts-claims.txt | grep -vE "regs|sbulk" | sed -E 's/ +/ /g' | cut -c1-100
el
SL_TEST_FILTER='test_[dqsob]*' timeout 250 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED" $W/test-dispatch.txt | tail -3
grep "claimed" $W/test-dispatch.txt
el
for tc in "test_direct_copy memcheck" "test_direct_copy racecheck" "test_skewed_and_overflow memcheck"; do
  set -- $tc
  SL_TEST_FILTER=$1 timeout 100 compute-sanitizer --tool $2 --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$1-$2.txt 2>&1; echo "$1 $2 rc=$?"; grep -cE "^  ok" $W/san-$1-$2.txt
  grep "ERROR SUMMARY\|RACECHECK SUMMARY\|FAILED  \]" $W/san-$1-$2.txt | head -3
  el
done
