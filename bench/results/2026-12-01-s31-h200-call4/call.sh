#!/usr/bin/env bash
# Session 31 call 4: the one-item (decode) 16-bit activation with 8- and 4-byte lanes (kernels/act.cu PACK; Hopper
# table act16_pack 8, not measured before this call): gpu_test_act whole (test_act_pack forces 16/8/4); the bench's
# act rows at T=1/16 with the other widths ("p16"/"p4"); peer_sweep --graph over SiLU's launches and widths at
# T=1/16; torch_peers' act_*_bf16 rows at T <= 128 against torch.compile.
O=$1; export OUT=/tmp/g; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "t=$(( $(date +%s) - t0 ))"; tar -czf $O/all.tgz -C $W .; }
tests/gpu/run --no-bench --tests 'gpu_test_device$' > $W/run.txt 2>&1; tail -1 $W/run.txt
lib=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread SL_CACHE_DIR=$PWD/build-gpu/jit-cache NCCL_NVLS_ENABLE=0 SL_NVLS=0
el
stdbuf -oL timeout 240 build-gpu/tests/gpu_test_act > $W/gpu_test_act.txt 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|ERROR" $W/gpu_test_act.txt | tail -5; el
timeout 90 build-gpu/sluice bench kernels --only act_ --tokens 1,16 --json $W/bench-act.json > $W/bench-act.txt 2>&1
echo "bench rc=$?"; el
timeout 100 python3 bench/probes/peer_sweep.py --lib build-gpu/libsluice_peer_ffi.so --graph --rounds 3 --top 6 \
  --ops silu --tokens 1,16 --hidden 2048,4096,7168 --budget-s 85 > $W/sweep-silu.txt 2>&1
echo "sweep rc=$?"; el
timeout 90 python3 bench/torch_peers.py --tokens 1,16,128 --ops 'act_*_bf16' --budget-s 75 \
  --json $W/peers.json --ours-lib build-gpu/libsluice_peer_ffi.so > $W/peers.txt 2> $W/peers.err
echo "peers rc=$?"; el
grep -E "^act_(silu|gelu)_bf16" $W/bench-act.txt | cut -c1-130
grep -E "^==|^ +[0-9]" $W/sweep-silu.txt | grep -E "==|table|ours" | cut -c1-110
sed -n '/^same harness, in a CUDA graph/,$p' $W/peers.txt | head -24
