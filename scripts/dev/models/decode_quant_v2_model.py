#!/usr/bin/env python3
"""CPU model of the quantized paged-decode fragment layouts (split_kernel.cuh, kQuant != 0):
one warp's S = Q K^T and O = P V for one 64-token tile, emulated lane by lane from the
kernel's own addressing, checked against numpy. No GPU needed:

    python3 scripts/dev/models/decode_quant_v2_model.py

What it follows, as the kernel does it:
- Q in shared memory permuted per 16-column k-step (32-bit words 0,2,4,6,1,3,5,7), read
  back as standard m16n8k16 A fragments;
- K: one 32-bit word per key row and k-step at byte 4 tq, split into the b0 / b1 pairs;
- V: four words per 32-dim group (key rows 2tq, 2tq+1, 2tq+8, 2tq+9, byte 32 grp + 4 g),
  gathered with __byte_perm (selectors 0x5140 / 0x7362, emulated), four n8 tiles per
  group with permuted columns;
- the merge's float4 writes of the permuted O columns;
- the V-scale normalization (P times scale / running max, O rescaled when the max grows,
  times the max at the end), in float32 with P rounded to fp16 as the kernel packs it;
- the int8 magic-number conversion (0x64uu - 1152) on every byte value.
"""
import numpy as np


def byte_perm(x, y, s):
    """CUDA __byte_perm (no sign-replicate mode)."""
    src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(s >> (4 * i)) & 0x7] << (8 * i) for i in range(4))


def word(buf, row, byte):
    b = buf[row, byte:byte + 4].astype(np.uint32)
    return int(b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24))


def pair_lo_hi(w, dec):
    """bytes4_to_f16x2: (values of bytes 0,1), (values of bytes 2,3)."""
    v = [dec((w >> (8 * i)) & 0xFF) for i in range(4)]
    return (v[0], v[1]), (v[2], v[3])


def int8_magic(b):
    u = b ^ 0x80
    h = np.array([0x6400 | u], dtype=np.uint16).view(np.float16)[0]
    return float(np.float16(h - np.float16(1152)))


def check_int8_magic():
    for b in range(256):
        assert int8_magic(b) == float(np.int8(np.uint8(b))), b


def model(D=128, kWarpKeys=16, seed=0):
    rng = np.random.default_rng(seed)
    rows = 16
    Q = rng.standard_normal((rows, D)).astype(np.float32)
    Kb = rng.integers(0, 256, size=(kWarpKeys, D), dtype=np.uint8)  # int8 bytes
    Vb = rng.integers(0, 256, size=(kWarpKeys, D), dtype=np.uint8)
    dec = lambda b: float(np.int8(np.uint8(b)))
    K = np.vectorize(dec)(Kb).astype(np.float32)
    V = np.vectorize(dec)(Vb).astype(np.float32)

    # Q permuted per k-step, in words (pairs of columns)
    Qp = np.empty_like(Q)
    for k0 in range(0, D, 16):
        words = [Q[:, k0 + 2 * i:k0 + 2 * i + 2] for i in range(8)]
        order = [0, 2, 4, 6, 1, 3, 5, 7]
        for j, i in enumerate(order):
            Qp[:, k0 + 2 * j:k0 + 2 * j + 2] = words[i]

    # S = Q K^T: per n8 key tile nt, k-step ks, lanes (g, tq)
    S = np.zeros((rows, kWarpKeys), dtype=np.float64)
    for nt in range(kWarpKeys // 8):
        for ks in range(D // 16):
            Bm = np.zeros((16, 8))
            for g in range(8):
                for tq in range(4):
                    w = word(Kb, nt * 8 + g, ks * 16 + 4 * tq)
                    b0, b1 = pair_lo_hi(w, dec)
                    Bm[2 * tq, g], Bm[2 * tq + 1, g] = b0
                    Bm[2 * tq + 8, g], Bm[2 * tq + 9, g] = b1
            A = Qp[:, ks * 16:ks * 16 + 16].astype(np.float64)
            S[:, nt * 8:nt * 8 + 8] += A @ Bm
    assert np.allclose(S, Q.astype(np.float64) @ K.T.astype(np.float64), rtol=1e-9, atol=1e-9), "S"

    # O = P V with the V-scale normalization over two tiles of the same warp
    vscale_tiles = [rng.uniform(1e-4, 3e-3, kWarpKeys), rng.uniform(1e-4, 9e-3, kWarpKeys)]
    P_tiles = [rng.uniform(0, 1, (rows, kWarpKeys)) for _ in vscale_tiles]
    v_ref = 0.0
    O = np.zeros((rows, D // 8, 8))  # [row][n8 tile][column] in the permuted layout
    for P, vs in zip(P_tiles, vscale_tiles):
        vm = vs.max()
        if vm > v_ref:
            O *= v_ref / vm
            v_ref = vm
        Pp = (P * vs[None, :] / v_ref).astype(np.float16).astype(np.float64)
        for ps in range(kWarpKeys // 16):
            for grp in range(D // 32):
                Bd = np.zeros((4, 16, 8))
                for g in range(8):
                    for tq in range(4):
                        r = ps * 16 + 2 * tq
                        w0, w1 = word(Vb, r, 32 * grp + 4 * g), word(Vb, r + 1, 32 * grp + 4 * g)
                        w2, w3 = word(Vb, r + 8, 32 * grp + 4 * g), word(Vb, r + 9, 32 * grp + 4 * g)
                        b0 = pair_lo_hi(byte_perm(w0, w1, 0x5140), dec) + pair_lo_hi(byte_perm(w0, w1, 0x7362), dec)
                        b1 = pair_lo_hi(byte_perm(w2, w3, 0x5140), dec) + pair_lo_hi(byte_perm(w2, w3, 0x7362), dec)
                        for d in range(4):
                            Bd[d, 2 * tq, g], Bd[d, 2 * tq + 1, g] = b0[d]
                            Bd[d, 2 * tq + 8, g], Bd[d, 2 * tq + 9, g] = b1[d]
                for d in range(4):
                    O[:, 4 * grp + d, :] += Pp[:, ps * 16:ps * 16 + 16] @ Bd[d]
    # merge: lane (g, tq) writes o[4 grp + d][2h + e] * v_ref to dim 32 grp + 8 tq + 4 e + d
    out = np.full((rows, D), np.nan)
    for g in range(8):
        for tq in range(4):
            for h in range(2):
                r = g + 8 * h
                for grp in range(D // 32):
                    for e in range(2):
                        for d in range(4):
                            out[r, 32 * grp + 8 * tq + 4 * e + d] = O[r, 4 * grp + d, 2 * tq + e] * v_ref
    ref = sum(P @ (vs[:, None] * V) for P, vs in zip(P_tiles, vscale_tiles))
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert not np.isnan(out).any() and err < 2e-3, f"O: relative error {err}"
    return err


if __name__ == "__main__":
    check_int8_magic()
    worst = 0.0
    for D in (64, 128, 256):
        for seed in range(3):
            worst = max(worst, model(D=D, seed=seed))
    print(f"decode quant v2 model: S exact, O within {worst:.1e} (fp16 P), int8 magic exact: OK")
