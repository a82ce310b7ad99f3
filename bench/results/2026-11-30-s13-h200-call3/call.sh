#!/usr/bin/env bash
# session 13 call 3: the dequantizer at 8 blocks per SM (32 registers) by default: gpu_test_quant; the kernels bench at
# T=8192/32768 (every op; same-size copy by kernel time in the JSON; dequant "mb6" rows = the old occupancy); the
# tune sweep (segment lengths 0/1/2/4/8/32) of the FP8-out activation and the quantizers at T=8192
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_quant$' > $O/run.txt 2>&1; tail -2 $O/run.txt; grep -E "Passed|Failed|Timeout" /tmp/g/gpu-tests.log | tail -2
grep -B2 -A12 "FAILED" /tmp/g/gpu-tests.log | head -30
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 260 build-gpu/sluice bench kernels --tokens 8192,32768 --json $O/bench-kernels.json > $O/bench-kernels.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 150 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192 > $O/tune-act.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 100 build-gpu/sluice bench kernels --only quant_ --tokens 8192 --hidden 2048 > $O/tune-quant.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "dequant" $O/table.txt | cut -c1-170
grep -hE "^(act|quant|dequant)" $O/tune-act.txt $O/tune-quant.txt | cut -c1-69,100-119
