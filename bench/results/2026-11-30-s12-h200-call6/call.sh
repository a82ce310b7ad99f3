#!/usr/bin/env bash
# session 12 call 6 (final): the full `sluice bench kernels` with everything of the session in (RMSNorm rsqrt + one-row
# kernel, QK-norm st.cs + rsqrt, SiLU ex2) -- the table for the issue note
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 330 build-gpu/sluice bench kernels --json $O/bench-kernels.json > $O/bench-kernels.txt 2>&1; echo rc=$?
python3 scripts/bench_summary.py $O > $O/table.txt 2>&1; tail -70 $O/table.txt
