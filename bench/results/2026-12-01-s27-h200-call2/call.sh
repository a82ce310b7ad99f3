#!/usr/bin/env bash
# Session 27 call 2: MXFP4's half-block lane (quant.cu QPAIR 2): gpu_test_quant's test_qpair (bit-exact, staged too),
# then `bench kernels --only quant_mxfp4` with the table as committed (mx_half 0: rows "half" / "pair" next to the
# default one-packet lane), then with the table's mx_half = 1 (device-only patch) under SL_KQ_TUNE=1 SL_KQ_GRID=1.
# (The tree then had the half lane's minimum blocks at 8 for unroll <= 2 -- the "w8u2" rows of mx-b.txt -- and no
# MXFP4 bit in swz_stage_fmts: mx-b's default rows are unstaged, its "staged" rows the staged ones.)
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_qpair' timeout 200 build-gpu/tests/gpu_test_quant > $W/test-qpair.txt 2>&1; echo "test rc=$?"
tail -3 $W/test-qpair.txt; el
timeout 120 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 8192,32768 > $W/mx-a.txt 2>&1; echo "a rc=$?"
el
sed -i 's/^     0},$/     1},/' kernels/kq_launch.h; grep -n -A1 "SL_ARCH_HOPPER, 1, 8" kernels/kq_launch.h | tail -1
cmake --build build-gpu -j16 --target sluice > $W/rebuild.txt 2>&1; echo "rebuild rc=$?"
SL_KQ_TUNE=1 SL_KQ_GRID=1 timeout 240 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 8192,32768 \
  > $W/mx-b.txt 2>&1; echo "b rc=$?"
el
grep -E "T=32768" $W/mx-a.txt | cut -c1-130 | head -24
grep -E "T=32768 H=(2048|4096)" $W/mx-b.txt | cut -c1-130 | head -70
