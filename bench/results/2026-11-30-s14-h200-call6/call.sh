#!/usr/bin/env bash
# session 14 call 6: warps per block 4 / 16 (new tune rows "w4" / "w16") for the rows still short of 92 % -- the FP4
# table dequantizer (16 warps: half the per-CTA table fills per task), the MXFP4 / NVFP4 quantizers and the FP8-out
# activation at T=8192 h=2048 and T=32768
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_TUNE=1 timeout 150 build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 > $O/tune-deq.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 120 build-gpu/sluice bench kernels --only quant_mxfp4 --tokens 8192,32768 --hidden 2048,4096 > $O/tune-mx.txt 2>&1; echo rc=$?
SL_KQ_TUNE=1 timeout 80 build-gpu/sluice bench kernels --only act_silu_fp8 --tokens 8192 --hidden 2048,4096 > $O/tune-act.txt 2>&1; echo rc=$?
grep -hE "^(dequant|quant|act)" $O/tune-deq.txt $O/tune-mx.txt $O/tune-act.txt | grep -E "w8  |w4 |w16 " | cut -c1-69,100-119
