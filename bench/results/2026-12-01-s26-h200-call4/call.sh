#!/usr/bin/env bash
# Session 26 call 4: the direct copy's claims on 8 counters on separate 128-byte lines (the working tree) against
# one counter (env.patch, device only: SL_TMP_ONECTR=1 -> MOE_CLAIM_COUNTERS 1): the dispatch table at
# T=512,4096,16384, two rounds each; the working tree's table is the final one. Then GPU tests test_[dos]*
# (deepseek shapes, direct copy with its claimed-rounds case, odd shapes, skewed, staged) and compute-sanitizer
# memcheck / racecheck on test_direct_copy.
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
patch -p1 < bench/results/2026-12-01-s26-h200-call4/env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
row() { grep -E "^moe_dispatch" $1 | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" | awk '{
  m = substr($2, 1, 1); pl = "bf16"; for (i = 1; i < NF; i++) if ($i == "payload") pl = $(i + 1); sub(",", "", pl);
  printf "%s%s %s %s %s; ", m, substr($3, 3), pl, $5, $7 }'; echo; }
for r in 1 2; do for v in 0 1; do
  f=$W/d-onectr$v-r$r.txt
  if [ $v = 1 ]; then export SL_TMP_ONECTR=1; else unset SL_TMP_ONECTR; fi
  timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 512,4096,16384 > $f 2>&1
  echo "onectr$v r$r rc=$? $(head -1 $f | grep -o 'copy bandwidth [0-9]* GB/s')"; row $f | tr ';' '\n' | grep 16384 | tr '\n' ';'; echo
done; done
unset SL_TMP_ONECTR
el
SL_BENCH_KERNEL_PARTS=1 SL_BENCH_PAYLOAD=4 timeout 60 build-gpu/sluice bench moe-local --only quant --tokens 16384 \
  --hidden 7168 > $W/parts.txt 2>&1; echo "parts rc=$?"
grep -E "kernel parts|^moe_dispatch_quant" $W/parts.txt | grep -vE "regs|sbulk" | sed -E 's/ +/ /g' | cut -c1-100 | head -4
el
SL_TEST_FILTER='test_[dos]*' timeout 240 stdbuf -oL build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED|^\[ +OK" $W/test-dispatch.txt | tail -7
grep "claimed" $W/test-dispatch.txt
el
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_direct_copy timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 \
    build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo "direct $tool rc=$?"; grep -cE "^  ok" $W/san-$tool.txt
  grep "ERROR SUMMARY\|RACECHECK SUMMARY\|FAILED  \]" $W/san-$tool.txt | head -3
  el
done
