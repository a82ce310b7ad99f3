#!/usr/bin/env bash
# session 24 call 5: the direct copy's L2 prefetch of its next pass's x before the routing wait
# (SL_MOE_DIRECT_PF_PASSES; pf-env.patch lets SL_TMP_PF override it for this A/B): passes 0 / 1 / 2 at T=16384,
# mxfp4 and nvfp4 (DeepSeek-V3 takes the direct copy there); test_direct_copy and its memcheck.
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
patch -p1 < bench/results/2026-12-01-s24-h200-call5/pf-env.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_direct_copy' timeout 100 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "PASSED|FAILED" $W/test.txt | tail -2
SL_TEST_FILTER=test_direct_copy timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch > $W/san.txt 2>&1; echo memcheck rc=$?; grep "ERROR SUMMARY" $W/san.txt
el
for r in 1 2; do for pf in 0 1 2; do for p in 3 4; do
  [ $r = 2 ] && [ $pf = 2 ] && continue
  SL_TMP_PF=$pf SL_BENCH_PAYLOAD=$p timeout 100 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $W/q-$pf-$p-$r.txt 2>&1
  echo "pf$pf p$p r$r rc=$? $(grep -E '^moe_dispatch_quant +deepseek' $W/q-$pf-$p-$r.txt | grep -vE 'regs|sbulk|staged' | sed -E 's/ +/ /g' | cut -d' ' -f5-11)"
done; done; done
el
tar -czf $O/all.tgz -C $W .
