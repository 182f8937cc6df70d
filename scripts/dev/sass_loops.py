#!/usr/bin/env python3
"""Static SASS views of one kernel (development aid; mla.md "What is left", 2026-11-28).

    python3 scripts/dev/sass_loops.py BINARY --kernel REGEX [--min-loop 200] [--ops A-B ...]
        [--hist A-B ...]

Reads the first function whose name matches REGEX (sass_report.functions: cuobjdump -sass) and
prints:
  - loops: backward branches (not the BRA.U.ANY issue loops, not the out-of-line blocks' jumps back
    into the body) spanning at least --min-loop instructions, as "first .. last" instruction indices;
  - MUFU clusters: runs of MUFU.EX2 at most 12 instructions apart, with how many FMULs fall inside
    the run and the last named barrier before it (a softmax whose exponentials are issued back to
    back shows a short span and no FMULs);
  - --ops A-B: the opcodes of instructions A..B run-length encoded (e.g. "MUFUx32 FMULx128");
  - --hist A-B: an opcode histogram over one or more ranges.
"""
import argparse
import collections
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_report import functions  # noqa: E402  (the cuobjdump listing per function)


def read_function(path, pattern):
    rx = re.compile(pattern)
    for (_, name), ins in functions(path).items():
        if rx.search(name):
            return ins
    return []


def opcode(ins):
    t = ins.split()
    op = t[1] if t[0].startswith("@") and len(t) > 1 else t[0]
    return op if op.startswith("BAR.") else op.split(".")[0]


def loops(recs, min_len):
    index = {a: i for i, (a, _) in enumerate(recs)}
    exits = [i for i, (_, ins) in enumerate(recs) if opcode(ins) == "EXIT"]
    body_end = exits[-1] if exits else len(recs)
    out = []
    for i, (a, ins) in enumerate(recs):
        m = re.search(r"BRA[^;]*?(0x[0-9a-f]+)", ins)
        if m and "U.ANY" not in ins:
            t = int(m.group(1), 16)
            # (branches from the out-of-line blocks after the last EXIT back into the body, e.g. a
            # wait's retry path, are not loops of the body)
            if t < a and t in index and i < body_end and i - index[t] >= min_len:
                out.append((index[t], i))
    return out


def mufu_clusters(recs, gap=12):
    idx = [i for i, (_, ins) in enumerate(recs) if "MUFU.EX2" in ins]
    if not idx:
        return []
    out, start, prev = [], idx[0], idx[0]
    for i in idx[1:]:
        if i - prev > gap:
            out.append((start, prev))
            start = i
        prev = i
    out.append((start, prev))
    return [(a, b, sum(1 for k in idx if a <= k <= b)) for a, b in out]


def rle(ops):
    out, prev, n = [], None, 0
    for o in ops:
        if o == prev:
            n += 1
        else:
            if prev is not None:
                out.append(f"{prev}x{n}" if n > 1 else prev)
            prev, n = o, 1
    if prev is not None:
        out.append(f"{prev}x{n}" if n > 1 else prev)
    return " ".join(out)


def span(text):
    a, b = text.split("-")
    return int(a), int(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", help="a cubin, object, executable or library with sm_90a code")
    ap.add_argument("--kernel", required=True, help="regular expression on the function's name")
    ap.add_argument("--min-loop", type=int, default=200)
    ap.add_argument("--ops", type=span, action="append", default=[])
    ap.add_argument("--hist", type=span, action="append", default=[])
    args = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (piped into head)
    recs = read_function(args.binary, args.kernel)
    if not recs:
        sys.exit(f"no function matching {args.kernel!r}")
    print(f"instructions {len(recs)}")
    for a, b in loops(recs, args.min_loop):
        print(f"loop {a} .. {b}")
    for a, b, n in mufu_clusters(recs):
        fmul = sum(1 for k in range(a, b + 1) if opcode(recs[k][1]) == "FMUL")
        bars = [recs[k][1] for k in range(max(0, a - 60), a) if recs[k][1].split()[0].startswith("BAR")]
        print(f"MUFU.EX2 run {a}-{b}: {n} MUFU, {fmul} FMUL inside, last barrier before: {bars[-1] if bars else '-'}")
    for a, b in args.ops:
        print(f"ops {a}-{b}: {rle(opcode(recs[k][1]) for k in range(a, min(b + 1, len(recs))))}")
    if args.hist:
        c = collections.Counter(opcode(recs[k][1]) for a, b in args.hist for k in range(a, min(b + 1, len(recs))))
        print(f"hist ({sum(c.values())}): " + " ".join(f"{k}:{v}" for k, v in c.most_common(40)))


if __name__ == "__main__":
    main()
