"""Two kernels' ncu source counters side by side, by opcode: executed instructions, sampled stalls,
and the stall samples by reason. Input: `ncu -i REP --page source --csv --print-source sass` of each.
    python3 scripts/dev/ncu_source_diff.py OURS.csv PEER.csv
(docs/kernels/mla.md, "One box per chunk at compile time")."""
import collections
import csv
import sys


def load(path):
    rows = list(csv.reader(open(path)))
    start = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
    hdr, rows = rows[start], rows[start + 1:]
    src, execd = hdr.index("Source"), hdr.index("Instructions Executed")
    samp = hdr.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    inst, stalls, by_reason = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        t = r[src].split()
        if not t:
            continue
        op = (t[1] if t[0].startswith("@") else t[0]).split(".")[0]
        try:
            inst[op] += int(r[execd] or 0)
        except ValueError:
            pass
        stalls[op] += int(float(r[samp] or 0))
        for i in reasons:
            by_reason[hdr[i]] += int(float(r[i] or 0))
    return inst, stalls, by_reason


def table(title, a, b, keep):
    print(f"== {title}: total {sum(a.values())} / {sum(b.values())}")
    for k in sorted(set(a) | set(b), key=lambda k: -abs(a[k] - b[k])):
        if keep(a[k], b[k]):
            print(f"{k:28s} {a[k]:12d} {b[k]:12d} {a[k] - b[k]:+12d}")


ia, sa, ra = load(sys.argv[1])
ib, sb, rb = load(sys.argv[2])
tb = sum(ib.values())
table("executed instructions by opcode", ia, ib, lambda x, y: abs(x - y) > 0.003 * tb or x > 0.02 * sum(ia.values()))
table("stall samples by opcode", sa, sb, lambda x, y: abs(x - y) > 300)
table("stall samples by reason", ra, rb, lambda x, y: True)
