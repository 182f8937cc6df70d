"""Executed instructions by opcode, two kernels: ncu_opcode_diff.py OURS.csv PEER.csv
(`ncu -i REP --page source --csv --print-source sass` of each)."""
import csv, sys, collections
def load(f):
    rows = list(csv.reader(open(f)))
    s = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
    hdr = rows[s]; rows = rows[s+1:]
    si = hdr.index("Source"); ei = hdr.index("Instructions Executed")
    c = collections.Counter(); tot = 0
    for r in rows:
        try: n = int(r[ei] or 0)
        except: continue
        t = r[si].split()
        if not t: continue
        op = t[1] if t[0].startswith("@") else t[0]
        op = op.split(".")[0]
        c[op] += n; tot += n
    return c, tot
a, ta = load(sys.argv[1]); b, tb = load(sys.argv[2])
print("total", ta, tb, ta - tb)
for op in sorted(set(a) | set(b), key=lambda o: -(a[o] - b[o])):
    if abs(a[op] - b[op]) > 0.003 * tb or a[op] > 0.02 * ta:
        print(f"{op:12s} {a[op]:12d} {b[op]:12d} {a[op]-b[op]:+12d}")
