#!/usr/bin/env bash
# Session 28 call 1: GELU(tanh)-and-mul -- the new bench rows (bf16 and FP8 out) with the table's form of
# 1 + tanh and the other ("ex2" / "tanhf" rows), the whole gpu_test_act (GELU with either form forced, edge
# values), and the SiLU rows beside them.
O=$1; export OUT=/tmp/g; W=/tmp/w1; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 200 build-gpu/tests/gpu_test_act > $W/gpu_test_act.txt 2>&1; echo "test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|gelu edge" $W/gpu_test_act.txt | tail -8; el
timeout 150 build-gpu/sluice bench kernels --only act_ --json $W/bench-act.json > $W/bench-act.txt 2>&1; echo "bench rc=$?"
head -1 $W/bench-act.txt; el
grep -E "^act_gelu" $W/bench-act.txt | grep -E "T=(1|16|1024|8192|32768) " | cut -c1-150
