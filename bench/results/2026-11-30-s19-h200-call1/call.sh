#!/usr/bin/env bash
# session 19 call 1: the decode kernel's L2 hints (SL_BENCH_DECODE_L2; code in call7/splitk-l2h.patch, not in the
# tree), the RMSNorm/SiLU tune at T >= 8192, peers there. Sent as `bash tmp_call.sh $OUT` with carry [".deps"].
O=$1; export OUT=/tmp/g; W=/tmp/o; mkdir -p $W
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
B=build-gpu/sluice
for r in 1 2; do for m in 0 1 2 3 5; do
  SL_BENCH_DECODE_L2=$m timeout 60 $B bench moe-local --only moe_layer --tokens 1 > $W/l2-$m-$r.txt 2>&1
done; done
timeout 150 $B bench kernels --tune --only rmsnorm --tokens 8192,32768 --hidden 2048,4096 > $W/tune-rms.txt 2>&1
timeout 150 $B bench kernels --tune --only act_silu_bf16 --tokens 8192,32768 --hidden 2048,4096 > $W/tune-act.txt 2>&1
timeout 200 python3 bench/torch_peers.py --budget-s 150 --tokens 8192,32768 --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2>&1
cp $W/*.txt $O/   # only the first 8 files came back (the device tool's file-count limit): the l2-*.txt
