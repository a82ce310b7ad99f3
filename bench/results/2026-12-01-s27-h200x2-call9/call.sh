#!/usr/bin/env bash
# Session 27 call 9 (nvidia-h200-x2, first lent this session): 2 distinct H200s (issue #8's step 1-2
# and part of 3-4 on 2 GPUs; #8 ended blocked): topology, the multi-rank gpu tests at np2, `sluice bench allreduce`
# with NCCL side by side and `sluice bench moe`, one rank per GPU. NCCL_NVLS_ENABLE=0, SL_NVLS=0 (tests/gpu/run).
O=$1; export OUT=/tmp/g; W=/tmp/w9; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -40; } > $W/topo.txt 2>&1; head -12 $W/topo.txt
el
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -2 $W/run.txt; el
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 70 mpirun --bind-to none -np 2 build-gpu/sluice bench allreduce --json $W/bench-allreduce.json \
  > $W/allreduce.txt 2>&1; echo "allreduce rc=$?"; el
(cd build-gpu && timeout 60 ctest -R '^gpu_mpi_.*np2$' --output-on-failure --timeout 50) > $W/mpi-tests.txt 2>&1
echo "mpi tests rc=$?"; grep -E "Test +#|tests passed" $W/mpi-tests.txt; el
timeout 45 mpirun --bind-to none -np 2 build-gpu/sluice bench moe --json $W/bench-moe.json > $W/moe.txt 2>&1
echo "moe rc=$?"; el
grep -vE "^$" $W/allreduce.txt | cut -c1-150 | head -40
