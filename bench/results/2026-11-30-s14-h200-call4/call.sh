#!/usr/bin/env bash
# session 14 call 4: the NVFP4 whole-block lane at unroll 4 on every width (default now), the FP8 dequantizer on
# 2-chunk tasks (call 3), and the FP4 table dequantizer's first step before its table fill (rows "early1" = L2
# prefetch, "early2" = the loads; off by default): gpu_test_quant (test_dequant_any_bytes runs both early forms),
# then the NVFP4 quant/dequant and FP8 dequant rows at T=1024/8192/32768
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 280 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; grep -E "OK|FAIL|PASSED" $O/gpu_test_quant.txt | tail -12
timeout 200 build-gpu/sluice bench kernels --only quant_nvfp4 --tokens 1024,8192,32768 --json $O/bench-nv.json > $O/bench-nv.txt 2>&1; echo rc=$?
timeout 100 build-gpu/sluice bench kernels --only dequant_fp8 --tokens 8192,32768 --json $O/bench-deq8.json > $O/bench-deq8.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "T=(1024|8192|32768) " $O/table.txt | cut -c1-175
