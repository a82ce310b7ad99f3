#!/usr/bin/env bash
# Session 28 call 8: the bench's path column after the args refactor (bench_quant.c row_args / row_warps): the quant,
# act and dequant rows at T=1 and 128 print the warps their launch takes.
O=$1; export OUT=/tmp/g; W=/tmp/w8; rm -rf $W; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 90 build-gpu/sluice bench kernels --tokens 1,128 --hidden 2048,7168 > $W/bench.txt 2>&1; echo "bench rc=$?"
tar -czf $O/all.tgz -C $W .
grep -E "^(act_|quant_|dequant_|router)" $W/bench.txt | grep -v "other\|comparison" | cut -c1-110
