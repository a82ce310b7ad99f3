#!/usr/bin/env bash
# Session 26 call 5: the final code (ballot ranking; the direct copy's claimed rounds on 8 counters; the direct copy
# for every quantized payload on long streams): the dispatch table at every T, the layer at T <= 128, and GPU tests
# (test_[dqg]*: deepseek shapes, direct copy, qwen3 shapes, quantized payloads and edge blocks, graph capture).
O=$1; export OUT=/tmp/g; W=/tmp/w5; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 150 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 1,8,32,128,512,4096,16384 > $W/table.txt 2>&1
echo "table rc=$? $(head -1 $W/table.txt | grep -o 'copy bandwidth [0-9]* GB/s')"
grep -E "^moe_dispatch" $W/table.txt | grep -vE "regs|sbulk|staged [0-9]|forced|comparison|nopdl|no PDL" | awk '{
  m = substr($2, 1, 1); pl = "bf16"; for (i = 1; i < NF; i++) if ($i == "payload") pl = $(i + 1); sub(",", "", pl);
  printf "%s%s %s %s %s %s; ", m, substr($3, 3), pl, $4, $5, $7 }'; echo
el
timeout 120 build-gpu/sluice bench moe-local --only moe_layer --tokens 1,8,32,128 > $W/layer.txt 2>&1; echo layer rc=$?
grep -E "^moe_layer" $W/layer.txt | sed -E 's/ +/ /g' | cut -c1-140
el
SL_TEST_FILTER='test_[dqg]*' timeout 240 stdbuf -oL build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1
echo dispatch-test rc=$?; grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED|^\[ +OK" $W/test-dispatch.txt | tail -8
el
