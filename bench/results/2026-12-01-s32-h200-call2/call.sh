#!/usr/bin/env bash
# Session 32 call 2 (the code of 384c92f): the gpu tests call 1's time limit cut (gpu_test_quant, gpu_test_router),
# and the main job's self-check on the GPU backend (4 ranks sharing the one H200).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 60 mpirun -np 4 build-gpu/sluice selfcheck > $O/selfcheck.txt 2>&1; echo "selfcheck rc=$?"; tail -3 $O/selfcheck.txt
cd build-gpu
ctest -L gpu -R '^gpu_test_(quant|router)$' --output-on-failure --timeout 450 > $O/tests.txt 2>&1
el tests done; grep -hE "Test +#|tests passed|tests failed" $O/tests.txt
