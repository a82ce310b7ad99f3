#!/usr/bin/env bash
# session 23 call 6: the scatter probe with the real quantization (qscatter rows: quant_dev.cuh's encoder in
# registers, codes through a per-warp shared row buffer, 16-byte stores; no routing), then the staged copy taken
# apart (call2/fake.patch applied here only: SL_TMP_NOPDL, SL_TMP_FAKE=1/2/3), Qwen3 T=16384, SL_BENCH_PAYLOAD=2 -- which
# is mxfp8 (mxfp4 was meant); files saved as mxfp8-<variant>.txt.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
(cd bench/probes && nvcc -O3 -arch=sm_90 -I../.. scatter_bw.cu -o /tmp/scatter_bw) && timeout 150 /tmp/scatter_bw > $W/probe.txt 2>&1
echo probe rc=$?; cat $W/probe.txt
patch -p1 < bench/results/2026-12-01-s23-h200-call2/fake.patch > /dev/null && echo patched
tests/gpu/run --no-bench --tests 'gpu_test_device$' > /tmp/run.txt 2>&1; tail -1 /tmp/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_BENCH_KERNEL_PARTS=1
mkdir -p /tmp/q
for v in base nopdl f1 f1nopdl f2 f3nopdl; do
  unset SL_TMP_NOPDL SL_TMP_FAKE
  case $v in *nopdl) export SL_TMP_NOPDL=1;; esac
  case $v in f1*) export SL_TMP_FAKE=1;; f2*) export SL_TMP_FAKE=2;; f3*) export SL_TMP_FAKE=3;; esac
  SL_BENCH_PAYLOAD=2 timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 \
    --hidden 2048 > /tmp/q/q2-$v.txt 2>&1; echo "== mxfp4 $v rc=$?"
  grep -E "^moe|kernel parts" /tmp/q/q2-$v.txt | head -3 | cut -c1-150
done
tar -czf $W/q2.tgz -C /tmp/q .
