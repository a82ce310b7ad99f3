"""Time per call of a function replayed in a CUDA graph, with the same graph for every candidate: CALLS calls
captured back to back, REPLAYS replays enqueued back to back with an event between each two (so the host is ahead
and the events see device time), the median replay / CALLS. As `sluice bench kernels`' graph_us (a graph of a fixed
number of repetitions).

Why not triton.testing.do_bench_cudagraph: it sizes its graph from a host-timed estimate of eager calls (rep = 20 ms
/ estimate), so each candidate's graph size follows its host time per call, and the time per call moves with the
size of the graph (session 30, call 2, bench/probes/graph_nodes.py: our SiLU T=1 I=2048 at 20 / 100 / 500 / 3000
calls per graph 1.26 / 1.18 / 1.16 / 1.15 us). In a warm run the two methods agree (call 2: bench/torch_peers.py's
399 graph rows at T <= 1024, median ratio 1.000, all within -4 / +6 %); right after a candidate's first call (the
probe) do_bench_cudagraph read up to 0.47 us above the fixed graph timed next (torch.compile's SiLU T=1 I=7168: 1.68
vs 1.21 us)."""
import statistics

import torch

CALLS = 100
REPLAYS = 20


def graph_us(fn, calls=CALLS, replays=REPLAYS):
    """Median device time per call of fn (us) in a CUDA graph of `calls` calls; raises where fn cannot be
    captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (JIT, autotuning, allocator) outside the capture
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    ev[0].record()
    for i in range(replays):
        g.replay()
        ev[i + 1].record()
    torch.cuda.synchronize()
    per_call = [ev[i].elapsed_time(ev[i + 1]) * 1e3 / calls for i in range(replays)]
    del g
    return statistics.median(per_call)
