#!/usr/bin/env bash
# Session 27 call 3: the staged swizzled scales without a block barrier per group (quant.cu SWZ_SPLIT: named
# FULL / EMPTY barriers per image; MXFP8 and MXFP4's half-block lane; split.patch here against the final code) and
# MXFP4's half-block lane as the Hopper default (kq_launch.h mx_half, staged): the whole gpu_test_quant, then
# `bench kernels --only quant_mx` with SWZ_SPLIT 1 (the default), 0 (device-only patch of quant.cu's default), and 1.
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 300 build-gpu/tests/gpu_test_quant > $W/gpu_test_quant.txt 2>&1; echo "test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|OK \]" $W/gpu_test_quant.txt | tail -14; el
b() { timeout 100 build-gpu/sluice bench kernels --only quant_mx --tokens 8192,32768 > $W/$1.txt 2>&1; echo "$1 rc=$?"; }
b split1a
sed -i 's/^#define SWZ_SPLIT 1$/#define SWZ_SPLIT 0/' kernels/quant.cu; grep -n "^#define SWZ_SPLIT" kernels/quant.cu
cmake --build build-gpu -j16 --target sluice > $W/rebuild.txt 2>&1; echo "rebuild rc=$?"
b split0
sed -i 's/^#define SWZ_SPLIT 0$/#define SWZ_SPLIT 1/' kernels/quant.cu
cmake --build build-gpu -j16 --target sluice > $W/rebuild2.txt 2>&1; echo "rebuild rc=$?"
b split1b
el
for f in split1a split0 split1b; do echo "== $f"; grep -E "T=(8192|32768) H=(2048|4096) .*w8 +[0-9]" $W/$f.txt | cut -c1-130; done
