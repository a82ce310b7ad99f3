#!/usr/bin/env bash
# session 17 call 2: the replicated dispatch at 7 warps per block for DeepSeek-V3 (one-token windows; sl_moe_repl_warps),
# comparison rows w8/w4. GPU tests of dispatch (+ forced warps), route dispatch and layer; dispatch rows at decode T.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_route_dispatch$|gpu_test_moe_layer$' > $W/run.txt 2>&1; tail -3 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -8
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for i in 1 2; do
timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 1,8,32,128 --json $W/disp$i.json > $W/disp$i.txt 2>&1; echo rc=$?
done
cp $W/disp*.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
for i in 1 2; do grep -vE "bal |scan|fused-coop" $W/disp$i.txt | grep -E "T=128|T=32 " | awk '{printf "%-18s %-14s %-6s %-14s", $1,$2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-120; done
