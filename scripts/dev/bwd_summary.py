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


# Issue 9's bars: bwd >= 1.05x cuDNN at D 64/128 and >= 1.2x at D 256 (every row); the
# deterministic mode >= 0.8x the fast one.
BARS = {64: 1.05, 128: 1.05, 256: 1.2}


def bar_checks(rows):
    """(passed, total, failing rows as text) over issue 9's per-row checks in `rows`."""
    v = {(r["impl"], r["mode"], int(r["D"]), int(r["S_q"]), r["causal"]): float(r["value"]) for r in rows}
    passed, total, fails = 0, 0, []
    for k, x in sorted(v.items()):
        impl, mode, D = k[0], k[1], k[2]
        if impl != "flashkit" or mode != "bwd" or D not in BARS:
            continue
        for peer, want, label in (("sdpa_cudnn", BARS[D], "cuDNN"), ("flashkit_deterministic", 0.8, "det/fast")):
            other = v.get((peer,) + k[1:])
            if other is None:
                continue
            ratio = x / other if peer == "sdpa_cudnn" else other / x
            total += 1
            if ratio >= want:
                passed += 1
            else:
                fails.append(f"D{D} S{k[3]} causal={k[4]}: {label} {ratio:.2f} < {want}")
    return passed, total, fails


if __name__ == "__main__":
    for path in sys.argv[1:]:
        rows = list(csv.DictReader(open(path)))
        print("\n".join(summarize(rows)))
        ok, n, _ = bar_checks(rows)
        print(f"issue 9 bar checks (bwd rows): {ok} of {n} pass")
