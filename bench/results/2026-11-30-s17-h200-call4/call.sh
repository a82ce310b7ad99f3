#!/usr/bin/env bash
# session 17 call 4: gpu_test_moe_dispatch's new test_quantized_edge_blocks (+ the route dispatch test), compute-sanitizer
# memcheck and racecheck on it (replicated 7/8-warp blocks, fused and split paths, every payload); then every
# dispatch row (bf16 and quantized payloads, decode and prefill T) with the session's final dispatch code.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -2 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_quantized_edge_blocks' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/edge.txt 2>&1; echo edge-rc=$?
tail -3 $W/edge.txt
for tool in memcheck racecheck; do
  SL_TEST_FILTER='test_quantized_edge_blocks' timeout 230 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch > $W/san-$tool.txt 2>&1; echo san-$tool-rc=$?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $W/san-$tool.txt | head -3
done
timeout 240 build-gpu/sluice bench moe-local --only moe_dispatch --json $W/disp.json > $W/disp.txt 2>&1; echo rc=$?
cp $W/disp.txt $W/edge.txt $O/; tar -czf $O/out.tgz -C $W .
grep -vE "bal |scan|fused-coop|rows|nopdl| w[0-9]" $W/disp.txt | awk '{printf "%-18s %-14s %-6s %-12s", $1,$2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-120 | head -90
