#!/usr/bin/env bash
# session 17 call 3: the replicated dispatch at 14 and 28 warps per block (DeepSeek-V3: 2 / 1 blocks per token) next
# to 7 (default), 8, 4. GPU tests of dispatch (+ forced warps) and route dispatch; dispatch rows T=32,128 twice;
# the layer at T=1,8,32,128.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -8
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for i in 1 2; do
timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 32,128 --json $W/disp$i.json > $W/disp$i.txt 2>&1; echo rc=$?
done
timeout 200 build-gpu/sluice bench moe-local --only moe_layer --tokens 1,8,32,128 --json $W/layer.json > $W/layer.txt 2>&1; echo rc=$?
cp $W/disp*.txt $W/layer.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
for i in 1 2; do grep -E "^moe_dispatch  .*deepseek" $W/disp$i.txt | grep -vE "bal |scan|fused-coop" | awk '{printf "%-14s %-6s %-14s", $2,$3,$4; for(i=5;i<=NF;i++) printf " %s",$i; printf "\n"}' | cut -c1-100; done
grep -E "^moe_layer" $W/layer.txt | grep -vE "phases|forced|comparison" | cut -c1-200 | head -20
