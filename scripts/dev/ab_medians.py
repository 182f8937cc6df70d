"""Median ratios of an interleaved A/B's bench CSVs (session43.sh leaves <dir>/*-<arm><round>.csv): per row, the
first arm's median [min-max] -> the second's, their ratio, the first arm's spread, and OUT where the second arm's
samples all lie outside the first's range; the geomean of the ratios last. Rows are keyed by impl, dtype, D, mode, B,
H_q, H_kv, S_q, S_k, causal, page_size and unit (a "us" row's ratio above 1 is slower; decode CSVs hold both units).

    python3 scripts/dev/ab_medians.py DIR off on
"""
import collections, csv, glob, statistics, sys
d, a0, a1 = sys.argv[1:4]
data = collections.defaultdict(lambda: collections.defaultdict(list))
for a in (a0, a1):
    for f in glob.glob(f"{d}/*-{a}[0-9].csv"):
        for r in csv.DictReader(open(f)):
            k = tuple(r.get(c, "") for c in ("impl", "dtype", "D", "mode", "B", "H_q", "H_kv", "S_q", "S_k", "causal",
                                                 "page_size", "unit"))
            data[a][k].append(float(r["value"]))
rs=[]
for k in sorted(data[a0]):
    b, x = data[a0][k], data[a1].get(k)
    if not x: continue
    mb, mx = statistics.median(b), statistics.median(x)
    sp = (max(b)-min(b))/mb
    rs.append((k[-1], mx/mb))
    print(k, f"{mb:7.1f} [{min(b):.1f}-{max(b):.1f}] -> {mx:7.1f} [{min(x):.1f}-{max(x):.1f}]  {mx/mb:.3f}  spread {sp:.3f}", "OUT" if (max(x) < min(b) or min(x) > max(b)) else "")
import math
for unit in sorted({u for u, _ in rs}):
    v = [x for u, x in rs if u == unit]
    print("geomean", unit or "-", math.exp(sum(map(math.log, v))/len(v)), "n", len(v))
