#!/usr/bin/env bash
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -2 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
timeout 420 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --ops rms,silu --hidden 4096,7168,2048 --tokens 1,16,128,1024 --rounds 3 --top 6 --budget-s 380 > $O/sweep.txt 2>&1
grep -A3 "==" $O/sweep.txt | cut -c1-110
