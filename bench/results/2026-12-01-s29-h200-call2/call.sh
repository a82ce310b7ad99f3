#!/usr/bin/env bash
# Session 29 call 2: the FP8-out kernels' small prefill launch (kq_launch.h q8_small: 4 warps, one item per warp, the
# item layout, 16 blocks per SM, from SMs rows below 256 items per SM, GELU 192). gpu_test_act and gpu_test_quant
# (new: test_act_q8_small, test_q8_small); `sluice bench kernels --only _fp8` at T <= 1024 and 8192; then
# bench/torch_peers.py at T=1024 for those ops (ours through the FFI, in a CUDA graph next to the Triton group kernel).
O=$1; export OUT=/tmp/g; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
for t in act quant; do
  stdbuf -oL timeout 200 build-gpu/tests/gpu_test_$t > $W/gpu_test_$t.txt 2>&1; echo "test $t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR|want" $W/gpu_test_$t.txt | tail -4
done
el
timeout 100 build-gpu/sluice bench kernels --only _fp8 --tokens 1,16,128,1024,8192 --json $W/bench-kernels.json \
  > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"; el
grep -E "^(act_silu_fp8|act_gelu_fp8|quant_fp8) +T=(1024|8192) " $W/bench-kernels.txt | grep -v "expf\|tanhf"
timeout 150 python3 bench/torch_peers.py --budget-s 110 --tokens 1024 --ops 'quant_fp8*,act_silu_fp8,act_gelu_fp8' \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
sed -n '/^same harness, in a CUDA graph/,/^shapes where a peer is faster in a graph/p' $W/peers.txt
grep -v Warn $W/peers.err | tail -3
