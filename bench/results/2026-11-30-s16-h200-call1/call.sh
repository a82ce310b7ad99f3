O=$1; W=/tmp/o; mkdir -p $W
nvcc -O3 -arch=sm_90 -I. bench/probes/tail_bw.cu -o $W/tail_bw && $W/tail_bw > $W/tail_bw.txt 2>&1
cp $W/tail_bw.txt $O/
