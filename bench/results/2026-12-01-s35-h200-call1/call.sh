#!/usr/bin/env bash
# Session 35 call 1: the FP8 IEEE group quantizer's 2-instruction quotient for 16-bit inputs (quant_formats.h
# sl_qf_div16_fast_signed, used by quant_dev.cuh sl_kq_fp8_ieee_codes16 and the non-hardware-E4M3 branch): GPU tests
# (gpu_test_quant whole, with the new test_fp8_ties; gpu_test_moe_dispatch's quantized payload tests), then an A/B
# of bench/probes/fp8_rule_probe.py against a second build with the 3-instruction quotient (tmp_old.patch reversed),
# torch_peers' same-harness FP8 group rows, and `sluice bench kernels --only quant_fp8`.
O=$1
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
# the old quotient: a copy of the tree with the patch reversed, built in the background while the tests run
mkdir -p /tmp/old && tar --exclude=./build-gpu --exclude=./build -cf - . | tar -xf - -C /tmp/old
(cd /tmp/old && patch -p1 -R < tmp_old.patch > /tmp/old-patch.txt 2>&1 && rm -f build-gpu/CMakeCache.txt &&
 SL_BUILD_DIR=/tmp/old/build-gpu scripts/build -DSLUICE_CUDA=ON -DSLUICE_WERROR=OFF > /tmp/old-build.txt 2>&1;
 echo "old build rc=$?" >> /tmp/old-build.txt) &
bpid=$!
SL_TEST_FILTER='test_fp8_ties' timeout 200 build-gpu/tests/gpu_test_quant > $O/ties.txt 2>&1; echo "ties rc=$?"
tail -3 $O/ties.txt; el ties
for f in test_all_formats test_edge_values test_q8_small test_q8_line test_wide_rows_strides; do
  SL_TEST_FILTER=$f timeout 100 build-gpu/tests/gpu_test_quant >> $O/gpu_test_quant.txt 2>&1; echo "$f rc=$?"
done
tail -3 $O/gpu_test_quant.txt; el quant
SL_TEST_FILTER='test_quantized_payloads' timeout 100 build-gpu/tests/gpu_test_moe_dispatch > $O/moe_q.txt 2>&1
echo "moe quantized rc=$?"; tail -3 $O/moe_q.txt; el moe
wait $bpid; tail -1 /tmp/old-build.txt; cat /tmp/old-patch.txt; el oldbuild
for k in new old; do
  libp=build-gpu; [ $k = old ] && libp=/tmp/old/build-gpu
  SL_CACHE_DIR=$libp/jit-cache timeout 110 python3 bench/probes/fp8_rule_probe.py --lib $libp/libsluice_peer_ffi.so \
    --tokens 1,16,128,1024 --rounds 5 > $O/probe-$k.txt 2>&1; echo "probe $k rc=$?"
  cat $O/probe-$k.txt >> $O/probes.txt; el probe $k
done
timeout 130 python3 bench/torch_peers.py --tokens 1,16,128,1024 --ops quant_fp8_g128 --budget-s 100 \
  --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2> $O/peers.err
echo "peers rc=$?"; el peers
timeout 90 build-gpu/sluice bench kernels --only quant_fp8 --tokens 1,16,128,1024,8192,32768 > $O/bench.txt 2>&1
echo "bench rc=$?"; el bench
cat $O/probes.txt
sed -n '/^same harness, in a CUDA graph/,$p' $O/peers.txt | head -30
grep -E "^quant_fp8|^ *quant_fp8" $O/bench.txt | head -30
