#!/usr/bin/env bash
# session 23 call 8: the FP4 payloads' copy choice (the direct copy where its resident warps get >= 16 items each:
# DeepSeek-V3 T=16384), mxfp4 and nvfp4 at T=8192 and 16384 on both models, with the "staged" / "direct"
# comparison rows.
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
for p in 3 4; do
  SL_BENCH_PAYLOAD=$p timeout 200 build-gpu/sluice bench moe-local --only moe_dispatch_quant --tokens 8192,16384 \
    --json $W/quant-p$p.json > $W/quant-p$p.txt 2>&1; echo "p$p rc=$?"
  grep -E "^moe|copy bandwidth" $W/quant-p$p.txt | grep -vE "regs|sbulk" | cut -c1-150
done
# (The bench's T list is issue #4's: --tokens 8192 selected nothing; only T=16384 ran.)
