#!/usr/bin/env bash
# session 18 call 4 (experiment, not committed: call4/prefetch.patch): the split copy with the next item's x and ids
# loaded before the current item's stores (SL_XPF=1 -> MOE_COPY_PREFETCH), at the default blocks per SM and at launch
# bounds 4 and 5 for the quantized payloads (SL_XMB); T=4096,16384, both models.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B="timeout 150 build-gpu/sluice bench moe-local"
row() { grep -E "^moe_dispatch" $1 | grep -vE "r8 nopdl|nopdl|rows" | awk -v t=$2 '{printf "%-8s %-14s %-8s %9s %7s %9s %s %s\n", t, $2, $3, $5, $7, $(NF-1), $NF, ($0 ~ /payload/ ? "" : "bf16")}' | sed 's/payload //'; }
unset SL_XPF SL_XMB; $B --only moe_dispatch --tokens 4096,16384 > $W/pf0.txt 2>&1; echo rc=$?; row $W/pf0.txt pf0
export SL_XPF=1; $B --only moe_dispatch --tokens 4096,16384 > $W/pf1.txt 2>&1; echo rc=$?; row $W/pf1.txt pf1
export SL_XMB=4; $B --only quant --tokens 4096,16384 > $W/pf1mb4.txt 2>&1; echo rc=$?; row $W/pf1mb4.txt pf1mb4
export SL_XMB=5; $B --only quant --tokens 4096,16384 > $W/pf1mb5.txt 2>&1; echo rc=$?; row $W/pf1mb5.txt pf1mb5
cp $W/*.txt $O/; tar -czf $O/out.tgz -C $W .
