#!/usr/bin/env bash
# session 19 call 4: where the SPLITK decode shape's illegal instruction is (compute-sanitizer), and its cubin.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=/tmp/jc
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_TIMEOUT_MS=2000
B=build-gpu/sluice
SL_BENCH_DECODE_SHAPE=8 SL_BENCH_DECODE_L2=0 timeout 200 compute-sanitizer --tool memcheck --show-backtrace device \
  --print-limit 5 $B bench moe-local --only moe_layer --tokens 1 --iters 2 > $W/san.txt 2>&1; echo rc=$?
mkdir -p $W/jc; for f in $(ls -t /tmp/jc/*.cubin 2>/dev/null | head -3); do cp $f $W/jc/; done
tar -czf $O/out.tgz -C $W .
