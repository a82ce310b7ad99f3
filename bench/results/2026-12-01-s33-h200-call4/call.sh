#!/usr/bin/env bash
# Session 33 call 4: count, size, byte and stream of the memsets alone; the report gains stream launches (200 queued
# behind ~1 ms of work).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger
rep() { local n=$1 a=$2 r=""; for i in $(seq $n); do r="$r $a"; done; echo $r; }
for v in "malloc:8" "$(rep 8 memset:8192~) sync" "$(rep 8 memset:8192)" "$(rep 16 memset:8192~) sync" \
         "$(rep 8 memset0:8192~) sync" "$(rep 8 memsetS:8192~) sync" "$(rep 8 memset:4096~) sync" \
         "$(rep 8 memset:65536~) sync" "$(rep 8 memset:524288~) sync" "$(rep 4 memset:8192~) sync" \
         "$(rep 6 memset:8192~) sync" "$(rep 32 memset:1024~) sync" "$(rep 8 h2d:8192~) sync" "row:silu8:128"; do
  echo "== $v" | tee -a $O/probe.txt
  $P $v 2>&1 | grep -vE "^  memset.*~" | tee -a $O/probe.txt
done
el probes
