#!/usr/bin/env bash
# Session 32 call 1 (the code of 384c92f): every gpu test on one H200 -- the whole suite last ran together in
# session 2. Chain A: gpu_test_norm, then the gpu_mpi_* tests (serial); chain B: the other single-process tests
# (serial), beside it.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
cd build-gpu
( ctest -L gpu -R '^gpu_test_norm$' --output-on-failure --timeout 420 > $O/chainA-norm.txt 2>&1
  ctest -L gpu -R '^gpu_mpi_' --output-on-failure --timeout 120 > $O/chainA-mpi.txt 2>&1 ) &
ctest -L gpu -R '^gpu_test_' -E '^gpu_test_(norm|device)$' --output-on-failure --timeout 420 > $O/chainB.txt 2>&1
el chainB done; wait; el chainA done
grep -hE "Test +#|tests passed|tests failed" $O/chain*.txt
