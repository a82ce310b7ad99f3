#!/usr/bin/env bash
# session 24 call 2: the FP4 dispatch rows' timeline (SL_BENCH_KERNEL_PARTS: routing and copy kernels' start/end):
# default (PDL), no PDL (SL_TMP_NOPDL: the routing alone, then the copy alone), the direct copy waiting before any
# load (SL_TMP_PRE=0), and with an L2 prefetch of its next pass's x before the wait (SL_TMP_PRE=2); pre.patch.
O=$1; export OUT=/tmp/g; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
patch -p1 < bench/results/2026-12-01-s24-h200-call2/pre.patch > $W/patch.txt 2>&1 || { echo patch failed; cat $W/patch.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
export SL_BENCH_KERNEL_PARTS=1
echo "t=$(( $(date +%s) - t0 ))"
run() { # name, env...
  local n=$1; shift
  for p in 3 4; do
    env "$@" SL_BENCH_PAYLOAD=$p timeout 100 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $W/$n-p$p.txt 2>&1
    echo "== $n p$p rc=$?"
    grep -E "^moe_dispatch_quant|kernel parts" $W/$n-p$p.txt | grep -vE "sbulk|regs" | awk '/^moe/{print $3, $4, $5, $6, $9, $10, $11; next} {print "   ", $8 "-" $10}' | tr '\n' ' ' | sed 's/T=16384/\nT=16384/g'; echo
  done
}
run base
run nopdl SL_TMP_NOPDL=1
run pre0 SL_TMP_PRE=0
run pre2 SL_TMP_PRE=2
run base2
echo "t=$(( $(date +%s) - t0 ))"
tar -czf $O/all.tgz -C $W .
