"""CPU model of the backward's CTA scheduling under a causal mask (docs/kernels/bwd.md, "Key-major
launch order"): how much of the machine a grid's launch order keeps busy, ignoring the L2.

Each CTA owns one key block (kBlockN keys) of one (batch, KV head) group and walks every row block
(kBlockM rows) of every query head of the group that sees those keys: under a bottom-right causal
mask with S_q = S_k, key block j of n sees (S - j kBlockN) / kBlockM row blocks, so a CTA's work is
that times the group size (h_ratio), plus one step of fixed cost. The SMs take CTAs in launch order
(list scheduling, one CTA per SM, 132 SMs). Orders:

- grid: key blocks fastest, then KV heads, then batch (the launch order of grid (n, h_kv, B));
- key-major: every group's key block 0, then every group's key block 1, ...;
- chunked C: groups in chunks of C, key-major inside a chunk;
- split g: the grid order with each group's query heads split over g CTAs (per-CTA work / g).

Efficiency = total work / (SMs x makespan). The FA3 sweep's shapes: B x S = 16k tokens, H_q 16 at
D 128 and 32 at D 64; --gqa G sets H_kv = H_q / G. What it predicted against what the H100 measured
(2026-11-27): key-major +40..59% on GQA 8 causal D 128, measured +0..9% (and MHA causal -22%):
the model leaves out the L2 reuse of Q / dO among one group's concurrent CTAs.

    python3 scripts/dev/models/bwd_grid_order_model.py [--gqa 8]
"""
import argparse
import heapq


def makespan(works, sms):
    heap = [0.0] * sms
    for w in works:
        t = heapq.heappop(heap)
        heapq.heappush(heap, t + w)
    return max(heap)


def jobs(S, H_q, H_kv, order, chunk=1, split=1, k_m=64, k_n=128):
    B = 16384 // S
    n = (S + k_n - 1) // k_n
    groups = B * H_kv
    ratio = H_q // H_kv
    work = [((S - j * k_n) // k_m) * ratio / split + 1.0 for j in range(n)]
    if order == "grid":
        return [work[j] for _g in range(groups) for _s in range(split) for j in range(n)]
    if order == "key-major":
        chunk = groups
    out = []
    for c0 in range(0, groups, chunk):
        gs = range(c0, min(groups, c0 + chunk))
        out += [work[j] for j in range(n) for _g in gs for _s in range(split)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gqa", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--sms", type=int, default=132)
    args = ap.parse_args()
    for D, H_q in ((64, 32), (128, 16)):
        for g in args.gqa:
            H_kv = H_q // g
            print(f"D {D}  H_q {H_q}  H_kv {H_kv}  (causal; efficiency = work / (SMs x makespan))")
            for S in (512, 1024, 2048, 4096, 8192, 16384):
                row = []
                for name, kw in (("grid", dict(order="grid")), ("key-major", dict(order="key-major")),
                                 ("chunk 4", dict(order="chunked", chunk=4)),
                                 (f"split {g}", dict(order="grid", split=g))):
                    w = jobs(S, H_q, H_kv, **kw)
                    row.append(f"{name} {sum(w) / args.sms / makespan(w, args.sms):.2f}")
                print(f"  S {S:>5}: " + "   ".join(row))


if __name__ == "__main__":
    main()
