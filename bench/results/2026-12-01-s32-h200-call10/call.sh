#!/usr/bin/env bash
# Session 32 call 10: call 9 again with our GELU bf16 T=1 JIT kernel as the timed graph's victim (the bench's victim),
# after the FP8-out SiLU T=128 cubin (the bench's trigger) and, as the control, its T=16 cubin.
O=$1
nvcc -O3 -arch=sm_90 -I bench/probes bench/probes/graph_gap.cu -o /tmp/graph_gap -lcuda > $O/nvcc.txt 2>&1 || { cat $O/nvcc.txt; exit 1; }
V="probe_cubins/gelu_bf16_T1.cubin 1 16 32"
for v in "silu_fp8_T128 128 256 128" "silu_fp8_T16 16 128 32" "silu_fp8_T128 128 256 128"; do
  set -- $v
  /tmp/graph_gap probe_cubins/$1.cubin $2 $3 $4 $V 2>&1 | grep -E "victim|after|again" | tee -a $O/graph_gap-victim.txt
done
