"""Step timeline of the Hopper ping-pong backward (D 64 / 128) from a FLASHKIT_BWD_PP_TRACE=1 build
(src/kernels/bwd_sm90/kernel_pp.cuh, pp_traits.cuh): two CTAs in the middle of the grid record
clock64 at ten points of each warpgroup's row-block steps 8 .. 39 and print them at exit.

    python3 bwd_pp_trace.py run D S causal [deterministic]   > LOG   (calls the backward; the kernel prints)
    python3 bwd_pp_trace.py summarize LOG                             (medians per phase, per shape)

Fields per warpgroup and step: 0 step begin, 1 Q/dO landed, 2 gate A open, 3 S^T ready, 4 dP^T
ready, 5 dS^T stored (warpgroup barrier passed), 6 gate B open, 7 dV/dK done, 8 stage released
and the next copy issued, 9 step end (dQ sent). The summary gives, in cycles (median over steps
and the two CTAs): each phase's length per warpgroup, the step period, and where warpgroup 1's
points fall relative to warpgroup 0's gate A of the same step: what the tensor pipe waits for.
"""
import re
import statistics
import sys

LINE = re.compile(r"bwd_pp_trace D=(\d+) S=(\d+) causal=(\d+) cta=(\d+) wg=(\d+) step=(\d+) f=([\d,]+)")
PHASES = ("Q/dO wait", "gate A wait", "S^T", "dP^T (+exp2)", "dS^T + wg barrier", "gate B wait", "dV/dK",
          "release + copy issue", "dQ section")


def parse(text):
    """{(D, S, causal): {(cta, wg, step): [10 clocks]}}, the last call of each shape."""
    shapes = {}
    for m in LINE.finditer(text):
        D, S, causal, cta, wg, step = map(int, m.groups()[:6])
        f = [int(x) for x in m.group(7).split(",")]
        rec = shapes.setdefault((D, S, causal), {})
        rec[(cta, wg, step)] = f  # later calls overwrite: the last one stays
    return shapes


def d(a, b):  # clock64's low 32 bits
    return (b - a) % (1 << 32)


def summarize(text):
    out = []
    for (D, S, causal), rec in sorted(parse(text).items()):
        ctas = sorted({k[0] for k in rec})
        steps = sorted({k[2] for k in rec})
        out.append(f"D {D} S {S} causal {causal}: CTAs {ctas}, steps {steps[0]}..{steps[-1]}")
        for wg in (0, 1):
            cols = []
            for i in range(9):
                xs = [d(f[i], f[i + 1]) for (c, w, s), f in rec.items() if w == wg]
                cols.append(statistics.median(xs) if xs else float("nan"))
            per = [d(rec[(c, wg, s)][0], rec[(c, wg, s + 1)][0]) for (c, w, s) in rec
                   if w == wg and (c, wg, s + 1) in rec]
            out.append(f"  wg{wg} step {statistics.median(per):7.0f} cycles: " +
                       ", ".join(f"{n} {x:.0f}" for n, x in zip(PHASES, cols)))
        # warpgroup 1's points against warpgroup 0's gate A of the same step
        rel = {i: [] for i in range(10)}
        for (c, w, s), f in rec.items():
            if w == 1 and (c, 0, s) in rec:
                a = rec[(c, 0, s)][2]
                for i in range(10):
                    x = (f[i] - a) % (1 << 32)
                    rel[i].append(x - (1 << 32) if x >= (1 << 31) else x)
        base0 = {i: [] for i in range(10)}
        for (c, w, s), f in rec.items():
            if w == 0:
                for i in range(10):
                    x = (f[i] - f[2]) % (1 << 32)
                    base0[i].append(x - (1 << 32) if x >= (1 << 31) else x)
        out.append("  relative to wg0's gate A (cycles): field   wg0   wg1")
        for i in range(10):
            if rel[i] and base0[i]:
                out.append(f"    {i} {['begin', 'Q/dO', 'gate A', 'S^T', 'dP^T', 'dS^T', 'gate B', 'dV/dK', 'copy', 'end'][i]:7s}"
                           f" {statistics.median(base0[i]):6.0f} {statistics.median(rel[i]):6.0f}")
    return "\n".join(out)


def run(D, S, causal, deterministic):
    import torch

    import flashkit

    H, B = 2048 // D, 16384 // S
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    for _ in range(3):
        flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=deterministic)
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", len(sys.argv) > 5 and sys.argv[5] == "1")
    else:
        print(summarize(open(sys.argv[2]).read()))
