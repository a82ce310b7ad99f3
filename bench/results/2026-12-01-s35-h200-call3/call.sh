#!/usr/bin/env bash
# Session 35 call 3: the final code's whole gpu_test_quant and gpu_test_pdl (the quantizer in a PDL chain), then the
# whole `sluice bench kernels` (issue #3's table) with scripts/bench_summary.py's targets.
O=$1; export OUT=/tmp/g; W=$O
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el built
timeout 200 build-gpu/tests/gpu_test_quant > $W/gpu_test_quant.txt 2>&1; echo "gpu_test_quant rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $W/gpu_test_quant.txt; el quant
timeout 60 build-gpu/tests/gpu_test_pdl > $W/gpu_test_pdl.txt 2>&1; echo "gpu_test_pdl rc=$?"
grep -E "^\[  (PASSED|FAILED) " $W/gpu_test_pdl.txt; el pdl
timeout 240 build-gpu/sluice bench kernels --json $W/bench-kernels.json > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-kernels.txt; python3 scripts/bench_summary.py $W > $W/table.txt 2>&1; el bench
sed -n '/^targets:/,$p' $W/table.txt | head -30
