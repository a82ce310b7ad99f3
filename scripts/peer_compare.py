#!/usr/bin/env python3
"""Ours vs the fastest PyTorch/Triton peer, from two JSON-lines files:
  scripts/peer_compare.py bench-kernels.json torch-peers.json
(ours: `sluice bench kernels --json`; peers: `bench/torch_peers.py --json`, same GPU model).
Ratio = peer time / our time (> 1: we are faster). Our plain-launch time is used, and our
graph time where the peer's is below it at small T (do_bench queues the launch behind an L2
flush, so a peer's small-T time carries no launch gap; our plain one does)."""
import json
import sys

ours, peers = {}, {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if not o.get("ceiling"):
        ours.setdefault((o["op"], o["shape"]), o)
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r.get("peer") == "sluice":  # ours through the peer FFI (torch_peers.py --ours-lib), not a peer
        continue
    k = (r["op"], r["shape"])
    if k not in peers or r["us"] < peers[k]["us"]:
        peers[k] = r
slower = 0
print(f"{'op':<16} {'shape':<22} {'ours us':>9} {'(graph)':>8}  {'fastest peer':<11} {'us':>9}  ratio")
for k, r in peers.items():
    o = ours.get(k)
    if not o:
        continue
    us = o["us"]
    g = o.get("graph_us")
    if g is not None and g < us:
        us = g
    ratio = r["us"] / us
    slower += ratio < 1
    gs = f"{g:8.2f}" if g is not None else "       -"
    print(f"{k[0]:<16} {k[1]:<22} {o['us']:9.2f} {gs}  {r['peer']:<11} {r['us']:9.2f}  {ratio:5.2f}")
print(f"shapes where a peer is faster: {slower}")
