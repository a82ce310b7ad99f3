#!/usr/bin/env bash
# session 23 call 3: the scatter probe again with the rows' strides fixed (call 2's rows overlapped: half-size strides).
O=$1; export OUT=/tmp/g; W=$O; mkdir -p $W
(cd bench/probes && nvcc -O3 -arch=sm_90 scatter_bw.cu -o /tmp/scatter_bw) && timeout 200 /tmp/scatter_bw > $W/probe.txt 2>&1
echo probe rc=$?; cat $W/probe.txt
