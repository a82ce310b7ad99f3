#!/usr/bin/env bash
# Session 32 call 8: calls 3-7's +0.2 us on small-T graph rows -- per graph node, or per graph launch? The same
# rows with 5, 20 and 100 repetitions per graph (--graph-reps): gelu T=1 runs after the trigger (silu_fp8 T=128),
# silu_bf16 / silu_fp8 T=1 before it.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
for r in 5 20 100; do
  $S bench kernels --only act_ --hidden 2048 --tokens 1,128 --graph-reps $r > $O/reps$r.txt 2>&1
  $S bench kernels --only act_ --hidden 2048 --tokens 1,16 --graph-reps $r > $O/reps$r-notrigger.txt 2>&1
done
el done
for f in $O/reps*.txt; do
  echo "== $(basename $f)"; grep -E " T=1 " $f | grep -vE "p16|p4" | sed -E 's/ +/ /g' \
    | awk '{n=split($0,a," "); for(i=1;i<=n;i++) if(a[i]=="target") {print a[1], a[i-2], a[i-1]; break}}' | tr '\n' ';'; echo
done
