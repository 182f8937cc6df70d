# Descriptor-level model of wip-fwd90 issue_qk / issue_pv for D 96 (padded 128), 192, and 128/256 (validated controls).
import numpy as np
from bwd90 import swz, tile_offset, desc, dec, operand, Smem, to_frag
from fwdpad import plan

def run(D, BN, seed=0):
    rng = np.random.default_rng(seed)
    Dp = (D + 63) // 64 * 64; BM = 128; KS, VS = 3, 2
    QB = BM * Dp * 2; KB = BN * Dp * 2
    kSmemQ, kSmemK = 0, QB; kSmemV = kSmemK + KS * KB
    base = 2048
    sm = Smem(base + kSmemV + VS * KB + 1024)
    if Dp != D:  # zero_padding
        for tb, kr, n in [(kSmemQ, BM, 1), (kSmemK, BN, KS), (kSmemV, BN, VS)]:
            for s in range(n):
                for r in range(kr):
                    for c in range(D, Dp, 8):
                        o = (base + tb + s * (kr * Dp * 2)) // 2 + tile_offset(kr, r, c)
                        sm.v[o:o + 8] = 0
    q = rng.standard_normal((BM, D)); k = rng.standard_normal((BN, D)); v = rng.standard_normal((BN, D))
    def load(tb, kr, src):
        for row, col in plan(D, kr):
            o = (base + tb) // 2 + tile_offset(kr, row, col)
            sm.v[o:o + 8] = src[row, col:col + 8]
    stage_k, stage_v = 2, 1
    load(kSmemQ, BM, q); load(kSmemK + stage_k * KB, BN, k); load(kSmemV + stage_v * KB, BN, v)
    QBlk, KBlk = BM * 128, BN * 128
    errs = []
    for wg in range(2):
        desc_q = desc(base + kSmemQ + wg * 64 * 128, 16, 1024)
        desc_k = desc(base + kSmemK, 16, 1024) + ((stage_k * KB) >> 4)
        desc_v = desc(base + kSmemV, KBlk, 1024) + ((stage_v * KB) >> 4)
        S = np.zeros((64, BN))
        for ks in range(Dp // 16):
            q_off = ((ks // 4) * QBlk + (ks % 4) * 32) >> 4
            for nc in range(BN // 64):
                k_off = ((ks // 4) * KBlk + nc * 64 * 128 + (ks % 4) * 32) >> 4
                A = operand(sm, desc_q + q_off, 64, 16, False, True, base)
                B = operand(sm, desc_k + k_off, 64, 16, False, False, base)
                S[:, nc * 64:(nc + 1) * 64] += A @ B.T
        ref = q[wg * 64:(wg + 1) * 64] @ k.T
        errs.append(np.abs(S - ref).max())
        P = rng.standard_normal((64, BN))
        O = np.zeros((64, Dp))
        for ps in range(BN // 16):
            for dc in range(Dp // 64):
                v_off = (dc * KBlk + ps * 16 * 128) >> 4
                B = operand(sm, desc_v + v_off, 64, 16, True, False, base)
                O[:, dc * 64:(dc + 1) * 64] += P[:, ps * 16:(ps + 1) * 16] @ B.T
        errs.append(np.abs(O[:, :D] - P @ v).max())
        assert np.isfinite(O).all()
    return errs

for D, BN in [(128, 128), (256, 64), (96, 128), (192, 64)]:
    print(D, BN, max(run(D, BN)))
