#!/usr/bin/env python3
"""Timeline model of the Hopper forward's ping-pong (two consumer warpgroups, one tensor pipe).

A development aid (docs/kernels/fwd_sm90.md, "What is left", 2026-11-28): does letting the warpgroups'
gates run ahead of the strict alternation hide the tile-boundary epilogues at short rows?

Model: each warpgroup walks its tiles as gates -- Q K(0); then Q K(j) + P V(j-1) for j = 1..n-1; then
P V(n-1) -- and issues a gate when its own previous work is done (softmax after a Q K^T, the
epilogue after the last P V). The tensor pipe runs the issued groups in issue order, one at a time.
`strict`: a warpgroup may only issue after the other warpgroup issued its previous gate (the named-
barrier turns of kernel_persistent.cuh); `greedy`: whoever is ready first, at most `lead` gates
ahead of the other. Times in us, per CTA, from the H100 trace of 2026-11-26 (fwd_sm90.md "Tile
timeline"): Q K^T and P V of a 64 x 128 x 128 warpgroup step ~0.42 us each at the steady rate, the
softmax ~0.45 us, the epilogue ~0.9 us.

What it shows: the strict turns lose only the epilogues that both warpgroups run at the same time
(7% of the tensor-bound time at four key tiles per tile, 1% at 32), and run-ahead changes nothing:
both warpgroups reach their epilogues together because they walk the same tiles in step, so neither
has a gate to issue then. With warpgroup 1 half a tile behind, the strict turns alone come within
2% of the tensor-bound time (+6% at four key tiles per tile): hiding the epilogue needs the
warpgroups offset (each then reads other K/V tiles and another Q: more stages than D 128's shared
memory holds), not freer turns. That holds while the epilogue is shorter than what the other
warpgroup issues in half a tile: with the 1.9 us epilogue traced before the TMA-store epilogue
(`--epilogue 1.9`), the strict turns lose 18% at four key tiles per tile and the offset makes it
6.6% worse. The epilogue after the TMA store and stmatrix staging has not been traced (0.9 us is an
estimate from the removed parts). The trace measured 29% of a tile at S = 512
with no wgmma in flight (before the TMA-store epilogue), far above the model's 7%, so most of the
short rows' loss is outside this model (the tile start: waits on Q / K(0), the first S, barrier
latencies), which the trace build (FLASHKIT_FWD_TRACE) can split further.
"""
import argparse


def simulate(n_tiles, n_keys, q=0.42, p=0.42, softmax=0.45, epilogue=0.9, policy="strict", lead=1, shift=0):
    """`shift`: warpgroup 1 runs `shift` gates behind, as if its walk started mid-tile (its first
    tile has `shift` key tiles; the total work is the same up to the last tile's remainder)."""
    tile = ["qk"] + ["qkpv"] * (n_keys - 1) + ["pv_last"]
    progs = [tile * n_tiles, tile * n_tiles]
    if shift:
        head = ["qk"] + ["qkpv"] * (shift - 1) + ["pv_last"]
        progs[1] = head + progs[1][: len(progs[1]) - len(head)]
    n = [len(progs[0]), len(progs[1])]
    ready = [0.0, 0.0]        # when each warpgroup can issue its next gate
    last_issue = [0.0, 0.0]   # when each warpgroup issued its previous gate
    issued = [0, 0]
    pipe_free = 0.0
    turn = 0
    while issued[0] < n[0] or issued[1] < n[1]:
        live = [w for w in (0, 1) if issued[w] < n[w]]
        if policy == "strict":
            w = turn if issued[turn] < n[turn] else 1 - turn
            t = max(ready[w], last_issue[1 - w])
        else:
            ok = [c for c in live if issued[1 - c] >= n[1 - c] or issued[c] - issued[1 - c] < lead + (c == 0)]
            w = min(ok, key=lambda c: (ready[c], c))
            t = ready[w]
        start = max(t, pipe_free)
        kind = progs[w][issued[w]]
        if kind == "qk":
            pipe_free = start + q
            ready[w] = pipe_free + softmax
        elif kind == "qkpv":
            qk_done = start + q
            pipe_free = qk_done + p
            ready[w] = max(qk_done + softmax, pipe_free)
        else:
            pipe_free = start + p
            ready[w] = pipe_free + epilogue
        last_issue[w] = t
        issued[w] += 1
        turn = 1 - w
    return max(ready)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epilogue", type=float, default=0.9)
    args = ap.parse_args()
    for n_keys in (4, 8, 32):
        tiles = max(1, 128 // n_keys)
        bound = tiles * n_keys * 2 * (0.42 + 0.42)
        s = simulate(tiles, n_keys, epilogue=args.epilogue)
        row = [f"key tiles per tile {n_keys:2d}: tensor-bound {bound:6.1f} us, strict {s:6.1f} ({bound / s:.2f})"]
        for lead in (2, 4):
            g = simulate(tiles, n_keys, epilogue=args.epilogue, policy="greedy", lead=lead)
            row.append(f"run-ahead {lead}: {g:6.1f} ({s / g - 1:+.1%})")
        h = simulate(tiles, n_keys, epilogue=args.epilogue, shift=max(1, n_keys // 2))
        row.append(f"strict, warpgroup 1 half a tile behind: {h:6.1f} ({s / h - 1:+.1%})")
        print(", ".join(row))


if __name__ == "__main__":
    main()
