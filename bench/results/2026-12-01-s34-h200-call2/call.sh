#!/usr/bin/env bash
# Session 34 calls 2-3: SASS of our FP8 group-128 quantizer (IEEE and UE8M0 rules) at T=1024 H=2048 and T=128 H=7168
# and of the Triton group kernel at the same shapes (sass_dump.py, run from the repository root as tmp_sass.py).
# Call 3 re-ran the python step on the warm machine and brought the .sass files back as one tarball.
O=$1
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/build-run.txt 2>&1; tail -1 $O/build-run.txt
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=/tmp/fresh-cache; mkdir -p $SL_CACHE_DIR
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
mkdir -p /tmp/s2; timeout 200 python3 tmp_sass.py /tmp/s2 > /tmp/s2.txt 2>&1; echo rc=$?
cd /tmp/s2 && rm -f *.cubin && tar czf $O/sass.tgz *.sass
