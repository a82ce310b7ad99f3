#!/usr/bin/env python3
"""Short table of benchmark results: reads the JSON lines `sluice bench ... --json` wrote."""
import glob
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
for path in sorted(glob.glob(os.path.join(out, "bench-*.json"))):
    rows = []
    ceiling = {}
    with open(path) as f:
        for line in f:
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if o.get("ceiling"):
                ceiling = o
            else:
                rows.append(o)
    name = os.path.basename(path)[6:-5]
    print(f"{name}: copy {ceiling.get('copy_gbps', 0):.0f} GB/s, launch {ceiling.get('launch_us', 0):.2f} us, "
          f"graph {ceiling.get('graph_launch_us', 0):.2f} us; {len(rows)} rows")
    for o in rows:
        g = o.get("graph_us")
        g = f"{g:.2f}" if g is not None else "-"
        k = o.get("kernel_us")
        k = f"  kern {k:.2f}" if k is not None else ""
        at = o.get("pct_copy_same_size")
        at = f"{at:5.1f}%" if at is not None else "     -"
        # by kernel time: % of the copy bandwidth, and of a same-size copy's own kernel time
        kc = ""
        if o.get("kernel_us") and ceiling.get("copy_gbps") and o.get("bytes", 0) >= 16e6:
            kc = f" ({100 * o['bytes'] / o['kernel_us'] / 1e3 / ceiling['copy_gbps']:.1f}%"
            ks = o.get("pct_copy_same_size_kern")
            kc += f", @sz {ks:.1f}%)" if ks is not None else ")"
        print(f"  {o['op']:<22} {o['shape']:<24} {o.get('path', ''):<10} {o['us']:9.2f} us "
              f"{o['pct_copy']:6.1f}% @sz {at}  graph {g:>6}{k}{kc}  {o.get('extra', '')}")
