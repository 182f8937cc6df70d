"""Deterministic backward, where the time goes (a FLASHKIT_BWD_DET_TRACE build; see
scripts/dev/bwd_det_variants.sh): per FA3-sweep shape, the fast and deterministic backward times
(CUDA events, median of 7) and the kernel's own trace line, which this script summarizes:
the share of the issuing warps' lifetime spent getting turns (poll + wait) and releasing them.

    python3 bwd_det_trace.py [D S causal ...]      (default: a few FA3-sweep shapes)

Lines the kernel prints (device printf, possibly interleaved with ours) are parsed back from
this process's captured stdout by `summarize` when run on the log file:
    python3 bwd_det_trace.py --summarize LOG
"""
import re
import sys

FIELDS = ("D", "batch", "h_q", "seqlen_q", "seqlen_k", "causal", "rotate", "grid", "issuing_warps",
          "sends", "wait_ns", "release_ns", "cta_ns", "span_ns")
LINE = re.compile(r"det_trace " + " ".join(f"{f}=(\\d+)" for f in FIELDS))


def parse(text):
    return [dict(zip(FIELDS, map(int, m.groups()))) for m in LINE.finditer(text)]


def shares(rec):
    """Per issuing warp: the fraction of its CTA's lifetime in turns and in releases, the mean
    wait per send (us), and the CTAs' mean lifetime over the grid's span (concurrency)."""
    warp_ns = rec["cta_ns"] * rec["issuing_warps"]
    return {
        "wait_share": rec["wait_ns"] / warp_ns if warp_ns else 0.0,
        "release_share": rec["release_ns"] / warp_ns if warp_ns else 0.0,
        "wait_us_per_send": rec["wait_ns"] / rec["sends"] / 1e3 if rec["sends"] else 0.0,
        "release_us_per_send": rec["release_ns"] / rec["sends"] / 1e3 if rec["sends"] else 0.0,
        "resident": rec["cta_ns"] / rec["span_ns"] if rec["span_ns"] else 0.0,
    }


def summarize(text):
    rows, last = [], {}
    for rec in parse(text):  # the last call of each shape
        last[(rec["D"], rec["seqlen_k"], rec["causal"], rec["batch"])] = rec
    for rec in last.values():
        s = shares(rec)
        rows.append(f"D{rec['D']} S{rec['seqlen_k']} causal={rec['causal']} rotate={rec['rotate']} "
                    f"grid={rec['grid']} span={rec['span_ns'] / 1e3:.0f}us waits {100 * s['wait_share']:.1f}% "
                    f"({s['wait_us_per_send']:.2f} us/send) releases {100 * s['release_share']:.1f}% "
                    f"({s['release_us_per_send']:.2f} us/send) resident CTAs {s['resident']:.1f}")
    return "\n".join(rows)


def main(argv):
    if argv[:1] == ["--summarize"]:
        print(summarize(open(argv[1]).read()))
        return 0
    import torch
    import flashkit

    cases = [(int(argv[i]), int(argv[i + 1]), argv[i + 2] in ("1", "True", "true"))
             for i in range(0, len(argv), 3)] or [
        (128, 512, False), (128, 4096, False), (128, 16384, False), (128, 16384, True),
        (64, 4096, False), (64, 16384, False), (64, 16384, True)]
    for D, S, causal in cases:
        B, H = max(1, 16384 // S), 2048 // D
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
                         for _ in range(4))
        out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
        flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
        ms = {}
        for det in (False, True):
            times = []
            for _ in range(7):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=det)
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            ms[det] = sorted(times)[len(times) // 2]
        print(f"case D{D} S{S} causal={causal} B{B} H{H}: fast {ms[False]:.3f} ms "
              f"({flops / ms[False] / 1e9:.0f} TFLOPS), deterministic {ms[True]:.3f} ms, "
              f"det/fast {ms[False] / ms[True]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
