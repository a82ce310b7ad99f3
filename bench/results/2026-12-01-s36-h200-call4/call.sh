#!/usr/bin/env bash
# Session 36 call 4: the FP8 IEEE rule of 16-bit inputs from a reciprocal rounded down (quant_dev.cuh sl_kq_rcp_rd,
# quant_formats.h sl_qf_div16_fast: r_lo >= 0, so the codes keep x's sign without the 4-instruction sign OR per lane).
# GPU tests: gpu_test_quant whole (test_rcp_rd: sl_kq_rcp_rd against __frcp_rd at every s of [2^-125, 2^125); the
# ties, edge, line, small-prefill and format tests bit for bit the CPU), and beside it gpu_test_moe_dispatch's
# quantized payloads, gpu_test_pdl and gpu_test_act; then bench/probes/fp8_rule_probe.py (triton-grp the anchor
# against call 3's numbers of the old code) and `sluice bench kernels --only quant_fp8`.
O=$1; export OUT=/tmp/run36; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
( SL_TEST_FILTER='test_quantized_payloads' timeout 220 build-gpu/tests/gpu_test_moe_dispatch > $O/side.txt 2>&1
  echo "moe quantized rc=$?" >> $O/side.txt
  timeout 60 build-gpu/tests/gpu_test_pdl >> $O/side.txt 2>&1; echo "pdl rc=$?" >> $O/side.txt
  timeout 90 build-gpu/tests/gpu_test_act >> $O/side.txt 2>&1; echo "act rc=$?" >> $O/side.txt ) &
timeout 260 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo "quant rc=$?"; el quant
wait; el side; grep -E "rc=|PASSED|FAILED|OK \]|ERROR" $O/side.txt | grep -v "OK \]" | head
timeout 100 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so --tokens 1,16,128,1024 \
  --rounds 5 > $O/probe.txt 2>&1; echo "probe rc=$?"; el probe
timeout 90 build-gpu/sluice bench kernels --only quant_fp8 --tokens 1,16,128,1024,8192,32768 > $O/bench.txt 2>&1
echo "bench rc=$?"; el bench
grep -E "^\[ +(OK|FAILED|PASSED|ERROR)|tests? (run|passed)|differs" $O/gpu_test_quant.txt | tail -20
cat $O/probe.txt; grep -E "^ *quant_fp8" $O/bench.txt | cut -c1-150 | head -24
