#!/usr/bin/env bash
# session 21 call 2: routing offsets by look-back (every block sums its predecessors' counts; no last-block scan;
# lookback.patch) + the staged copy's default shapes per payload. The dispatch / route-dispatch / layer GPU tests, then
# the dispatch rows (bf16 and quantized) at T=4096 / 16384 with staged shapes side by side.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_(dispatch|route_dispatch|layer)$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "FAIL|Failed|rror" /tmp/g/gpu-tests.log | grep -v "error: SL_ERR" | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
SL_BENCH_STAGED="1024:3,2048:2,1024:4" timeout 200 $B bench moe-local --only moe_dispatch \
  --tokens 4096,16384 > $W/disp.txt 2>&1; echo bench rc=$?
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
grep -E "^moe" $W/disp.txt | grep -E "T=(4096|16384)" | grep -vE "replicated|fused" | cut -c1-150
