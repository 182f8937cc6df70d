"""Sampled stalls by opcode and by reason, two kernels: ncu_stall_diff.py OURS.csv PEER.csv
(`ncu -i REP --page source --csv --print-source sass` of each)."""
import csv, sys, collections
def load(f):
    rows = list(csv.reader(open(f)))
    s = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
    hdr = rows[s]; rows = rows[s+1:]
    si = hdr.index("Source"); pi = hdr.index("Warp Stall Sampling (All Samples)")
    cols = [i for i,h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
    c = collections.Counter(); r2 = collections.Counter()
    for r in rows:
        t = r[si].split()
        if not t: continue
        op = (t[1] if t[0].startswith("@") else t[0]).split(".")[0]
        c[op] += int(r[pi] or 0)
        for i in cols: r2[hdr[i]] += int(float(r[i] or 0))
    return c, r2
a, ra = load(sys.argv[1]); b, rb = load(sys.argv[2])
for op in sorted(set(a)|set(b), key=lambda o: -abs(a[o]-b[o]))[:20]:
    print(f"{op:12s} {a[op]:7d} {b[op]:7d} {a[op]-b[op]:+7d}")
print()
for k in sorted(set(ra)|set(rb), key=lambda o: -abs(ra[o]-rb[o])):
    print(f"{k:28s} {ra[k]:7d} {rb[k]:7d} {ra[k]-rb[k]:+7d}")
