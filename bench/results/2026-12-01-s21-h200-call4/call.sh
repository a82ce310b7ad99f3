#!/usr/bin/env bash
# session 21 call 4: the routing kernel lets the copy launch after its ranking (PDL trigger after route_pairs, not at
# its start; reverted after this call: no gain). Dispatch rows (bf16 + quantized) at T=4096 / 16384 with each
# repetition's kernel start/end.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
SL_BENCH_KERNEL_PARTS=1 timeout 250 $B bench moe-local --only moe_dispatch --tokens 4096,16384 > $W/disp.txt 2>&1; echo bench rc=$?
tar -czf $O/out.tgz -C $W .
grep -E "^moe|kernel parts" $W/disp.txt | grep -vE "replicated|fused" | cut -c1-150 | grep -B3 -E "^moe" | grep -vE "^--" | head -150
