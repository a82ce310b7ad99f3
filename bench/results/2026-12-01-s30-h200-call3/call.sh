#!/usr/bin/env bash
# Session 30 call 3: the FP8 group-128 quantizer against Triton's group kernel in two forms -- triton-grp (codes by
# the product with 448 / absmax, as vLLM/SGLang) and triton-ieee (the same kernel by correctly rounded divisions,
# the rule, checked bit for bit against ours) -- at T = 1..8192, graph times by bench/graph_time.py.
O=$1; export OUT=/tmp/g; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
timeout 60 build-gpu/sluice bench kernels --only quant_fp8 --tokens 1,16,128,1024,8192 --json $W/bench-kernels.json \
  > $W/bench-kernels.txt 2>&1; echo "bench rc=$?"; el
timeout 300 python3 bench/torch_peers.py --ops quant_fp8_g128 --tokens 1,16,128,1024,8192 --budget-s 260 \
  --ours $W/bench-kernels.json --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; grep -v -i warn $W/peers.err | tail -3; el
grep -E "^# |triton|sluice" $W/peers.txt | grep -E "^# |graph_us|kern_us" | cut -c1-160
