#!/usr/bin/env bash
# session 15 call 10: 2 and 4 groups of items per warp (fewer, longer-lived blocks; SL_KQ_TUNE=g rows "g2"/"g4")
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_TUNE=g timeout 150 build-gpu/sluice bench kernels --only dequant --tokens 8192,32768 --json $W/bench-deq.json > $W/bench-deq.txt 2>&1; echo rc=$?
SL_KQ_TUNE=g timeout 150 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192,32768 --json $W/bench-act.json > $W/bench-act.txt 2>&1; echo rc=$?
SL_KQ_TUNE=g timeout 200 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --hidden 2048,4096 --json $W/bench-q.json > $W/bench-q.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "dequant|act_silu_fp8" $W/table.txt | grep -vE "mb6|expf" | cut -c1-140
grep -E "^  quant" $W/table.txt | grep -vE "unstaged|staged|single|pair" | cut -c1-140
