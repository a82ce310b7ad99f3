#!/usr/bin/env bash
# session 18 call 2: the dispatch's stores addressed once per row (store_chunk); GPU dispatch tests; quantized prefill
# rows at the default blocks per SM and at launch bounds of 5 and 6 (SL_XMB: an experiment knob in moe_dispatch.c,
# MOE_COPY_MINB in the copy's __launch_bounds__, not committed); bench's expert buffers allocated once (DSv3
# T=4096,16384 order); decode rows DSv3 T=1,32,128.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$|gpu_test_moe_dispatch$|gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "Passed|Failed|FAIL" /tmp/g/gpu-tests.log | tail -6
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="timeout 120 build-gpu/sluice bench moe-local"
for mb in 0 5 6; do
if [ $mb = 0 ]; then unset SL_XMB; else export SL_XMB=$mb; fi
$B --only quant --tokens 4096,16384 > $W/quant-mb$mb.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/quant-mb$mb.txt | awk -v m=$mb '{printf "mb%s %-14s %-8s %-5s %8s %7s %7s %8s %8s %s %s\n", m, $2, $3, $5, $6, $8, $9, $10, $11, $NF, $(NF-1)}'
done; unset SL_XMB
$B --only moe_dispatch --tokens 4096,16384 --hidden 7168 > $W/ds-b.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch " $W/ds-b.txt | cut -c24-140
$B --only moe_dispatch --tokens 1,32,128 --hidden 7168 > $W/dec.txt 2>&1; echo rc=$?
grep -E "^moe_dispatch" $W/dec.txt | grep -vE "bal |scan|fused-coop|w4|w14|w28" | cut -c24-150
cp $W/*.txt $O/; cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tar -czf $O/out.tgz -C $W .
