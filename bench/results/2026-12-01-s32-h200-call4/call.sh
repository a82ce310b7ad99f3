#!/usr/bin/env bash
# Session 32 call 4: is call 3's ordering effect (small-T graph rows +0.17-0.2 us once some T=32768 rows have run)
# CUPTI's? The same run with kernel timing off (SL_BENCH_KERNEL_TIME=0: CUPTI never attached), default (detached after
# each row), and kept attached (SL_BENCH_CUPTI_DETACH=0).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
$S bench kernels --only act_ --tokens 1,32768 > $O/default-1.txt 2>&1
SL_BENCH_KERNEL_TIME=0 $S bench kernels --only act_ --tokens 1,32768 > $O/nocupti-1.txt 2>&1
SL_BENCH_CUPTI_DETACH=0 $S bench kernels --only act_ --tokens 1,32768 > $O/attached-1.txt 2>&1
SL_BENCH_KERNEL_TIME=0 $S bench kernels --only act_ --tokens 1,32768 > $O/nocupti-2.txt 2>&1
$S bench kernels --only act_ --tokens 1,32768 > $O/default-2.txt 2>&1
el done
for f in default-1 nocupti-1 attached-1 nocupti-2 default-2; do
  echo "== $f"; grep -E "T=1 " $O/$f.txt | grep -vE "p16|p4" | awk '{print $1, $3, $(NF-4), $(NF-3), $(NF-2)}' | tr '\n' ';'; echo
done
