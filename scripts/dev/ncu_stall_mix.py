"""Warp-state mix and executed-count classes of one kernel from an ncu source export (development aid).

    ncu -i REP --page source --csv --print-source sass > src.csv
    python3 scripts/dev/ncu_stall_mix.py src.csv [--classes 6]

Prints the sampled stall reasons summed over every SASS line (share of all samples), then the executed-instruction
count classes: the distinct per-line "Instructions Executed" values with how many lines have each, so that a loop's
per-warp mix can be read off (e.g. lines executed tiles x warps times against tiles x warps / 2 for code that only
half the warps run). Used for decode.md "The 8-bit kernels' copies, offsets and int8 bias" (2026-11-28).
"""
import argparse
import collections
import csv
import gzip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--classes", type=int, default=8, help="largest executed-count classes to print")
    a = ap.parse_args()
    opener = gzip.open if a.csv.endswith(".gz") else open
    rows = list(csv.reader(opener(a.csv, "rt")))
    start = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
    hdr, data = rows[start], rows[start + 1:]
    ix = {h: i for i, h in enumerate(hdr)}
    stall = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    tot = collections.Counter()
    counts = collections.Counter()
    for r in data:
        for h in stall:
            try:
                tot[h] += float(r[ix[h]] or 0)
            except ValueError:
                pass
        try:
            counts[int(float(r[ix["Instructions Executed"]] or 0))] += 1
        except ValueError:
            pass
    all_samples = sum(tot.values()) or 1.0
    print("stall reasons (share of samples):")
    for h, v in tot.most_common():
        if v:
            print(f"  {h[6:]:<20} {100 * v / all_samples:5.1f} %")
    print("executed-count classes (count: SASS lines):")
    for c, n in sorted(counts.items(), key=lambda kv: -kv[0])[: a.classes]:
        print(f"  {c:>12}: {n}")


if __name__ == "__main__":
    main()
