#!/usr/bin/env bash
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
for m in cold warm; do f=""; [ $m = warm ] && f=--warm
timeout 100 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --ops rms --hidden 2048,4096 --tokens 1,16,128 --rounds 3 --top 4 --budget-s 80 $f > $O/sweep-$m.txt 2>&1; done
grep -A2 "==" $O/sweep-cold.txt $O/sweep-warm.txt | cut -c1-120
