#!/usr/bin/env bash
# Session 32 call 3: the bench's GELU bf16 T=1 graph rows read ~0.2 us above SiLU's with the same kernel time (s30, s31).
# Timed here with no large rows before them, in both orders, and with the GPU clocks read (nvidia-smi -q, read only)
# around the runs.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
S=build-gpu/sluice
nvidia-smi -q -d CLOCK,PERFORMANCE > $O/clocks-before.txt 2>&1
for r in 1 2; do
  $S bench kernels --only act_ --tokens 1,16 > $O/act-t1-$r.txt 2>&1
  $S bench kernels --only act_gelu_bf16 --tokens 1,16 > $O/gelu-t1-$r.txt 2>&1
  $S bench kernels --only act_silu_bf16 --tokens 1,16 > $O/silu-t1-$r.txt 2>&1
done
$S bench kernels --only act_ --tokens 1,32768 > $O/act-t1-32768.txt 2>&1
nvidia-smi -q -d CLOCK,PERFORMANCE > $O/clocks-after.txt 2>&1
el done
grep -hE "act_(silu|gelu)_bf16 +T=1 .*w1 " $O/act-t1-1.txt $O/gelu-t1-1.txt $O/silu-t1-1.txt $O/act-t1-2.txt \
  $O/gelu-t1-2.txt $O/silu-t1-2.txt $O/act-t1-32768.txt | cut -c1-150
