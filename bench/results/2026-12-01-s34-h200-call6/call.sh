#!/usr/bin/env bash
# Session 34 call 6: the near misses of issue #3's 92 % target where a same-size copy passes -- launch sweeps at
# those shapes, each default row measured three times for its spread: rmsnorm+residual T=8192 h=4096 (`--tune`),
# the FP8 group and MXFP8 quantizers and the FP8 dequantizer at T=8192 H=7168 (SL_KQ_TUNE=1).
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
mkdir -p $O/r
timeout 150 build-gpu/sluice bench kernels --tune --only rmsnorm+residual --tokens 8192 --hidden 4096 \
  > $O/r/rms-tune.txt 2>&1; echo "rms tune rc=$?"; el rms
SL_KQ_TUNE=1 timeout 150 build-gpu/sluice bench kernels --only quant_ --tokens 8192 --hidden 7168 \
  > $O/r/kq-tune.txt 2>&1; echo "kq tune rc=$?"; el kq
for i in 1 2 3; do
  timeout 60 build-gpu/sluice bench kernels --only rmsnorm+residual --tokens 8192 --hidden 4096 > $O/r/rms-$i.txt 2>&1
  timeout 60 build-gpu/sluice bench kernels --only quant_ --tokens 8192 --hidden 7168 > $O/r/kq-$i.txt 2>&1
done; el repeats
grep -E "^tune |# --tune" -A3 $O/r/rms-tune.txt | head -20
echo "== kq tune (default rows first of each shape)"; grep -E "^(quant|dequant)" $O/r/kq-tune.txt | head -60
echo "== repeats"; for i in 1 2 3; do grep -E "^rmsnorm\+residual " $O/r/rms-$i.txt | head -1; grep -E "^(quant|dequant)_(fp8|mxfp8)" $O/r/kq-$i.txt | awk '!seen[$1]++'; done
cd $O && tar czf r.tgz r && rm -rf r
