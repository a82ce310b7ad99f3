#!/usr/bin/env bash
# Session 33 call 5: which streams count (blocking, another non-blocking, the victim's own), do device copies or
# kernels on the legacy stream count, does CUDA_DEVICE_MAX_CONNECTIONS move the count.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger
rep() { local n=$1 a=$2 r=""; for i in $(seq $n); do r="$r $a"; done; echo $r; }
run() { echo "== $*" | tee -a $O/probe.txt; "$@" 2>&1 | tee -a $O/probe.txt; }
run $P $(rep 32 memsetS:8192~) sync
run $P $(rep 8 memsetB:8192~) sync
run $P $(rep 32 memsetN:8192~) sync
run $P $(rep 16 d2d:8192~) sync
run $P actL:64
run env CUDA_DEVICE_MAX_CONNECTIONS=1 $P $(rep 4 memset:8192~) sync $(rep 4 memset:8192~) sync
run env CUDA_DEVICE_MAX_CONNECTIONS=32 $P $(rep 8 memset:8192~) sync $(rep 8 memset:8192~) sync $(rep 16 memset:8192~) sync
run env CUDA_DEVICE_MAX_CONNECTIONS=2 $P $(rep 2 memset:8192~) sync $(rep 2 memset:8192~) sync $(rep 4 memset:8192~) sync
run $P $(rep 7 memset:8192~) sync memsetS:8192 memset:4096 memset:8192
el probes
