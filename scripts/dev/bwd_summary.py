"""Summary lines of a backward results CSV (the bench's prefill schema, impls flashkit,
flashkit_deterministic, sdpa_cudnn, sdpa_flash; modes bwd / fwd_bwd), for its notes file:
per head dim and mode, flashkit's geomean and range against each peer, and the deterministic
mode's speed over the fast one.

    python3 scripts/dev/bwd_summary.py bench/results/bwd-h100-....csv
"""
import csv
import math
import sys
from collections import defaultdict


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summarize(rows):
    v = {}
    for r in rows:
        v[(r["impl"], r["mode"], int(r["D"]), int(r["S_q"]), r["causal"])] = float(r["value"])
    lines = []
    for mode in ("bwd", "fwd_bwd"):
        for D in sorted({k[2] for k in v if k[1] == mode}):
            keys = [k for k in v if k[0] == "flashkit" and k[1] == mode and k[2] == D]
            if not keys:
                continue
            parts = []
            for peer, label in (("sdpa_cudnn", "cuDNN"), ("sdpa_flash", "FA2")):
                xs = [v[k] / v[(peer,) + k[1:]] for k in keys if (peer,) + k[1:] in v]
                if xs:
                    parts.append(f"{geo(xs):.3f}x {label} ({min(xs):.2f}-{max(xs):.2f})")
            xs = [v[("flashkit_deterministic",) + k[1:]] / v[k] for k in keys
                  if ("flashkit_deterministic",) + k[1:] in v]
            if xs:
                parts.append(f"deterministic/fast {geo(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})")
            lines.append(f"{mode:7s} D{D:<4d} " + ", ".join(parts) + f"  [{len(keys)} rows]")
    return lines


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("\n".join(summarize(list(csv.DictReader(open(path))))))
