#!/usr/bin/env bash
# session 13 call 4 (final): the full `sluice bench kernels` with the session's changes (FP4 dequant table entries from
# two quotients, the FP4 table dequantizer at 8 blocks per SM with its full-grid point at 3 waves; same-size copy by
# kernel time), then gpu_test_quant on the final code
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 360 build-gpu/sluice bench kernels --json $O/bench-kernels.json > $O/bench-kernels.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
timeout 150 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; tail -4 $O/gpu_test_quant.txt
grep -E "dequant_nvfp4" $O/table.txt | grep -E "T=(1|1024|8192|32768) " | cut -c1-175
