#!/usr/bin/env bash
# Session 29 call 6: the quantizers' software-pipelined segment walk (quant.cu QPIPE, forced by SL_KQ_TUNE_ROWS p1):
# gpu_test_quant's test_qpipe (bit-exact on every one-packet-lane format), then FP8 group and MXFP8 quantization at
# T=8192/32768 with the table's walk (w8 u2 s4) and the pipelined one (u1), kernel us.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
SL_TEST_FILTER='test_qpipe' stdbuf -oL timeout 100 build-gpu/tests/gpu_test_quant > $W/gpu_test_quant.txt 2>&1
echo "test qpipe rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|differ|want" $W/gpu_test_quant.txt | tail -4; el
for op in quant_fp8 quant_mxfp8; do
  SL_KQ_TUNE_ROWS=p1,p1mb8 timeout 60 build-gpu/sluice bench kernels --only $op --tokens 8192,32768 > $W/tune-$op.txt 2>&1
  echo "$op rc=$?"
done
el
cat $W/tune-quant_fp8.txt $W/tune-quant_mxfp8.txt | grep -E "^quant_" | grep -v "unstaged\|staged " | \
  awk '{n=NF; if ($n=="copy") n-=4; printf "%-16s %-15s %-14s kern %s\n", $1, $2" "$3, $4" "$5" "$6, $n}'
