#!/usr/bin/env bash
# session 24 call 3: the split path's copy waits per routing chunk (look-back offsets published per chunk,
# no griddepcontrol.wait before the lookups). gpu_test_moe_dispatch (every path and payload vs the CPU), the
# dispatch rows at T=4096,16384 with the kernels' start/end (SL_BENCH_KERNEL_PARTS), gpu_test_moe_layer,
# compute-sanitizer on split-path tests.
O=$1; export OUT=/tmp/g; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 240 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1; echo dispatch-test rc=$?
grep -E "PASSED|FAILED|^\[  FAILED|ok:" $W/test-dispatch.txt | tail -4; grep -B2 -A6 -E "FAIL|mismatch|error" $W/test-dispatch.txt | head -30
el
SL_BENCH_KERNEL_PARTS=1 timeout 150 build-gpu/sluice bench moe-local --only moe_dispatch --tokens 4096,16384 > $W/disp.txt 2>&1
echo bench rc=$?
grep -E "^moe_dispatch|copy bandwidth" $W/disp.txt | grep -vE "regs|sbulk" | cut -c1-175
el
timeout 90 build-gpu/tests/gpu_test_moe_layer > $W/test-layer.txt 2>&1; echo layer-test rc=$?; tail -2 $W/test-layer.txt
el
san() {
  SL_TEST_FILTER=$2 timeout $3 compute-sanitizer --tool $1 --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$1-$2.txt 2>&1; echo "$1 $2 rc=$? $(grep -cE '^  ok' $W/san-$1-$2.txt) ok"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED  \]" $W/san-$1-$2.txt | head -3
}
san memcheck test_skewed_and_overflow 60
san racecheck test_skewed_and_overflow 60
san memcheck test_direct_copy 90
el
tar -czf $O/all.tgz -C $W .
