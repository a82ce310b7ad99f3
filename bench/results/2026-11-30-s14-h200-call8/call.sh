#!/usr/bin/env bash
# session 14 call 8: the MXFP4 quantizer's lane takes a whole 32-element block (quant.cu QPAIR with four packets,
# kq_launch.h mx_quad, on for Hopper): gpu_test_quant (test_qpair forced on and off for MXFP4 and NVFP4, with
# blocks below 2^-100), then the MXFP4 / NVFP4 quantizer rows at T=1024/8192/32768 ("single" = the one-packet lane)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 260 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo test-rc=$?; grep -E "OK|FAIL|PASSED|differ" $O/gpu_test_quant.txt | tail -12
timeout 100 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 1024,8192,32768 --json $O/bench-mx.json > $O/bench-mx.txt 2>&1; echo rc=$?
timeout 100 build-gpu/sluice bench kernels --only quant_nvfp4 --tokens 1024,8192,32768 --json $O/bench-nv.json > $O/bench-nv.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -E "quant_(mx|nv)fp4" $O/table.txt | cut -c1-150
