#!/usr/bin/env python3
"""Static SASS counts of the quant/dequant JIT cubins (kernels/NOTES.md "FP4 fast paths").

usage: kq_sass_count.py CACHE_DIR WARM_LOG [FILTER...]
WARM_LOG is the output of `SL_CACHE_DIR=CACHE_DIR sluice jit warm --arch 90 --module quant
--jobs 1` into an empty CACHE_DIR: with one job, the cubins' modification order is the log's
"compiled" order, which names each point's defines. For every point whose line contains all
FILTER strings it prints the instructions of the kernel (without NOPs, all paths) and the hot
path per warp item (one 16-byte packet per lane: 16 bytes of 16-bit input for quant, of 16-bit
output for dequant): the loop walked once with the slow paths (IEEE-division calls) skipped and
the common branches assumed (finite, nonzero blocks; see hot()), the task loop's overhead spread
over its chunks (SEG > 0, when SEG divides the row's chunks). An estimate from static code:
compare old vs new. Needs nvdisasm (NVDISASM, else on PATH)."""
import os, re, struct, subprocess, sys

def elf_of(path):
    d = open(path, 'rb').read()
    return d[d.index(b'\x7fELF'):]

def sass(path, entry):
    """Instructions (address, text) of function `entry` (a cubin holds every kernel of the
    source) and its label -> address map."""
    tmp = '/tmp/kq_sass_%d.cubin' % os.getpid()
    open(tmp, 'wb').write(elf_of(path))
    nvd = os.environ.get('NVDISASM', 'nvdisasm')
    out = subprocess.run([nvd, '-c', tmp], capture_output=True, text=True, check=True).stdout
    os.unlink(tmp)
    ins, labels, cur, pending = [], {}, None, []
    for line in out.splitlines():
        m = re.match(r'\s*\.section\s+\.text\.(\w+)', line)
        if m:
            cur = m.group(1)
            continue
        if cur != entry:
            continue
        m = re.match(r'(\.L_x_\d+):', line)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', line)
        if m:
            a = int(m.group(1), 16)
            for l in pending:
                labels[l] = a
            pending = []
            ins.append((a, m.group(2)))
    return ins, labels

def hot(ins, labels, lo, hi):
    """Instructions on the hot path through [lo, hi] (addresses) walked once. A forward
    conditional branch is taken when it skips a slow path: the instruction before it is
    predicated on the same predicate (the compiler's "@P0 <fast op>; @P0 BRA past the slow
    code" pattern: the fast block-scale division, the fast E8M0 exponent), or it skips at most 8
    instructions holding a CALL (an IEEE division's slow call). Unconditional forward branches
    are taken; BRA.DIV (divergence fallback), backward branches and every other conditional
    branch (NaN / zero blocks, ragged tails, the loop's exits) fall through. NOPs are not
    counted; BSSY / BSYNC and uniform-datapath instructions are."""
    idx = {a: i for i, (a, t) in enumerate(ins)}
    i, n = idx[lo], 0
    while i < len(ins) and ins[i][0] <= hi:
        a, t = ins[i]
        if not re.match(r'(@!?U?P\w+\s+)?NOP\b', t):
            n += 1
        m = re.match(r'(@!?P\d\s+)?BRA\s.*?(\.L_x_\d+)', t)
        if m and m.group(2) in labels and labels[m.group(2)] > a:
            tgt = labels[m.group(2)]
            pred = (m.group(1) or '').strip()
            skipped = [u for b, u in ins[i + 1:idx[tgt]]]
            slow = pred and (ins[i - 1][1].startswith(pred + ' ') or
                             (len(skipped) <= 8 and any('CALL' in u for u in skipped)))
            if not pred or slow:
                if tgt > hi:
                    break
                i = idx[tgt]
                continue
        i += 1
    return n

def counts(ins, labels, unroll, segc):
    """(all, per item on the hot path): the item loop (SEG=0) or the task loop with the chunk
    loop inside it (SEG > 0; the inner loop's trips are segc / unroll, or one when unrolled)."""
    real = [(a, t) for a, t in ins if not re.match(r'(@!?U?P\w+\s+)?NOP\b', t)]
    loops = []
    for a, t in ins:
        m = re.search(r'\bBRA\b.*?\(?(\.L_x_\d+)', t)
        if m and m.group(1) in labels and labels[m.group(1)] < a:
            lo = labels[m.group(1)]
            if any(lo <= b <= a and 'LDG' in u for b, u in ins):
                loops.append((lo, a))
    if not loops:
        return len(real), float('nan')
    outer = max(loops, key=lambda l: l[1] - l[0])
    inner = min(loops, key=lambda l: l[1] - l[0])
    h_out = hot(ins, labels, *outer)
    if segc == 0:
        return len(real), h_out / unroll
    if inner == outer:
        return len(real), h_out / segc
    h_in = hot(ins, labels, *inner)
    return len(real), (h_out - h_in) / segc + h_in / unroll

def main():
    cache, log = sys.argv[1], sys.argv[2]
    filt = sys.argv[3:]
    points = [l.split('compiled', 1)[1].strip() for l in open(log) if l.strip().startswith('compiled')]
    files = sorted((os.path.join(cache, f) for f in os.listdir(cache) if f.endswith('.cubin')), key=os.path.getmtime)
    if len(files) != len(points):
        sys.exit('%d cubins but %d compiled points: warm into an empty cache with --jobs 1' % (len(files), len(points)))
    for p, f in zip(points, files):
        entry = p.split('[')[0]
        if not os.path.basename(f).startswith(entry + '-'):
            sys.exit('order mismatch: %s vs %s' % (p, f))
        if not all(s in p for s in filt):
            continue
        d = dict(kv.split('=') for kv in p[p.index('[') + 1:-1].split())
        seg, unroll = int(d['SEG']), int(d['UNROLL'])
        vec = 4 if d['DTYPE'] == '2' else 8
        chunks = -(-int(d['HIDDEN']) // (32 * vec))
        segc = 0 if seg == 0 else min(seg, chunks)
        tot, per = counts(*sass(f, entry), unroll, segc)
        print('%-100s total %5d hot/item %6.1f' % (p, tot, per))

main()
