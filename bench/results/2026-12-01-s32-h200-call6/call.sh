#!/usr/bin/env bash
# Session 32 call 6: bench/probes/graph_gap.cu -- which per-context state change makes a small kernel's graph node
# slower for the rest of the process (calls 3-5).
O=$1
nvcc -O3 -arch=sm_90 -I bench/probes bench/probes/graph_gap.cu -o /tmp/graph_gap > $O/nvcc.txt 2>&1 || { cat $O/nvcc.txt; exit 1; }
/tmp/graph_gap | tee $O/graph_gap.txt
/tmp/graph_gap > $O/graph_gap-2.txt; cat $O/graph_gap-2.txt
