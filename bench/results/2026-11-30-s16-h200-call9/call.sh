#!/usr/bin/env bash
# session 16 call 9 (the final code): act/quant/dequant rows at T >= 8192 for issue #3's table, and the FP4 dequantizer's
# tune sweep now that its table fill is fast (SL_KQ_TUNE=1: unroll, seg, warps rows)
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 120 build-gpu/sluice bench kernels --only act_ --tokens 8192,32768 --json $W/bench-act.json > $W/bench-act.txt 2>&1; echo rc=$?
timeout 200 build-gpu/sluice bench kernels --only quant --tokens 8192,32768 --json $W/bench-quant.json > $W/bench-quant.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 --json $W/tune-deq.json > $W/tune-deq.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "target >= 92" $W/table.txt | grep -vE " (unstaged|staged|single|pair|mb8|expf) |w8u[0-9]|w8s[0-9]|w4 |w16 " | awk '{for(i=1;i<=NF;i++) if($i=="kern"){k=$(i+2)}; gsub(/[(%,]/,"",k); if (k+0<92) print}' | cut -c1-140
grep -E "dequant_nvfp4" $W/table.txt | grep -E "w8(u|s)|w4|w16" | cut -c1-140
