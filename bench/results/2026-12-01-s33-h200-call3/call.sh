#!/usr/bin/env bash
# Session 33 call 3: call 2: only the whole alloc+fill of the FP8-out row triggers (8 sets: 1 MiB bf16 input copied from
# pageable memory, 256 KiB output, an 8 KiB scale buffer memset to 0x35). Bisect the order and the sizes.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger
p8=""; for i in 1 2 3 4 5 6 7 8; do p8="$p8 h2d:1048576~ memset:8192~"; done
h8=""; for i in 1 2 3 4 5 6 7 8; do h8="$h8 h2d:1048576~"; done
m8=""; for i in 1 2 3 4 5 6 7 8; do m8="$m8 memset:8192~"; done
for v in "h2d:1048576~ memset:8192" "h2d:1048576 memset:8192" "$p8 sync" "$h8 $m8 sync" "$h8 sync $m8 sync" \
         "memset:8192~ h2d:1048576" "h2d:131072~ memset:1024" "h2d:8388608~ memset:65536" "h2d:67108864~ memset:524288" \
         "h2d:1048576~ memsetS:8192" "h2d:1048576~ memset0:8192" "h2d:1048576~ malloc:8192" "h2d:1048576~ memset:1048576" \
         "h2d:1048576~ h2d:8192" "h2d:262144~ memset:8192" "h2d:524288~ memset:8192" "h2d:2097152~ memset:8192" \
         "row:silu8:16" "row:silu8:32" "row:silu8:64" "row:silu8:128"; do
  echo "== $v" | tee -a $O/probe.txt
  $P $v 2>&1 | tee -a $O/probe.txt
done
el probes
