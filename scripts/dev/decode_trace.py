"""Per-CTA timeline of one decode call from a FLASHKIT_DECODE_TRACE build (the fields are
documented in src/kernels/decode_params.h; scripts/dev/decode_trace.sh builds and runs it):

    python3 scripts/dev/decode_trace.py [B:S_k:H_q:H_kv:kv[:s_q] ...]      (kv: bf16, int8, fp8; s_q 1 default)

For each case: a plan, warm-up calls, then a CUDA graph of 4 back-to-back calls replayed once
(the trace keeps the last call's points, each CTA overwriting its own slots). Prints the
split CTAs' start / release from griddepcontrol.wait / first tile ready / loop done / result
written as min, p10, median, p90, max over the grid relative to the earliest split start,
the combine CTAs' points, per-SM finishing spread, and the graph time per call for
comparison with the traced span.
"""
import os
import statistics
import sys

import torch

import flashkit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from decode_quick_bench import graph_ms, paged_inputs  # noqa: E402

SPLIT_CTAS, COMBINE_CTAS = 8192, 2048  # kTraceSplitCtas, kTraceCombineCtas
WORDS = SPLIT_CTAS * 8 + COMBINE_CTAS * 8


def pct(vals, q):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))]


def line(name, vals):
    if not vals:
        return f"  {name:22s} (none)"
    return (f"  {name:22s} min {min(vals):7.2f}  p10 {pct(vals, .1):7.2f}  med {statistics.median(vals):7.2f}"
            f"  p90 {pct(vals, .9):7.2f}  max {max(vals):7.2f} us  (n={len(vals)})")


def case(B, S, hq, hkv, kv, s_q=1, page=16, d=128):
    q, k, v, bt, sl, scales, kvd = paged_inputs(B, S, hq, hkv, kv, page, s_q, d)
    plan = flashkit.DecodePlan(B, s_q, hq, hkv, d, device="cuda", kv_dtype=None if kv == "bf16" else kvd)
    plan.plan(sl)
    step = lambda: plan.run(q, k, v, bt, sl, **scales)  # noqa: E731
    for _ in range(3):
        step()
    t_call = graph_ms(step) * 1e3
    g4 = torch.cuda.CUDAGraph()  # 4 back-to-back calls, replayed once below
    with torch.cuda.graph(g4):
        for _ in range(4):
            step()
    ws = plan.workspace.view(torch.int64)
    assert ws.numel() >= WORDS, "not a FLASHKIT_DECODE_TRACE build (workspace has no trace tail)"
    tr = ws[-WORDS:]
    tr.zero_()
    torch.cuda.synchronize()
    g4.replay()
    torch.cuda.synchronize()
    raw = tr.cpu()
    sp = raw[: SPLIT_CTAS * 8].view(SPLIT_CTAS, 8)
    cb = raw[SPLIT_CTAS * 8:].view(COMBINE_CTAS, 8)
    sp = sp[sp[:, 7] != 0]
    cb = cb[cb[:, 7] != 0]
    t0 = sp[:, 0].min().item()
    us = lambda x: (x - t0) / 1000.0  # noqa: E731
    kv_bytes = 2 * B * S * hkv * (d * (2 if kv == "bf16" else 1) + (0 if kv == "bf16" else 4))
    print(f"\n== B={B} S_k={S} {hq}/{hkv} s_q={s_q} {kv}: graph {t_call:.1f} us/call, {kv_bytes / t_call / 1e6:.0f} GB/s; "
          f"{len(sp)} split CTAs, {len(cb)} combine CTAs")
    start = [us(x) for x in sp[:, 0].tolist()]
    rel = [us(x) for x in sp[:, 1].tolist()]
    first = [us(x) for x in sp[:, 2].tolist()]
    done = [us(x) for x in sp[:, 3].tolist()]
    wrote = [us(x) for x in sp[:, 4].tolist()]
    merged = [us(x) for x in sp[:, 5].tolist() if x >= t0]  # (older calls' merges: stale)
    info = sp[:, 6].tolist()
    sm = [x & 0xFFFF for x in info]
    tiles = [(x >> 16) & 0xFFFFFF for x in info]
    print(line("split start", start))
    print(line("released (wait)", rel))
    print(line("tile 0 ready", first))
    print(line("  ready - released", [f - r for f, r in zip(first, rel)]))
    print(line("loop done", done))
    print(line("result written", wrote))
    print(line("fused merge done", merged))
    per_tile = [(dn - f) / (n - 1) for dn, f, n in zip(done, first, tiles) if n > 1]
    print(line("us per tile (after 0)", per_tile))
    print(f"  tiles per CTA: min {min(tiles)} med {statistics.median(tiles)} max {max(tiles)}; "
          f"SMs used {len(set(sm))}")
    by_sm = {}
    for s_, dn in zip(sm, done):
        by_sm.setdefault(s_, []).append(dn)
    last = [max(v) for v in by_sm.values()]
    cnt = [len(v) for v in by_sm.values()]
    print(line("per-SM last loop done", last))
    print(f"  CTAs per SM: {sorted(set(cnt))} (counts {[cnt.count(c) for c in sorted(set(cnt))]})")
    # CTAs streaming over time (tile 0 ready .. loop done), at 12 points of the split's span
    lo, hi = min(first), max(done)
    pts = [lo + (hi - lo) * k / 11 for k in range(12)]
    act = [sum(1 for f, dn in zip(first, done) if f <= t < dn) for t in pts]
    print("  streaming CTAs over time: " + "  ".join(f"{t:.0f}us:{a}" for t, a in zip(pts, act)))
    # per SM: tiles streamed and the mean time per tile of its CTAs (is slowness per SM?)
    sm_tiles, sm_rate = {}, {}
    for s_, n, f, dn in zip(sm, tiles, first, done):
        sm_tiles[s_] = sm_tiles.get(s_, 0) + n
        if n > 1:
            sm_rate.setdefault(s_, []).append((dn - f) / (n - 1))
    rates = sorted((statistics.mean(v), k) for k, v in sm_rate.items())
    if rates:
        print(f"  per-SM mean us/tile: fastest {rates[0][0]:.2f} (SM {rates[0][1]}), median "
              f"{rates[len(rates) // 2][0]:.2f}, slowest {rates[-1][0]:.2f} (SM {rates[-1][1]}); "
              f"tiles per SM min {min(sm_tiles.values())} max {max(sm_tiles.values())}")
    if len(cb):
        print(line("combine start", [us(x) for x in cb[:, 0].tolist()]))
        print(line("combine released", [us(x) for x in cb[:, 1].tolist()]))
        print(line("combine done", [us(x) for x in cb[:, 6].tolist()]))
        work = cb[cb[:, 7] > 1]
        print(f"  combine CTAs with a pair: {len(work)}; pairs per CTA max {int(cb[:, 7].max().item()) - 1}")
        if len(work):
            w = work.tolist()
            print(line("  entry read - released", [(r[2] - r[1]) / 1e3 for r in w]))
            print(line("  LSEs landed - entry", [(r[3] - r[2]) / 1e3 for r in w]))
            print(line("  LSE total - landed", [(r[4] - r[3]) / 1e3 for r in w]))
            print(line("  O landed - LSE total", [(r[5] - r[4]) / 1e3 for r in w]))
            print(line("  pair done - O landed", [(r[6] - r[5]) / 1e3 for r in w]))
            print(line("  work CTA start", [us(r[0]) for r in w]))
            print(line("  work CTA released", [us(r[1]) for r in w]))
            print(line("  work CTA done", [us(r[6]) for r in w]))
    ends = wrote + merged + ([us(x) for x in cb[:, 6].tolist()] if len(cb) else [])
    allv = [x for x in raw.tolist() if x]
    res = sorted(set(b - a for a, b in zip(sorted(allv), sorted(allv)[1:]) if b > a))[:3]
    print(f"  traced span {max(ends):.1f} us (first split start to last write); call period {t_call:.1f} us; "
          f"smallest timer steps {res} ns")


def main():
    cfgs = sys.argv[1:] or ["1:65536:32:8:fp8", "1:65536:32:8:bf16", "1:16384:32:8:fp8", "16:8192:32:8:fp8",
                            "16:8192:32:8:bf16", "64:8192:32:8:fp8"]
    for c in cfgs:
        f = c.split(":")
        B, S, hq, hkv, kv = f[:5]
        case(int(B), int(S), int(hq), int(hkv), kv, int(f[5]) if len(f) > 5 else 1)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
