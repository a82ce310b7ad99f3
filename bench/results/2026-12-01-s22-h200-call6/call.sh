#!/usr/bin/env bash
# session 22 call 6 (the fused routing reverted): the staged copy's scales by plain 16-byte stores from the lanes
# (then an env switch, SL_MOE_STAGED_SCALE_ST=1; now the default, staged_scale_bulk = 1 the old form) -- tests with it,
# then the quantized rows without / with.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_MOE_STAGED_SCALE_ST=1 SL_TEST_FILTER='test_[qs]*' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/test.txt 2>&1
echo test rc=$?; grep -cE "^  ok" $W/test.txt; grep -E "^\[  (FAILED|PASSED) |differ" $W/test.txt | head -5
B="build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 4096,16384"
for v in 0 1; do
  SL_MOE_STAGED_SCALE_ST=$v timeout 150 $B > $W/st$v.txt 2>&1; echo "scale_st $v rc=$?"
  grep -E "^moe" $W/st$v.txt | grep -vE "regs" | cut -c1-140
done
