#!/usr/bin/env bash
# Session 25 call 6: the final code (the routing ranks per warp, round-major code removed): two dispatch tests,
# the dispatch table at T=512,4096,16384, and the quantized rows' routing rounds 2 / 4 / 8 (SL_BENCH_ROUTE_ROUNDS)
# against the default rule, T=16384.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 512,4096,16384 > $W/table.txt 2>&1; echo table rc=$?
grep -E "^moe_dispatch" $W/table.txt | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" |
  sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
  cut -d' ' -f1-5 | tr '\n' ';'; echo
el
for rr in 0 2 4 8 0; do
  if [ $rr = 0 ]; then unset SL_BENCH_ROUTE_ROUNDS; else export SL_BENCH_ROUTE_ROUNDS=$rr; fi
  timeout 60 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $W/q-r$rr.txt 2>&1; echo "rounds $rr rc=$?"
  grep -E "^moe_dispatch_quant" $W/q-r$rr.txt | grep -vE "regs|sbulk|staged [0-9]|forced|comparison" |
    sed -E 's/ +/ /g; s/^moe_dispatch_quant //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' |
    cut -d' ' -f1-5 | tr '\n' ';'; echo
done
unset SL_BENCH_ROUTE_ROUNDS
el
SL_TEST_FILTER='test_skewed_and_overflow' timeout 60 build-gpu/tests/gpu_test_moe_dispatch > $W/test-skewed.txt 2>&1
echo skewed rc=$?; grep -cE "^  ok" $W/test-skewed.txt; grep -E "PASSED|FAILED" $W/test-skewed.txt | tail -2
SL_TEST_FILTER='test_deepseek_shapes' timeout 120 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dsv3.txt 2>&1
echo dsv3 rc=$?; grep -cE "^  ok" $W/test-dsv3.txt; grep -E "PASSED|FAILED" $W/test-dsv3.txt | tail -2
el
