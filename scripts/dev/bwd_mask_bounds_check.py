"""Host check of FLASHKIT_BWD_PP_MASK_THR (kernel_pp.cuh, the masked P loop of the 128-row kernels (D 64) and of D 96 /
128's 64-row ones): the per-key column bounds c_lo / c_hi against Mask::visible (src/kernels/attention_common/mask.cuh,
re-stated here), for every warpgroup, warp, lane, tile column and element of random sequence lengths and masks as the
API makes them (attention.cpp: windows at or past max(S_q, S_k) are none, window_right 0 is causal), row / key blocks
at and past both ends. Both block heights: kBlockM 128 (16 n8 tiles, row blocks at multiples of 128) and 64 (8 tiles,
row blocks at multiples of 64); the thread / element mapping is the same (row m0 + 2t + 8 j + e % 2, key n0 + 64 wg +
16 warp + g + 8 (e / 2), 128-key blocks). Also D 256's key-split kernels (ks_fragments.cuh's ks_probs, kernel_ks.cuh /
kernel_ks_pair.cuh), whose mapping is transposed: row m0 + 16 warp + g + 8 (e / 2), key n0 + 32 wg + 2t + 8 j + e % 2
(64-row / 64-key blocks), bounds c_lo / c_r on c - 8 (e / 2) and c_end on c, c = 8 j + e % 2.

    python3 scripts/dev/bwd_mask_bounds_check.py [TRIALS]     (default 4000: 98 M cases, ~3 min)
"""
import random
import sys

K_NEVER = 1 << 24


def visible(sq, sk, causal, left, right, row, key):
    has_right = causal or right >= 0
    right_of = row + sk - sq + (0 if causal else right)
    return key < sk and (not has_right or key <= right_of) and (left < 0 or key >= row + sk - sq - left)


def main(trials):
    random.seed(1)
    cases = 0
    for _ in range(trials):
        sq, sk = random.randint(1, 700), random.randint(1, 700)
        big = max(sq, sk)
        causal = random.random() < 0.5
        wr = random.choice([-1, 0, random.randint(0, big + 3)])
        right = -1 if (wr < 0 or wr >= big) else wr
        if causal or right == 0:
            right = 0
        causal = right == 0
        wl = random.choice([-1, random.randint(0, big + 3)])
        left = -1 if (wl < 0 or wl >= big) else wl
        m0_128 = 128 * random.randint(0, (sq + 127) // 128)
        n0 = 128 * random.randint(0, (sk + 127) // 128)
        m0_64 = 64 * random.randint(0, (sq + 63) // 64)
        has_right = causal or right >= 0
        # the 128-row kernels, the 64-row ones (D 96 / 128)
        for block_m, m0, key0 in ((bm, m, k) for bm, m in ((128, m0_128), (64, m0_64)) for k in (0, 64)):
            for warp in range(4):
                for g in range(8):
                    for t in range(4):
                        b = m0 + 2 * t
                        key_t = n0 + key0 + warp * 16 + g
                        right_of_b = b + sk - sq + (0 if causal else right)
                        c_lo = key_t - right_of_b if has_right else -K_NEVER
                        c_hi = []
                        for h in range(2):
                            key = key_t + 8 * h
                            c_hi.append(-K_NEVER if key >= sk else
                                        (key - (b + sk - sq - left) if left >= 0 else K_NEVER))
                        for j in range(block_m // 8):
                            for e in range(4):
                                c, h = j * 8 + e % 2, e // 2
                                mine = not (c - 8 * h < c_lo or c > c_hi[h])
                                ref = visible(sq, sk, causal, left, right, b + c, key_t + 8 * h)
                                if mine != ref:
                                    sys.exit(f"MISMATCH block_m {block_m} sq {sq} sk {sk} causal {causal} left {left} "
                                             f"right {right} m0 {m0} n0 {n0} key {key_t + 8 * h} row {b + c}")
                                cases += 1
        # D 256's key-split kernels (ks_probs): 64-row, 64-key blocks, two warpgroups of 32 keys
        m0 = 64 * random.randint(0, (sq + 63) // 64)
        n0 = 64 * random.randint(0, (sk + 63) // 64)
        for wg in range(2):
            for warp in range(4):
                for g in range(8):
                    for t in range(4):
                        row = m0 + warp * 16 + g
                        key = n0 + wg * 32 + 2 * t
                        c_end = sk - 1 - key
                        c_lo = row + sk - sq - left - key if left >= 0 else -K_NEVER
                        c_r = row + sk - sq + (0 if causal else right) - key if has_right else K_NEVER
                        for j in range(4):
                            for e in range(4):
                                c, h = j * 8 + e % 2, e // 2
                                mine = not (c - 8 * h < c_lo or c - 8 * h > c_r or c > c_end)
                                ref = visible(sq, sk, causal, left, right, row + 8 * h, key + c)
                                if mine != ref:
                                    sys.exit(f"KS MISMATCH sq {sq} sk {sk} causal {causal} left {left} right {right} "
                                             f"m0 {m0} n0 {n0} key {key + c} row {row + 8 * h}")
                                cases += 1
    print("ok", cases, "cases")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)
