#!/usr/bin/env bash
# session 17 call 7: the replicated dispatch with 32-bit item math, the x chunk loaded without a branch and the item's
# expert ids by a plain load (ptxas had sunk the __ldg past the block barriers). GPU tests of dispatch and route
# dispatch; DSv3 dispatch rows T=32,128 three times.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -6
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for i in 1 2 3; do
timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 1,32,128 --hidden 7168 > $W/disp$i.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/disp$i.txt | grep -vE "bal |scan|fused-coop|w4|w14|w28" | cut -c24-150
done
cp $W/disp*.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
