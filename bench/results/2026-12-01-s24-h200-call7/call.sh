#!/usr/bin/env bash
# session 24 call 7 (final code): routing rounds by route_rounds(pairs, SMs, E_local) (DeepSeek-V3 T=16384: 4 rounds,
# 64 blocks) and the direct copy's L2 prefetch of its next pass (SL_MOE_DIRECT_PF_PASSES 1): the dispatch rows at
# T=4096,16384 (bf16 and quantized, with the comparison rows), two rounds; gpu_test_moe_dispatch's DeepSeek-V3 and
# Qwen3 shapes and the direct copy.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for r in 1 2; do
  timeout 120 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 4096,16384 --json $W/disp-$r.json > $W/disp-$r.txt 2>&1
  echo "== round $r rc=$?"
  grep -E '^moe_dispatch' $W/disp-$r.txt | grep -v forced | sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' | cut -d' ' -f1-8,10 | tr '\n' ';'; echo
done
el
SL_TEST_FILTER='test_[dq]*' timeout 150 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "PASSED|FAILED" $W/test.txt | tail -2
el
tar -czf $O/all.tgz -C $W .
