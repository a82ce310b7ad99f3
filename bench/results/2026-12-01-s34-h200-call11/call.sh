#!/usr/bin/env bash
# Session 34 call 11: the straight-line path's scale store through cvta.to.global (review fix): test_q8_line and the
# probe at T <= 16.
O=$1
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
SL_TEST_FILTER='test_q8_line' timeout 120 build-gpu/tests/gpu_test_quant > $O/q8_line.txt 2>&1; echo "q8_line rc=$?"
tail -2 $O/q8_line.txt
timeout 60 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so --tokens 1,16 > $O/probe.txt 2>&1
echo "probe rc=$?"; cat $O/probe.txt
