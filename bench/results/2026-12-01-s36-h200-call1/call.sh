#!/usr/bin/env bash
# Session 36 call 1 (the code of c26909c, session 35's final main): every gpu test on one H200 in one call -- the
# whole suite last ran together in session 32 (calls 1-2); sessions 33-35 changed the PDL entry, the FP8 group
# quantizer's decode path and its 16-bit IEEE quotient (each checked then by the tests of the kernels it touched).
# Three chains side by side: A gpu_test_norm; B the MoE tests and the gpu_mpi_* tests (2-4 ranks sharing the GPU
# through CUDA IPC), then `mpirun -np 4 sluice selfcheck`; C gpu_test_quant and the other single-process tests.
O=$1; export OUT=/tmp/run36; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
cd build-gpu
ctest -L gpu -R '^gpu_test_norm$' --output-on-failure --timeout 500 > $O/chainA.txt 2>&1 &
( ctest -L gpu -R '^gpu_test_moe_' --output-on-failure --timeout 480 > $O/chainB.txt 2>&1
  ctest -L gpu -R '^gpu_mpi_' --output-on-failure --timeout 120 >> $O/chainB.txt 2>&1
  timeout 60 mpirun -np 4 ./sluice selfcheck > $O/selfcheck.txt 2>&1; echo "selfcheck rc=$?" >> $O/selfcheck.txt ) &
ctest -L gpu -R '^gpu_test_' -E '^gpu_test_(norm|moe_.*)$' --output-on-failure --timeout 480 > $O/chainC.txt 2>&1
el chainC done; wait; el all done
grep -hE "Test +#|tests passed|tests failed" $O/chain*.txt; tail -2 $O/selfcheck.txt
