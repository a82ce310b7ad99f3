#!/usr/bin/env bash
# session 12 call 4 (final): the GPU tests of everything this session changed: gpu_test_norm in full (RMSNorm: rsqrt
# factor, one-row kernel, new decode entries; QK-norm: st.cs + rsqrt entry), gpu_test_act (SiLU ex2), gpu_test_moe_layer
# (its split FFN runs sl_act), gpu_test_device
O=$1; export OUT=/tmp/g
timeout 560 tests/gpu/run --no-bench --tests 'gpu_test_(device|act|norm|moe_layer)$' > $O/run.txt 2>&1; echo run rc=$?
grep -E "Test +#|tests passed|tests failed|compile-ahead" $O/run.txt | head -20
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; tail -5 /tmp/g/gpu-tests.log
