#!/usr/bin/env bash
# Session 32 call 9: does one of our JIT cubins alone, launched 50 times in a fresh process, slow a tiny kernel's graph
# nodes afterwards (calls 3-8)? The FP8-out SiLU at T=128 (the bench's trigger), at T=16 and the bf16 one at T=128.
O=$1
nvcc -O3 -arch=sm_90 -I bench/probes bench/probes/graph_gap.cu -o /tmp/graph_gap -lcuda > $O/nvcc.txt 2>&1 || { cat $O/nvcc.txt; exit 1; }
for v in "silu_fp8_T128 128 256 128" "silu_fp8_T16 16 128 32" "silu_bf16_T128 128 256 128" "silu_fp8_T128 128 256 128"; do
  set -- $v
  /tmp/graph_gap probe_cubins/$1.cubin $2 $3 $4 2>&1 | grep -E "fresh, again|after|again" | tee -a $O/graph_gap-cubins.txt
done
