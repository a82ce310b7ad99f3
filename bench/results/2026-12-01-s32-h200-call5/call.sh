#!/usr/bin/env bash
# Session 32 call 5: what turns call 3-4's +0.2 us on small-T graph rows on (not CUPTI: call 4)? More kernels loaded
# without large buffers (A: T <= 1024), large buffers with fewer kernels (B: one hidden size), both (C).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
$S bench kernels --only act_ --tokens 1,16,128,1024 > $O/A-small-many.txt 2>&1
$S bench kernels --only act_ --tokens 1,32768 --hidden 2048 > $O/B-large-2048.txt 2>&1
$S bench kernels --only act_ --tokens 1,8192,32768 > $O/C-large-all.txt 2>&1
$S bench kernels --tokens 1,16 > $O/D-all-ops-small.txt 2>&1
el done
for f in A-small-many B-large-2048 C-large-all D-all-ops-small; do
  echo "== $f"; grep -E " T=1 " $O/$f.txt | grep -vE "p16|p4|expf|tanhf|comparison" | sed -E 's/ +/ /g' | cut -d' ' -f1,3,10-11 | tr '\n' ';'; echo
done
