#!/usr/bin/env bash
# session 20 call 13 (review mend): one combine loop for every decode shape (the ranks' weights and outputs loaded
# before the FMA chain, as the _DL shape had); the layer GPU tests, then the T=1 rows once.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_layer' > $W/run.txt 2>&1; tail -2 $W/run.txt
grep -E "FAIL|rror" /tmp/g/gpu-tests.log | head -20
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 100 build-gpu/sluice bench moe-local --only moe_layer --tokens 1 > $W/layer1.txt 2>&1; echo rc=$?
grep -E "^moe_layer" $W/layer1.txt | grep -E "decode-kernel( +[0-9]|.*pr-if( |-dl))" | grep -v phases | cut -c42-150
tar -czf $O/out.tgz -C $W . /tmp/g/gpu-tests.log 2>/dev/null
