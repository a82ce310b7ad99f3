#!/usr/bin/env bash
# session 10 scratch device script (not committed)
O=$1; export OUT=/tmp/g
SL_TEST_FILTER='test_rmsnorm_[st]*' tests/gpu/run --no-bench --tests 'gpu_test_(norm|act)$' > $O/run.txt 2>&1; tail -5 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
B=build-gpu/sluice
timeout 200 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --ops rms --tokens 1,16,128,1024 --rounds 5 --top 12 --budget-s 150 > $O/sweep-rms.txt 2>&1
timeout 100 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --ops silu --tokens 1,16,128,8192 --rounds 3 --top 4 --budget-s 80 > $O/sweep-silu.txt 2>&1
for op in rmsnorm act_silu_bf16 qknorm; do timeout 100 $B bench kernels --only $op --tokens 1,16,4096,8192,32768 > $O/k-$op.txt 2>&1; done
grep "==" $O/sweep-rms.txt $O/sweep-silu.txt
cat $O/k-*.txt | grep -E "^(rmsnorm|act_silu_bf16|qknorm) " | cut -c1-150
