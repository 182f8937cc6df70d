"""CPU model of the persistent forward's static walk under a causal mask (fwd_sm90.md, "Head-major order
for the persistent kernel's causal walk"): the largest per-CTA load over the ideal, for the unit orders
the launcher can pick. A unit is a pair of row blocks (m, num_m - 1 - m) of one (batch, head); its work
is the key tiles its two blocks see plus one per block (the tile's fixed cost); units are numbered by
scheduling group, then pair index, then pair within the group, and round r gives CTA c unit r * P + c
(even r) or r * P + P - 1 - c (odd r), as kernel_persistent.cuh does.

Orders: old = the L2-sized groups (before 2026-11-28), head-major = groups of one with the snake walk, by-head =
head-major with each head's pair index rotated by the head's index (not built), by-round = what kernel_persistent.cuh
does since 2026-11-28 where launch/fwd_sched.h fwd_walk_rotate allows it (U, the units per pair, divides the grid):
no snake, and each pair's units rotated by the round (shipped: D 64 causal 1k / 2k +11% measured). The FA3 sweep's causal rows,
16k tokens, hidden 2048 (dims: 16 heads). At D 128 / 96 / 192 (128-row blocks, 128-key tiles) every unit
costs the same and every order is at the quantization floor (1.031). At D 64 (192-row blocks over
128-key tiles) the units differ (at 1k: 10, 11, 11 key tiles + overheads), and head-major gives each
CTA the same pair index every round (132 is a multiple of 3): 1.058 against the old order's 1.038 at
1k, 1.133 against 1.086 at 2k, where the measured D 64 rows were -6% and -1.4% (512: 1.031 against
1.074, measured +3.9%).

    python3 scripts/dev/models/fwd_walk_order_model.py
"""
import math

P = 132


def work(m, S, bm, bn, ovh=1.0):
    rows_end = min(m * bm + bm, S)  # S_q = S_k: block m sees keys < its last row + 1
    return math.ceil(rows_end / bn) + ovh


def units(B, H, S, bm, bn, G, rotate=False):
    num_m = (S + bm - 1) // bm
    nbh = B * H
    out = []
    npairs = (num_m + 1) // 2
    for z in range((nbh + G - 1) // G):
        gsize = min(G, nbh - z * G)
        for pi0 in range(npairs):
            for x in range(gsize):
                bh = z * G + x
                pi = (pi0 + bh) % npairs if rotate else pi0
                hi, lo = num_m - 1 - pi, pi
                out.append(work(hi, S, bm, bn) + (work(lo, S, bm, bn) if lo < hi else 0))
    return out


def makespan_over_ideal(us, per_pair=0):
    """per_pair = U > 0: the by-round walk (no snake, unit k of a pair in round r -> (k + r) mod U)."""
    loads = [0.0] * P
    for i in range(len(us)):
        r = i // P
        if per_pair:
            z, k = divmod(i, per_pair)
            loads[i % P] += us[z * per_pair + (k + r) % per_pair]
        else:
            loads[i % P if r % 2 == 0 else P - 1 - i % P] += us[i]
    return max(loads) / (sum(us) / P)


def main():
    for D, bm, H in [(64, 192, 32), (96, 128, 16), (128, 128, 16), (192, 128, 16)]:
        for S in [512, 1024, 2048, 4096, 8192]:
            B = 16384 // S
            nbh = B * H
            kv = S * D * 4
            l2 = 50 * 2**20
            G = max(1, min(l2 // kv, nbh))
            G = math.ceil(nbh / math.ceil(nbh / G))
            old = makespan_over_ideal(units(B, H, S, bm, 128, G))
            hm = makespan_over_ideal(units(B, H, S, bm, 128, 1))
            rot = makespan_over_ideal(units(B, H, S, bm, 128, 1, True))
            U = ((S + bm - 1) // bm + 1) // 2
            us = units(B, H, S, bm, 128, 1)
            rr = f"{makespan_over_ideal(us, U):.3f}" if P % U == 0 and len(us) > P else "(not taken)"
            print(f"D{D} S{S}: old (groups of {G}) {old:.3f}  head-major {hm:.3f}  by-head {rot:.3f}  by-round {rr}")


if __name__ == "__main__":
    main()
