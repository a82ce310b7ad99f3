#!/usr/bin/env bash
# session 16 call 4 (reconstructed; the code then forced DEQ_INLINE with override 1 in the "inl" rows): the FP4
# dequantizer with per-lane entries (rows "inl") vs the per-CTA table
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_TEST_FILTER='test_dequant_any_bytes' timeout 200 build-gpu/tests/gpu_test_quant > $W/test-deq.txt 2>&1; echo test rc=$?; tail -3 $W/test-deq.txt
timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 1024,8192,32768 --json $W/bench-deq.json > $W/bench-deq.txt 2>&1; echo rc=$?
timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 --json $W/bench-deq2.json > $W/bench-deq2.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $W > $W/table.txt 2>&1
cp $W/table.txt $O/; tar -czf $O/out.tgz -C $W .
grep -E "dequant" $W/table.txt | cut -c1-150
