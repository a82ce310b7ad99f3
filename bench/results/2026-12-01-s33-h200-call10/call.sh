#!/usr/bin/env bash
# Session 33 call 10 (negative control, not committed code): kernels/moe_pdl.cuh's sl_pdl_entry with the trigger but
# WITHOUT griddepcontrol.wait -- gpu_test_pdl must fail (a stage reading its input before its predecessor finished).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
grep -n "NEGATIVE" kernels/moe_pdl.cuh
timeout 200 build-gpu/tests/gpu_test_pdl > $O/gpu_test_pdl-nowait.txt 2>&1; echo "pdl test (no wait) rc=$?"
grep -E "differs|FAILED|PASSED|not written" $O/gpu_test_pdl-nowait.txt | head -5; el done
