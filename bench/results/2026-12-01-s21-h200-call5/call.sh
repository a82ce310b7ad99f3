#!/usr/bin/env bash
# session 21 call 5: the staged copy asking for fewer x segments before the routing kernel's end (MOE_PRE, pre.patch;
# the rest after griddepcontrol.wait; removed after this call: no gain), so its load burst does not delay the
# routing's last block. Quantized rows T=4096 / 16384 with the kernels' start/end; the routing trigger is back at the
# routing kernel's start.
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_moe_route_dispatch$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
SL_BENCH_KERNEL_PARTS=1 SL_BENCH_STAGED="2048:2:1,1024:4:1,1024:4:2,1024:3:1,1024:3:2" timeout 250 $B bench moe-local \
  --only moe_dispatch_quant --tokens 4096,16384 > $W/quant.txt 2>&1; echo bench rc=$?
tar -czf $O/out.tgz -C $W .
awk '/kernel parts/ {p = p " " $8 "-" $10; next} /^moe/ {printf "%s |%s\n", substr($0, 24, 96), p; p = ""}' $W/quant.txt
