#!/usr/bin/env bash
# session 13 call 6: the launcher's new full-grid points (2 waves; MXFP4 quant 8; MXFP8 quant and the FP4 table
# dequantizer 1; router 4): the GPU tests of every kernel launched through it (act, quant, router, the MoE layer's
# split FFN), then the act/quant/dequant rows at T=1024..32768 (defaults; SL_KQ_GRID=1 res/full rows)
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_(act|quant|router|moe_layer)$' > $O/run.txt 2>&1; tail -2 $O/run.txt; grep -E "Passed|Failed|Timeout" /tmp/g/gpu-tests.log | tail -5
grep -B2 -A12 "FAILED" /tmp/g/gpu-tests.log | head -30
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
SL_KQ_GRID=1 timeout 250 build-gpu/sluice bench kernels --only quant_ --tokens 8192,32768 --json $O/bench-quant.json > $O/quant.txt 2>&1; echo rc=$?
SL_KQ_GRID=1 timeout 120 build-gpu/sluice bench kernels --only act_ --tokens 8192,32768 --json $O/bench-act.json > $O/act.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1
grep -vE " res | full | mb6 | staged | unstaged " $O/table.txt | grep -E "T=(8192|32768) " | cut -c3-60,118-175
