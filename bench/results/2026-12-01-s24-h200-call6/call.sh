#!/usr/bin/env bash
# session 24 call 6: the quantized dispatch rows at T=16384 with the routing's rounds forced (SL_BENCH_ROUTE_ROUNDS,
# new): 2 (the host's choice at T=16384: 128 routing blocks) / 4 (64) / 8 (32) -- DeepSeek-V3's last-block scan
# reads 64 counts per thread at 128 blocks (E=256: 2 ranges per expert), 32 at 64 blocks.
O=$1; export OUT=/tmp/g; W=/tmp/w6; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for r in 1 2; do for rr in 2 4 8; do
  [ $r = 2 ] && [ $rr = 8 ] && continue
  SL_BENCH_ROUTE_ROUNDS=$rr timeout 100 build-gpu/sluice bench moe-local --only quant --tokens 16384 > $W/q-$rr-$r.txt 2>&1
  echo "== rounds $rr r$r rc=$?"
  grep -E '^moe_dispatch_quant' $W/q-$rr-$r.txt | grep -vE 'regs|sbulk|staged |direct ' | sed -E 's/ +/ /g; s/^moe_dispatch_quant //; s/qwen3-30b-a3b/q/; s/deepseek-v3/d/; s/route\+copy ?//' | cut -d' ' -f1-9 | tr '\n' ';'; echo
done; done
el
tar -czf $O/all.tgz -C $W .
