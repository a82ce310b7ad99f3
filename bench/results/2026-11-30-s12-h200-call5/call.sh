#!/usr/bin/env bash
# session 12 call 5: the rest of gpu_test_norm after call 4's ctest timeout (300 s, raised to 600 for gpu tests):
# the QK-norm tests (the st.cs + rsqrt entry) and embedding, by SL_TEST_FILTER
O=$1; export OUT=/tmp/g
SL_TEST_FILTER='test_[qe]*' timeout 560 tests/gpu/run --no-bench --tests 'gpu_test_norm$' > $O/run.txt 2>&1; echo run rc=$?
grep -E "Test +#|tests passed|tests failed" $O/run.txt | head
cp /tmp/g/gpu-tests.log $O/ 2>/dev/null; grep -E "RUN|OK|FAIL|compile-ahead" /tmp/g/gpu-tests.log | head -20
