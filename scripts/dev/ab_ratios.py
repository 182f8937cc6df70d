"""Ratios of a define / env A/B's bench CSVs (bwd_define_ab.sh, fwd_define_ab.sh leave
<dir>/*-<arm><round>.csv): for each arm after the first, every row's best-of-rounds value over the
first arm's, and the geomean / range per impl.

    python3 scripts/dev/ab_ratios.py DIR base lock dqf
"""
import collections
import csv
import glob
import math
import sys


def main(d, arms):
    data = collections.defaultdict(lambda: collections.defaultdict(list))
    for a in arms:
        for f in glob.glob(f"{d}/*-{a}[0-9].csv"):
            for r in csv.DictReader(open(f)):
                k = (r["impl"], r.get("D", ""), r.get("mode", ""), r["S_q"], r["causal"])
                data[a][k].append(float(r["value"]))
    base = arms[0]
    for a in arms[1:]:
        by_impl = collections.defaultdict(list)
        for k, v in sorted(data[base].items()):
            if k not in data[a]:
                continue
            b, x = max(v), max(data[a][k])
            by_impl[k[0]].append(x / b)
            print(a, k, f"{b:.1f} -> {x:.1f}  {x / b:.3f}")
        for i, xs in by_impl.items():
            g = math.exp(sum(map(math.log, xs)) / len(xs))
            print("GEOMEAN", a, i, f"{g:.4f}", f"min {min(xs):.3f} max {max(xs):.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
