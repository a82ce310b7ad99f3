#!/usr/bin/env bash
# session 15 call 9: the FP8-out activation (ex2, seg 2) on the resident vs the full grid (SL_KQ_GRID=1) at T=8192
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_GRID=1 timeout 100 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192,32768 --json $W/bench-act.json > $W/bench-act.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "act_silu_fp8" $W/table.txt | cut -c1-140
