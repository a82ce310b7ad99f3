#!/usr/bin/env bash
# Session 33 call 11: gpu_test_pdl with ~0.5 ms of work queued ahead of each PDL run (so the stream case's stages run
# back to back too), twice; then the negative control again on this test (kernels/moe_pdl.cuh patched here, on the
# device only, to trigger without waiting): it must fail in the stream case as well as the graph one.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for i in 1 2; do
  timeout 200 build-gpu/tests/gpu_test_pdl > $O/gpu_test_pdl-$i.txt 2>&1; echo "pdl test $i rc=$?"; el "pdl $i"
done
sed -i 's|    sl_moe_pdl_wait();|    /* NEGATIVE CONTROL: no wait */|' kernels/moe_pdl.cuh; grep -n "NEGATIVE" kernels/moe_pdl.cuh
cmake --build build-gpu --target gpu_test_pdl > $O/rebuild.txt 2>&1 || tail -5 $O/rebuild.txt
timeout 200 build-gpu/tests/gpu_test_pdl > $O/gpu_test_pdl-nowait.txt 2>&1; echo "pdl test (no wait) rc=$?"
grep -E "differs|not written" $O/gpu_test_pdl-nowait.txt | head -3; el done
