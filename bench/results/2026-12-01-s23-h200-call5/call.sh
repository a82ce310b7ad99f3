#!/usr/bin/env bash
# session 23 call 5: the replicated kernel's window array padded to whole 16-byte groups (call 4's memcheck: an
# out-of-bounds shared read at K=1, one warp per block). memcheck and racecheck on gpu_test_moe_dispatch's
# small-shape tests (odd shapes and ranges, skewed + overflow, bad ids, balanced ranges, graph capture, staged copy;
# each compares with the CPU backend), the layer rows at T <= 128 (issue #4's 1.3x target).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
san() {
  SL_TEST_FILTER=$2 timeout $3 compute-sanitizer --tool $1 --error-exitcode 99 build-gpu/tests/gpu_test_moe_dispatch \
    > $W/san-$1-$2.txt 2>&1; echo "$1 $2 rc=$? $(grep -cE '^  ok' $W/san-$1-$2.txt) ok"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED  \]" $W/san-$1-$2.txt | head -3
}
san memcheck test_odd_shapes_and_ranges 120
san racecheck test_odd_shapes_and_ranges 120
timeout 120 build-gpu/sluice bench moe-local --only moe_layer --tokens 1,8,32,128 > $W/layer.txt 2>&1; echo layer rc=$?
grep -E "^moe_layer|copy bandwidth" $W/layer.txt | grep -vE "forced|phases|comparison" | cut -c1-170
for f in test_skewed_and_overflow test_bad_ids test_balanced_ranges test_graph_capture; do
  san memcheck $f 50; san racecheck $f 50
done
