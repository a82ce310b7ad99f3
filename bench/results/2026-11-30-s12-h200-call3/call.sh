#!/usr/bin/env bash
# session 12 call 3: benchmarks after the RMSNorm one-row kernel reached the full-grid prefill entries, QK-norm's
# st.cs + rsqrt entry and SiLU's ex2: our rows at every T (with the "loop" comparison rows), the peers at T <= 1024
O=$1; export OUT=/tmp/g
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $O/run.txt 2>&1; tail -1 $O/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu; export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache
export NCCL_NVLS_ENABLE=0 SL_NVLS=0
timeout 150 build-gpu/sluice bench kernels --only rmsnorm --tokens 1,16,128,1024,8192,32768 --json $O/rms.json > $O/rms.txt 2>&1; echo rms rc=$?
timeout 90 build-gpu/sluice bench kernels --only qknorm --tokens 1024,4096,8192,32768 > $O/qk.txt 2>&1; echo qk rc=$?
timeout 90 build-gpu/sluice bench kernels --only act_silu_bf16 --tokens 1,16,128,1024,8192,32768 > $O/act.txt 2>&1; echo act rc=$?
timeout 200 python3 bench/torch_peers.py --budget-s 150 --tokens 1,16,128,1024,8192 --ours-lib build-gpu/libsluice_peer_ffi.so --json $O/peers.json > $O/peers.txt 2>&1; echo peers rc=$?
grep -E "^rmsnorm" $O/rms.txt | grep -E "T=(1024|8192|32768) " | cut -c1-140
grep -E "^qknorm " $O/qk.txt | cut -c1-140
grep -E "^act_silu_bf16" $O/act.txt | cut -c1-140
sed -n '/^same harness: ours/,$p' $O/peers.txt | cut -c1-120
