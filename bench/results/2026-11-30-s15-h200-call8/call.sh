#!/usr/bin/env bash
# session 15 call 8 (the final code): the act/quant/dequant rows at every T for issue #3's table
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 150 build-gpu/sluice bench kernels --only act_ --json $W/bench-act.json > $W/bench-act.txt 2>&1; echo rc=$?
timeout 280 build-gpu/sluice bench kernels --only quant --json $W/bench-quant.json > $W/bench-quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "T=(8192|32768) " $W/table.txt | grep -v comparison | grep -vE " (unstaged|staged|single|pair|mb6|expf) " | cut -c1-140
grep -E "T=(1|16) " $W/table.txt | grep -E "graph" | awk '{print $1, $2, $3, $(NF-6), $(NF-5), $(NF-4)}' | head -40
