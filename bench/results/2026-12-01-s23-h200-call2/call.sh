#!/usr/bin/env bash
# session 23 call 2: the scatter probe with coalesced lanes (bench/probes/scatter_bw.cu), then the staged copy taken
# apart (call2/fake.patch, not kept): SL_TMP_NOPDL (the copy launched after the routing, no PDL), SL_TMP_FAKE=1 (a
# trivial "quantization": the same bytes, wrong codes), =2 (rows without the routing's lookups: row e x cap + t), =3
# both; Qwen3 T=16384 mxfp4 and fp8-g128, the kernels' start / end (SL_BENCH_KERNEL_PARTS).
# NOTE: the probe still had half-size row strides (rows overlapped; call 3 has the fix). SL_BENCH_PAYLOAD=2 is mxfp8:
# its files did not come back (too many files); the fp8-g128 ones (p1) are saved as fp8g128-<variant>.txt.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
(cd bench/probes && nvcc -O3 -arch=sm_90 scatter_bw.cu -o /tmp/scatter_bw) && timeout 200 /tmp/scatter_bw > $W/probe.txt 2>&1
echo probe rc=$?; head -14 $W/probe.txt
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_BENCH_KERNEL_PARTS=1
for p in 2 1; do
  for v in base nopdl f1 f1nopdl f2 f3 f3nopdl; do
    unset SL_TMP_NOPDL SL_TMP_FAKE
    case $v in *nopdl) export SL_TMP_NOPDL=1;; esac
    case $v in f1*) export SL_TMP_FAKE=1;; f2*) export SL_TMP_FAKE=2;; f3*) export SL_TMP_FAKE=3;; esac
    SL_BENCH_PAYLOAD=$p timeout 100 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 \
      --hidden 2048 > $W/q$p-$v.txt 2>&1; echo "== p$p $v rc=$?"
    grep -E "^moe|kernel parts" $W/q$p-$v.txt | head -3 | cut -c1-150
  done
done
