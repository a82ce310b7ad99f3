#!/usr/bin/env bash
# session 23 call 9: after the staged and direct copies' shared quantize_into_row (a refactor, same instructions up
# to register allocation): the quantized dispatch tests (payloads, edge blocks, staged, direct) and the quantized
# rows at T=16384 (both models).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_[qsd]*' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1; echo test rc=$?
grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |differ" $W/test.txt | head -5
timeout 150 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 --json $W/quant.json \
  > $W/quant.txt 2>&1; echo bench rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | grep -vE "regs|sbulk" | cut -c1-150
