#!/usr/bin/env bash
# Session 33 call 9: the library's small kernels as programmatic dependents (`pdl`, new): gpu_test_pdl (a decode
# chain of nine stages, PDL on vs off bit for bit, stream and graph), the bench's decode-chain rows (plain vs pdl, T=1
# and 16), and gpu_test_router / gpu_test_act as a check of the changed kernel sources' PDL=0 path.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 200 build-gpu/tests/gpu_test_pdl > $O/gpu_test_pdl.txt 2>&1; echo "pdl test rc=$?"; tail -4 $O/gpu_test_pdl.txt; el pdl
for i in 1 2; do
  build-gpu/sluice bench kernels --only decode-chain --json $O/chain-$i.json > $O/chain-$i.txt 2>&1
  grep -E "^# device|decode-chain" $O/chain-$i.txt | sed -E 's/ +/ /g' | cut -c1-150
done
el bench
timeout 100 build-gpu/tests/gpu_test_router > $O/gpu_test_router.txt 2>&1; echo "router rc=$?"; el router
timeout 150 build-gpu/tests/gpu_test_act > $O/gpu_test_act.txt 2>&1; echo "act rc=$?"; tail -2 $O/gpu_test_act.txt; el act
