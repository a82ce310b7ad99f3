#!/usr/bin/env bash
# session 19 call 8: our RMSNorm / SiLU launch choices against the Triton row kernel in the peers' harness.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
P="python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --rounds 3 --top 6"
timeout 200 $P --tokens 8192 --hidden 4096,7168 --ops rms,silu --budget-s 180 > $W/sweep1.txt 2>&1
timeout 150 $P --tokens 8192 --hidden 2048 --ops silu --budget-s 120 > $W/sweep2.txt 2>&1
timeout 150 $P --tokens 32768 --hidden 2048 --ops rms --budget-s 120 > $W/sweep3.txt 2>&1
tar -czf $O/out.tgz -C $W .
