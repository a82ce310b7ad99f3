#!/usr/bin/env bash
# Session 34 call 9: the FP8 IEEE group quantizer's straight-line decode path (quant.cu QLINE, kq_launch.h
# q8_line_rows) as committed: gpu_test_quant (test_q8_line: its launches bit for bit against the CPU on random rows,
# rounding boundaries, tiny / zero / NaN blocks; and every earlier quantizer test), bench/probes/fp8_rule_probe.py
# (fixed graphs, ours vs the Triton group kernels) and `sluice bench kernels --only quant_fp8 --tokens 1,16,128`.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
SL_TEST_FILTER='test_q8_line' timeout 120 build-gpu/tests/gpu_test_quant > $O/q8_line.txt 2>&1; echo "q8_line rc=$?"
tail -3 $O/q8_line.txt; el q8_line
timeout 100 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so --tokens 1,16,128,1024 \
  > $O/probe.txt 2>&1; echo "probe rc=$?"; el probe
timeout 60 build-gpu/sluice bench kernels --only quant_fp8 --tokens 1,16,128 > $O/bench.txt 2>&1; echo "bench rc=$?"
el bench
timeout 240 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo "gpu_test_quant rc=$?"
tail -3 $O/gpu_test_quant.txt; el quant
cat $O/probe.txt; grep -E "^quant_fp8" $O/bench.txt
