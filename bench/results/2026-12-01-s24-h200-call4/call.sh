#!/usr/bin/env bash
# session 24 call 4: A/B of the per-chunk waits (chunks.patch: look-back offsets published per routing chunk,
# the copies wait per chunk with a back-off) against HEAD (feace11) on one machine: the dispatch rows at
# T=4096,16384, two rounds each, with the kernels' start/end; then the split-path GPU tests with the patch.
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
P=bench/results/2026-12-01-s24-h200-call4/chunks.patch
patch -R -p1 < $P > $W/patch-r.txt 2>&1 || { echo "patch -R failed"; cat $W/patch-r.txt; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
cp build-gpu/sluice /tmp/sl-base
patch -p1 < $P > $W/patch.txt 2>&1 || { echo "patch failed"; cat $W/patch.txt; }
cmake --build build-gpu -j16 > $W/rebuild.txt 2>&1; echo rebuild=$?
cp build-gpu/sluice /tmp/sl-new
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for r in 1 2; do for v in base new; do
  SL_BENCH_KERNEL_PARTS=1 timeout 150 /tmp/sl-$v bench moe-local --only moe_dispatch --tokens 4096,16384 > $W/d-$v-$r.txt 2>&1
  echo "== $v round $r rc=$?"
  grep -E "^moe_dispatch" $W/d-$v-$r.txt | grep -vE "regs|sbulk|rows|r8" | sed -E 's/ +/ /g; s/^moe_dispatch(_quant)? //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//; s/ payload / /' | cut -c1-70 | tr '\n' ';'; echo
done; done
el
SL_TEST_FILTER='test_[sgbdq]*' timeout 200 build-gpu/tests/gpu_test_moe_dispatch > $W/test-dispatch.txt 2>&1; echo dispatch-test rc=$?
grep -cE "^  ok" $W/test-dispatch.txt; grep -E "PASSED|FAILED" $W/test-dispatch.txt | tail -3
el
tar -czf $O/all.tgz -C $W .
