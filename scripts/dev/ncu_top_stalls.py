"""Top SASS instructions by sampled stalls from `ncu -i REP --page source --csv --print-source sass`."""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
rows = rows[start:]
hdr = rows[0]
def col(name):
    for i, h in enumerate(hdr):
        if h.strip() == name:
            return i
    return None
src_i = col("Source")
samp_i = col("Warp Stall Sampling (All Samples)")
addr_i = col("Address")
if samp_i is None:
    print("columns:", hdr[:40]); sys.exit(0)
stall_cols = [(i, h) for i, h in enumerate(hdr) if h.startswith("stall_") or "Stall" in h]
items = []
total = 0
for r in rows[1:]:
    try:
        v = float(r[samp_i] or 0)
    except ValueError:
        continue
    total += v
    items.append((v, r[addr_i] if addr_i is not None else "", r[src_i]))
order = list(items)
items.sort(reverse=True)
print("total samples", total)
top = set(a for v, a, s in items[:40])
# print the top instructions in program order with their neighbours' context
for v, a, s in order:
    if a in top:
        print(f"{v:8.0f} {100*v/max(total,1):5.1f}% {a} {s[:100]}")
# samples by opcode
byop = collections.Counter()
for v, a, s in order:
    op = s.split()[0] if s.split() else "?"
    if op.startswith("@"):
        op = s.split()[1] if len(s.split()) > 1 else op
    byop[op.split(".")[0]] += v
print("by opcode:", ", ".join(f"{k} {100*v/max(total,1):.1f}%" for k, v in byop.most_common(15)))
