#!/usr/bin/env bash
# session 11 call 8: RMSNorm and SiLU launch choices at T=1024 in a CUDA graph (the events-based tune is host-bound there)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 240 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 1 --ops rms,silu --tokens 1024 --hidden 2048,4096,7168 --top 6 --budget-s 200 > $O/sweep.txt 2>&1; echo sweep rc=$?
cat $O/sweep.txt | grep -v "^#"
