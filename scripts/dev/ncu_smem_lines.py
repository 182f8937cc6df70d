"""Shared-memory wavefronts by SASS line and by opcode from `ncu --page source --csv
--print-source sass` (a development tool): where the excessive (bank-conflicted) wavefronts
are, and how the total splits between wgmma operand reads and the rest.

    python3 scripts/dev/ncu_smem_lines.py src.csv
"""
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
hdr = [h.strip() for h in rows[start]]
c = {h: i for i, h in enumerate(hdr)}


def f(r, n):
    try:
        return float((r[c[n]] or "0").replace(",", ""))
    except (KeyError, ValueError, IndexError):
        return 0.0


L = rows[start + 1:]
W, I, X = "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "L1 Wavefronts Shared Excessive"
print(f"shared wavefronts {sum(f(r, W) for r in L) / 1e6:.1f} M, ideal {sum(f(r, I) for r in L) / 1e6:.1f} M, "
      f"excessive {sum(f(r, X) for r in L) / 1e6:.1f} M")
agg = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
for r in L:
    w = f(r, W)
    if w == 0:
        continue
    src = r[c["Source"]].split()
    op = src[1] if src[0].startswith("@") else src[0]
    a = agg[op]
    a[0] += w
    a[1] += f(r, I)
    a[2] += f(r, "Instructions Executed")
print("by opcode (wavefronts, ideal, instructions):")
for k, v in sorted(agg.items(), key=lambda x: -x[1][0]):
    print(f"  {k:44s} {v[0] / 1e6:9.2f}M {v[1] / 1e6:9.2f}M {v[2] / 1e6:8.2f}M")
print("lines with excessive wavefronts:")
for r in sorted(L, key=lambda r: -f(r, X)):
    if f(r, X) <= 0:
        break
    print(f"  {r[c['Address']][-6:]} {r[c['Source']][:80]:80s} wf {f(r, W) / 1e6:.2f}M ideal {f(r, I) / 1e6:.2f}M")
