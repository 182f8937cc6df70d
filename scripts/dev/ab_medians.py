"""Median ratios of an interleaved A/B's bench CSVs (session43.sh leaves <dir>/*-<arm><round>.csv): per row, the
first arm's median [min-max] -> the second's, their ratio, the first arm's spread, and OUT where the second arm's
samples all lie outside the first's range; the geomean of the ratios last.

    python3 scripts/dev/ab_medians.py DIR off on
"""
import collections, csv, glob, statistics, sys
d, a0, a1 = sys.argv[1:4]
data = collections.defaultdict(lambda: collections.defaultdict(list))
for a in (a0, a1):
    for f in glob.glob(f"{d}/*-{a}[0-9].csv"):
        for r in csv.DictReader(open(f)):
            k = (r["impl"], r.get("D", ""), r.get("mode", ""), r["S_q"], r["causal"], r.get("H_q", ""), r.get("B", ""))
            data[a][k].append(float(r["value"]))
rs=[]
for k in sorted(data[a0]):
    b, x = data[a0][k], data[a1].get(k)
    if not x: continue
    mb, mx = statistics.median(b), statistics.median(x)
    sp = (max(b)-min(b))/mb
    rs.append(mx/mb)
    print(k, f"{mb:7.1f} [{min(b):.1f}-{max(b):.1f}] -> {mx:7.1f} [{min(x):.1f}-{max(x):.1f}]  {mx/mb:.3f}  spread {sp:.3f}", "OUT" if (max(x) < min(b) or min(x) > max(b)) else "")
import math
print("geomean", math.exp(sum(map(math.log, rs))/len(rs)), "n", len(rs))
