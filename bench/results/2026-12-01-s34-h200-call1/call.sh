#!/usr/bin/env bash
# Session 34 call 1: bench/probes/fp8_rule_probe.py -- our FP8 group-128 quantizer under the IEEE and the UE8M0 rule
# against the approximate-quotient and the IEEE Triton group kernels, one fixed-graph harness, round-robin.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 300 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so > $O/probe.txt 2> $O/probe.err
echo "probe rc=$?"; el probe; cat $O/probe.txt; tail -5 $O/probe.err
