#!/usr/bin/env bash
# session 23 call 1: the scatter probe (bench/probes/scatter_bw.cu: the K scattered rows' floor with the destinations
# given, no quantization, at each payload's row size), then the quantized dispatch rows at T=16384 beside it.
# NOTE: this probe version had half-size row strides (rows overlapped): its rows are not valid (call 3 has the fix).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
(cd bench/probes && nvcc -O3 -arch=sm_90 scatter_bw.cu -o /tmp/scatter_bw) && timeout 200 /tmp/scatter_bw > $W/probe.txt 2>&1
echo probe rc=$?; cat $W/probe.txt
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 16384 > $W/quant.txt 2>&1; echo rc=$?
grep -E "^moe|copy bandwidth" $W/quant.txt | grep -vE "regs|sbulk" | cut -c1-150
