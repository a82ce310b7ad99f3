#!/usr/bin/env bash
# Session 35 call 2 (timing experiment, env knobs in an uncommitted quant.c): FLAT (quant.cu: the item layout's
# addresses from the item index alone over contiguous rows; SL_EXP_FLAT=1) and the straight-line path at every
# decode launch (SL_EXP_QLINE=1), on top of call 1's 2-instruction quotient. GPU tests with the knobs on, then
# bench/probes/fp8_rule_probe.py per variant (round-robin over the variants, twice), SASS (tmp_sass.py), and the
# MoE dispatch's quantized payloads (the 2-instruction quotient in moe_dispatch.cu's FP8 payloads) to the end.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
for f in test_fp8_ties test_all_formats test_edge_values test_q8_small test_q8_line; do
  SL_EXP_FLAT=1 SL_TEST_FILTER=$f timeout 100 build-gpu/tests/gpu_test_quant >> $O/tests.txt 2>&1; echo "flat $f rc=$?"
done
for f in test_fp8_ties test_edge_values; do
  SL_EXP_FLAT=1 SL_EXP_QLINE=1 SL_TEST_FILTER=$f timeout 100 build-gpu/tests/gpu_test_quant >> $O/tests.txt 2>&1
  echo "flat+qline $f rc=$?"
done
el tests
for r in 1 2; do
  for v in base flat flatline line; do
    case $v in base) e="";; flat) e="SL_EXP_FLAT=1";; flatline) e="SL_EXP_FLAT=1 SL_EXP_QLINE=1";; line) e="SL_EXP_QLINE=1";; esac
    echo "== $v ($e) round $r" >> $O/probes.txt
    env $e timeout 60 python3 bench/probes/fp8_rule_probe.py --lib build-gpu/libsluice_peer_ffi.so \
      --tokens 1,16,128,1024 --rounds 5 >> $O/probes.txt 2>&1; echo "probe $v rc=$?"
  done
done
el probes
SL_CACHE_DIR=/tmp/fresh-cache timeout 60 python3 tmp_sass.py /tmp/s2 > /tmp/s2.txt 2>&1 || mkdir -p /tmp/s2; echo "sass rc=$?"
(cd /tmp/s2 && rm -f *.cubin && tar czf $O/sass.tgz *.sass); el sass
SL_TEST_FILTER='test_quantized_payloads' timeout 300 build-gpu/tests/gpu_test_moe_dispatch > $O/moe_q.log 2>&1
echo "moe quantized rc=$?"; grep -v CAPACITY $O/moe_q.log | tail -4; grep -c "^  ok" $O/moe_q.log; el moe
grep -v "^T=8192" $O/probes.txt
