#!/usr/bin/env python3
"""Table of decode_min_chunk.sh's CSVs: graph us per (cache, config) for each min-chunk value
(best of the rounds), and the 8-bit caches' speed over bf16's with each side at the same value
and at its own best value (issue 10's ratio).

    python3 scripts/dev/decode_min_chunk_table.py DIR 256 512 1024 2048
"""
import csv
import glob
import sys


def main(d, values):
    t = {}  # (value, dtype, B, S, hq, hkv) -> best us
    for v in values:
        for f in glob.glob(f"{d}/mc{v}-[0-9].csv"):
            for r in csv.DictReader(open(f)):
                if r["unit"] != "us":
                    continue
                k = (v, r["dtype"], r["B"], r["S_k"], r["H_q"], r["H_kv"])
                t[k] = min(t.get(k, 1e30), float(r["value"]))
    cfgs = sorted({k[2:] for k in t}, key=lambda c: (int(c[0]), int(c[1]), int(c[2])))
    dts = ["bf16", "int8", "fp8_e4m3"]
    print("graph us, best of rounds; columns: min chunk " + " / ".join(values))
    for c in cfgs:
        for dt in dts:
            vals = [t.get((v, dt) + c) for v in values]
            print(f"{dt:>8} B={c[0]:<3} S={c[1]:<6} {c[2]}/{c[3]:<3} " +
                  " ".join(f"{x:8.1f}" if x else "       -" for x in vals))
    print("\nspeed over bf16 (bf16 at the default 256 / at its best value):")
    for c in cfgs:
        b256 = t.get((values[0], "bf16") + c)
        bbest = min((t[(v, "bf16") + c] for v in values if (v, "bf16") + c in t), default=None)
        for dt in dts[1:]:
            xs = [t.get((v, dt) + c) for v in values]
            best = min((x for x in xs if x), default=None)
            if not (b256 and best):
                continue
            print(f"{dt:>8} B={c[0]:<3} S={c[1]:<6} {c[2]}/{c[3]:<3} default {b256 / xs[0]:.2f}x  "
                  f"best {best:.1f} us: {b256 / best:.2f}x / {bbest / best:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
