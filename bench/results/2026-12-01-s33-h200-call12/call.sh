#!/usr/bin/env bash
# Session 33 call 12: the launchers changed by the `pdl` argument, default (pdl off) paths against the CPU backend:
# gpu_test_quant (quantizers, dequantizers), and gpu_test_norm's RMSNorm-in-a-graph, QK-norm Qwen3 and embedding tests.
O=$1; export OUT=$O/run; mkdir -p $OUT
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
SL_TEST_FILTER='test_rmsnorm_in_cuda_graph' timeout 60 build-gpu/tests/gpu_test_norm > $O/norm-graph.txt 2>&1; echo "norm graph rc=$?"
SL_TEST_FILTER='test_qknorm_qwen3*' timeout 60 build-gpu/tests/gpu_test_norm > $O/norm-qk.txt 2>&1; echo "qknorm rc=$?"
SL_TEST_FILTER='test_embedding*' timeout 40 build-gpu/tests/gpu_test_norm > $O/norm-emb.txt 2>&1; echo "embedding rc=$?"
el norm
timeout 170 build-gpu/tests/gpu_test_quant > $O/gpu_test_quant.txt 2>&1; echo "quant rc=$?"; tail -2 $O/gpu_test_quant.txt; el quant
