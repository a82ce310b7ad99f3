#!/usr/bin/env bash
# Session 33 call 1: bench/probes/graph_trigger.c in its FIRST form (usage `OP T [I]`: the victim timed fresh, after
# the trigger row's alloc+fill, one launch, 100 event-timed launches, its graph, the free, new victim buffers, and a
# second victim module loaded after). Its later form runs the same as `row:silu8:T` (alloc+fill, then 100 launches).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger
for v in "none 1" "silu8 16" "silu8 128" "silu16 128" "silu8 1024" "silu8 8192" "silu8 32768" "silu8 128"; do
  $P $v 2>&1 | tee -a $O/probe.txt
done
el probes
build-gpu/sluice bench kernels --only act_ --hidden 2048 --tokens 1,128 > $O/bench-act-t128.txt 2>&1
grep -E " T=1 " $O/bench-act-t128.txt | grep -vE "p16|p4" | sed -E 's/ +/ /g' | cut -c1-150
el done
