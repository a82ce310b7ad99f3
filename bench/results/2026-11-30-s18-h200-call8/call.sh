#!/usr/bin/env bash
# session 18 call 8 (experiment, not committed as is): the FP4 payloads' copy at 8 blocks per SM (SL_XMB=8: 32
# registers, ~80 bytes of spill) against the table's 6; the quantized dispatch tests with it.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="timeout 100 build-gpu/sluice bench moe-local"
for i in 1 2; do for mb in 6 8; do
SL_XMB=$mb SL_BENCH_PAYLOAD=3 $B --only quant --tokens 4096,16384 > $W/mb$mb-$i-p3.txt 2>&1
SL_XMB=$mb SL_BENCH_PAYLOAD=4 $B --only quant --tokens 4096,16384 > $W/mb$mb-$i-p4.txt 2>&1
grep -hE "^moe_dispatch" $W/mb$mb-$i-p3.txt $W/mb$mb-$i-p4.txt | grep -v rows | awk -v m=$mb '{printf "mb%s %-14s %-8s %9s %7s %s\n", m, $2, $3, $5, $7, $NF}'
done; done
SL_XMB=8 SL_TEST_FILTER='test_quantized_*' timeout 150 build-gpu/tests/gpu_test_moe_dispatch > $W/test-mb8.txt 2>&1; echo test-rc=$?; tail -2 $W/test-mb8.txt
cp $W/*.txt $O/; tar -czf $O/out.tgz -C $W .
