#!/usr/bin/env bash
# session 20 call 10 (final code): the down rows asked for late (the new default decode shape, _DL); the layer GPU
# tests, compute-sanitizer memcheck + racecheck on the decode test's test_not_applicable (the default shape by
# AUTO, the chain fallbacks), then issue #4's layer table (T = 1, 8, 32, 128) and T = 1 once more.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_layer' > $W/run.txt 2>&1; tail -3 $W/run.txt
grep -E "FAIL|rror" /tmp/g/gpu-tests.log | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for tool in memcheck racecheck; do
  SL_TEST_FILTER=test_not_applicable timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 \
    build-gpu/tests/gpu_test_moe_layer_decode > $W/san-$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt | head -4
done
timeout 200 build-gpu/sluice bench moe-local --only moe_layer --tokens 1,8,32,128 --json $W/layer.json > $W/layer.txt 2>&1
echo "table rc=$?"; grep -E "^moe_layer" $W/layer.txt | grep -E "one-kernel/decode-kernel +[0-9]|T=(8|32|128) .*(gemv|padded)  " | cut -c1-175
timeout 100 build-gpu/sluice bench moe-local --only moe_layer --tokens 1 > $W/layer1.txt 2>&1; echo "t1 rc=$?"
grep -E "^moe_layer" $W/layer1.txt | grep -E "pr-if(-dl)? |dl-all" | grep -v phases | cut -c42-175
grep -E "pr-if-dl phases" $W/layer1.txt | grep -v "gate_up end" | grep -oE "start.*" | cut -c1-290
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
