#!/usr/bin/env bash
# Session 27 call 8: the RMSNorm tune at T=8192 (plain and fused; h=7168 plain and h=4096 fused sit at 91.4-91.5 % of
# copy by events, the target 92), twice, to see which picks hold beyond the run-to-run spread.
O=$1; export OUT=/tmp/g; W=/tmp/w8; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for r in 1 2; do
  timeout 110 build-gpu/sluice bench kernels --tune --only rmsnorm --tokens 8192 --hidden 2048,4096,7168 \
    > $W/tune$r.txt 2>&1; echo "tune$r rc=$?"; el
done
for r in 1 2; do echo "== $r"; grep -E "best|table chose" $W/tune$r.txt | cut -c1-140 | head -20; done
