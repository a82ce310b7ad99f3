#!/usr/bin/env bash
# session 16 call 8: the FP4 table dequantizer at 6 blocks per SM (default; "mb8" rows = sessions 13-15's 8 blocks), the
# per-lane entries removed: gpu_test_quant, the dequant rows at every T, twice at T >= 8192
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $W/run.txt 2>&1; tail -3 $W/run.txt; cp /tmp/g/gpu-tests.log $W/ 2>/dev/null
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/sluice bench kernels --only dequant --json $W/bench-deq.json > $W/bench-deq.txt 2>&1; echo rc=$?
timeout 200 build-gpu/sluice bench kernels --only dequant --tokens 8192,32768 --json $W/bench-deq2.json > $W/bench-deq2.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "dequant" $W/table.txt | grep -E "T=(1024|8192|32768) " | cut -c1-150
