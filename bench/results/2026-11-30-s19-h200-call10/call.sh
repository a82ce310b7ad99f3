#!/usr/bin/env bash
# session 19 call 10 (final code): the RMSNorm rows at T >= 8192 and the T=32768 tune again (the re-tuned picks).
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
timeout 120 $B bench kernels --only rmsnorm --tokens 8192,32768 > $W/rms.txt 2>&1; echo rc=$?
timeout 150 $B bench kernels --tune --only rmsnorm --tokens 32768 --hidden 2048,4096,7168 > $W/tune.txt 2>&1; echo rc=$?
grep -E "^rmsnorm" $W/rms.txt | grep -vE "resident|tune" | cut -c1-130
grep -E "^tune" $W/tune.txt
tar -czf $O/out.tgz -C $W .
