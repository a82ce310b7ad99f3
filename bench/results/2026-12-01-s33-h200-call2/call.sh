#!/usr/bin/env bash
# Session 33 call 2: call 1 found the row's allocation + fill step to be the trigger (SiLU->FP8 T=128/1024). Bisect it:
# allocation alone, the bf16 input's pageable copies, the scales' memset (sizes, byte, stream).
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
cmake --build build-gpu --target sl_probe_graph_trigger > $O/probe-build.txt 2>&1 || { tail -20 $O/probe-build.txt; exit 1; }
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
P=build-gpu/sl_probe_graph_trigger
for v in "row:silu8:128:nofill" "row:silu8:128" "memset:8192" "memset:1024" "memset:4096" "memset:65536" \
         "memset:524288" "memset:2097152" "memset0:8192" "memsetS:8192" "malloc:8192" "h2d:1048576" \
         "memset:1024 memset:8192" "memset:8192 memset:8192 memset:8192" "row:silu16:128 memset:8192" \
         "row:silu8:8192" "row:silu8:8192 memset:8192" "memset:12288" "memset:16384" "memset:32768" "memset:131072"; do
  echo "== $v" | tee -a $O/probe.txt
  $P $v 2>&1 | tee -a $O/probe.txt
done
el probes
