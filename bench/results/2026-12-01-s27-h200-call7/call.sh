#!/usr/bin/env bash
# Session 27 call 7: MXFP4's half-block lane at 8 blocks per SM. Its packets made opaque to ptxas before the encode
# (as the whole-block lane's four: quant.cu quant_block_lane) let u4 fit 32 registers (ptxas -v: FLOOR no spill,
# CEIL 16-24 bytes). test_qpair (bit-exact), then SL_KQ_TUNE=mb `bench kernels --only quant_mxfp4` (rows "mb8" next
# to the default 6 blocks) with the opaque packets, then without them (device-only patch back to main), then with.
O=$1; export OUT=/tmp/g; W=/tmp/w7; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_qpair' timeout 150 build-gpu/tests/gpu_test_quant > $W/test-qpair.txt 2>&1; echo "test rc=$?"
tail -2 $W/test-qpair.txt; el
b() { SL_KQ_TUNE=mb timeout 100 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 8192,32768 > $W/$1.txt 2>&1
      echo "$1 rc=$?"; }
b opaque-a
sed -i 's/    if constexpr (QFMT == SL_QFMT_MXFP4) asm volatile("" : "+r"(q\[k\].x)/    if constexpr (PPL == 4) asm volatile("" : "+r"(q[k].x)/' kernels/quant.cu
grep -c 'if constexpr (PPL == 4) asm volatile' kernels/quant.cu
cmake --build build-gpu -j16 --target sluice > $W/rebuild.txt 2>&1; echo "rebuild rc=$?"
b plain
git checkout kernels/quant.cu 2>/dev/null || true
sed -i 's/    if constexpr (PPL == 4) asm volatile("" : "+r"(q\[k\].x)/    if constexpr (QFMT == SL_QFMT_MXFP4) asm volatile("" : "+r"(q[k].x)/' kernels/quant.cu
cmake --build build-gpu -j16 --target sluice > $W/rebuild2.txt 2>&1; echo "rebuild rc=$?"
b opaque-b
el
for f in opaque-a plain opaque-b; do echo "== $f"; grep -E "T=(8192|32768) H=(2048|4096) .*w8 +([0-9]|mb8)" $W/$f.txt | cut -c1-130; done
