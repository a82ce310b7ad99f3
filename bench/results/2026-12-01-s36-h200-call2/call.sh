#!/usr/bin/env bash
# Session 36 call 2 (the code of c26909c): (1) our FP8 group quantizer and SiLU->FP8 launches at T=128 H=4096 in
# the peers' graph harness (peer_sweep --graph: the decode warps rule was measured at H=2048 and 7168, not 4096,
# where triton-grp leads 0.95); (2) the FP4 table dequantizer's 16-byte output stores with the streaming hint
# (st.global.cs, __stcs) against the plain stores, T=8192/32768 H=4096 (A, A, B, B; kernel and event us).
O=$1; export OUT=/tmp/run36; mkdir -p $OUT; W=/tmp/w36; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 )) $*"; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/build-run.txt 2>&1; tail -1 $W/build-run.txt; el built
export NCCL_NVLS_ENABLE=0 SL_NVLS=0 SL_CACHE_DIR=$PWD/build-gpu/jit-cache
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread
timeout 200 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 16 \
  --ops fp8q,silu8 --tokens 128 --hidden 4096 --budget-s 180 > $O/sweep.txt 2>&1; echo "sweep rc=$?"; el sweep
B="build-gpu/sluice bench kernels --only dequant_nvfp4 --tokens 8192,32768 --hidden 2048,4096"
for r in A1 A2; do timeout 120 $B > $W/deq-$r.txt 2>&1; echo "$r rc=$?"; done; el A
sed -i 's|\*reinterpret_cast<uint4 \*>(op + u \* CHUNK \* ebytes) = decode16_table((unsigned)cw\[u\], tab\[su\[u\]\]);|__stcs(reinterpret_cast<uint4 *>(op + u * CHUNK * ebytes), decode16_table((unsigned)cw[u], tab[su[u]]));|' kernels/quant.cu
grep -n "__stcs(reinterpret_cast<uint4" kernels/quant.cu || echo "PATCH FAILED"
cmake --build build-gpu -j 16 > $W/rebuild.txt 2>&1; echo "rebuild rc=$?"; el rebuilt
for r in B1 B2; do timeout 120 $B > $W/deq-$r.txt 2>&1; echo "$r rc=$?"; done; el B
git checkout kernels/quant.cu
for r in A1 A2 B1 B2; do echo "== $r"; grep -E "^ *dequant_nvfp4" $W/deq-$r.txt | cut -c1-150; done > $O/deq.txt
head -3 $W/deq-A1.txt >> $O/deq.txt; cp $W/build-run.txt $O/
cat $O/deq.txt; grep -E "^==|^ +[0-9]|^#" $O/sweep.txt | cut -c1-130 | head -60
