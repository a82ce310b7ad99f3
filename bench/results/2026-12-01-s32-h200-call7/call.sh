#!/usr/bin/env bash
# Session 32 call 7: bisect calls 3-5's trigger. `--only act_ --hidden H --tokens 1,X`: silu_fp8 T=1 follows silu_bf16
# T=X, gelu_bf16 T=1 follows silu_fp8 T=X; and the quantizers after quant_fp8's T=X rows.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
for v in "2048 16" "2048 128" "2048 1024" "2048 8192" "4096 128" "4096 1024" "7168 1024"; do
  set -- $v
  $S bench kernels --only act_ --hidden $1 --tokens 1,$2 > $O/act-h$1-t$2.txt 2>&1
done
$S bench kernels --only quant_ --hidden 2048 --tokens 1,1024 > $O/quant-h2048-t1024.txt 2>&1
$S bench kernels --only quant_ --hidden 2048 --tokens 1,16 > $O/quant-h2048-t16.txt 2>&1
el done
for f in $O/act-*.txt $O/quant-*.txt; do
  echo "== $(basename $f)"; grep -E " T=1 " $f | grep -vE "p16|p4|expf|tanhf|comparison|unstaged|single|pair|half|staged|mb8" \
    | sed -E 's/ +/ /g' | awk '{n=split($0,a," "); for(i=1;i<=n;i++) if(a[i]=="target") {print a[1], a[i-2], a[i-1]; break}}' | tr '\n' ';'; echo
done
