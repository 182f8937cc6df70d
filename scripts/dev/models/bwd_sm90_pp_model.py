"""CPU model of src/kernels/bwd_sm90/kernel_pp.cuh (the ping-pong variant, D 64/128), one
(batch, kv head); derived from bwd_sm90_model.py (the v1 kernel).

Run: python3 scripts/dev/models/bwd_sm90_pp_model.py (numpy; prints max errors of dK, dV, dQ
per case). Written during a review without a GPU; keep it in sync with the kernel.

Shared memory is a byte-addressed array of 16-bit values (fp32 transfer buffer kept
separately); wgmma operands are read through the descriptors exactly as the kernel builds
them (start/LBO/SBO decoded from the 64-bit value after the kernel's integer adds), with
the 128-byte swizzle applied to absolute byte addresses. Fragments follow the mma.sync C /
A layouts. Compares dK, dV, dQ with a float64 reference.
"""
import itertools
import sys
from pathlib import Path

import numpy as np

# The shared-memory, descriptor, fragment and mask helpers are the v1 model's.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bwd_sm90_model import (F16, Mask, Smem, a_from_regs, cdiv, dec, desc, from_frag, operand,  # noqa: E402,F401
                            rnd, swz, tile_offset, to_frag)


def run(D, sq, sk, causal=False, left=-1, right=-1, h_ratio=1, seed=0, poison_pad=True, softcap=0.0):
    assert D in (64, 128)
    rng = np.random.default_rng(seed)
    kBlockM, kBlockN, kStages = 64, 128, 3
    kDChunks = D // 64
    kKSteps = D // 16
    kMSteps = 4
    kDqKSteps = 4
    QBytes = 64 * D * 2
    QBlockBytes = 64 * 128
    KBytes = kBlockN * D * 2
    KBlockBytes = kBlockN * 128
    DsBytes = 64 * 64 * 2          # one warpgroup's dS^T tile [64 keys][64 rows]
    DsBlockBytes = 64 * 128
    kSmemK = 0
    kSmemV = KBytes
    kSmemQ = kSmemV + KBytes
    kSmemDo = kSmemQ + kStages * QBytes
    kSmemDs = kSmemDo + kStages * QBytes
    base = 1024 * 3  # aligned smem base (absolute)
    scale = 1 / np.sqrt(D)
    hq = h_ratio
    q = rnd(rng.standard_normal((hq, sq, D)))
    k = rnd(rng.standard_normal((sk, D)))
    v = rnd(rng.standard_normal((sk, D)))
    do = rnd(rng.standard_normal((hq, sq, D)))
    mask = Mask(sq, sk, causal, left, right)
    vis = np.array([[mask.visible(i, j) for j in range(sk)] for i in range(sq)])
    dq_ref = np.zeros((hq, sq, D)); dk_ref = np.zeros((sk, D)); dv_ref = np.zeros((sk, D))
    lse = np.zeros((hq, sq)); delta = np.zeros((hq, sq))
    for h in range(hq):
        s = q[h] @ k.T * scale
        if softcap > 0:
            th_ref = np.tanh(s / softcap)
            s = softcap * th_ref
        s = np.where(vis, s, -np.inf)
        m = s.max(1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.exp(s - m)
        l = e.sum(1, keepdims=True)
        P = np.where(l > 0, e / np.where(l > 0, l, 1), 0)
        lse[h] = np.where(l[:, 0] > 0, np.log(np.where(l[:, 0] > 0, l[:, 0], 1)) + m[:, 0], -np.inf)
        o = P @ v
        delta[h] = (do[h] * o).sum(1)
        dP = do[h] @ v.T
        dS = P * (dP - delta[h][:, None])
        if softcap > 0:
            dS = dS * (1 - th_ref ** 2)
        dv_ref += P.T @ do[h]
        dk_ref += dS.T @ q[h] * scale
        dq_ref[h] = dS @ k * scale
    dq_acc = np.zeros((sq, hq, D))
    dk_out = np.zeros((sk, D)); dv_out = np.zeros((sk, D))
    scale_log2 = scale * np.log2(np.e)
    softcap_scale = scale / softcap if softcap > 0 else 0.0
    if softcap > 0:  # as api/attention.cpp: the scale goes into softcap_scale
        scale_log2 = np.log2(np.e)
    n_blocks = cdiv(sk, kBlockN)
    for n_block in range(n_blocks):
        sm = Smem(kSmemDs + 2 * DsBytes + base + 4096)
        n0 = n_block * kBlockN
        keys_here = min(kBlockN, sk - n0)

        def load(tile_base, kRows, src, valid_rows):
            cpr = D // 8
            rpp = 256 // cpr
            passes = cdiv(kRows, rpp)
            for tid in range(256):
                prow, pcol = tid // cpr, (tid % cpr) * 8
                for i in range(passes):
                    row = prow + i * rpp
                    if row >= kRows:
                        continue
                    dst = tile_offset(kRows, prow, pcol) + i * rpp * 64
                    assert dst == tile_offset(kRows, row, pcol)
                    for c in range(8):
                        val = src[row, pcol + c] if row < valid_rows else 0.0
                        sm.v[(base + tile_base) // 2 + dst + c] = val
        kpad = np.zeros((kBlockN, D)); kpad[:keys_here] = k[n0:n0 + keys_here]
        vpad = np.zeros((kBlockN, D)); vpad[:keys_here] = v[n0:n0 + keys_here]
        load(kSmemK, kBlockN, kpad, keys_here)
        load(kSmemV, kBlockN, vpad, keys_here)
        diag = sk - sq
        m_begin = max(0, n0 - mask.right_of(0)) // kBlockM if mask.has_right() else 0
        m_end = cdiv(sq, kBlockM)
        if left >= 0:
            last_row = n0 + kBlockN - 1 - diag + left
            m_end = 0 if last_row < 0 else min(m_end, last_row // kBlockM + 1)
        per_head = max(0, m_end - m_begin)
        iters = per_head * h_ratio
        dk = np.zeros((2, kDChunks, 128, 8, 4)); dv = np.zeros((2, kDChunks, 128, 8, 4))
        k_addr = base + kSmemK; v_addr = base + kSmemV; q_addr = base + kSmemQ; do_addr = base + kSmemDo
        for it in range(iters):
            stage = it % kStages
            head = it // per_head
            m_block = m_begin + it % per_head
            m0 = m_block * kBlockM
            rows = min(kBlockM, sq - m0)
            qpad = np.zeros((64, D)); qpad[:max(rows, 0)] = q[head, m0:m0 + rows]
            dopad = np.zeros((64, D)); dopad[:max(rows, 0)] = do[head, m0:m0 + rows]
            load(kSmemQ + stage * QBytes, 64, qpad, rows)
            load(kSmemDo + stage * QBytes, 64, dopad, rows)
            # raw lse / delta, zero-filled past the end (cp_async_4 with src-size 0)
            lse_raw = np.zeros(64); delta_s = np.zeros(64)
            lse_raw[:rows] = lse[head, m0:m0 + rows]
            delta_s[:rows] = delta[head, m0:m0 + rows]
            desc_q = desc(q_addr + stage * QBytes, 16, 1024)
            desc_do = desc(do_addr + stage * QBytes, 16, 1024)
            desc_q_mn = desc(q_addr + stage * QBytes, QBlockBytes, 1024)
            desc_do_mn = desc(do_addr + stage * QBytes, QBlockBytes, 1024)
            masked = mask.tile_needs_mask(n0, kBlockN, m0) or mask.tile_needs_left_mask(n0, m0 + kBlockM - 1)
            partial = {}
            for wg in range(2):
                key0 = wg * 64
                desc_kw = desc(k_addr + key0 * 128, 16, 1024)
                desc_vw = desc(v_addr + key0 * 128, 16, 1024)
                S = np.zeros((64, 64)); DP = np.zeros((64, 64))
                for ks in range(kKSteps):
                    a_off = ((ks // 4) * KBlockBytes + (ks % 4) * 32) >> 4
                    b_off = ((ks // 4) * QBlockBytes + (ks % 4) * 32) >> 4
                    A = operand(sm, desc_kw + a_off, 64, 16, False, True, base)
                    B = operand(sm, desc_q + b_off, 64, 16, False, False, base)
                    S += A @ B.T
                    A = operand(sm, desc_vw + a_off, 64, 16, False, True, base)
                    B = operand(sm, desc_do + b_off, 64, 16, False, False, base)
                    DP += A @ B.T
                s = to_frag(S); dp = to_frag(DP)
                if softcap > 0:  # kernel: th = tanh(s * softcap_scale), s = softcap * th, th kept as fp16
                    th = np.tanh(s * softcap_scale)
                    s = softcap * th
                    th_h = th.astype(F16).astype(np.float64)
                for tid in range(128):
                    warp, lane = tid // 32, tid % 32
                    g, t = lane // 4, lane % 4
                    key_row = warp * 16 + g
                    for j in range(8):
                        for e in range(4):
                            col = j * 8 + 2 * t + e % 2
                            l2 = np.inf if lse_raw[col] == -np.inf else lse_raw[col] * np.log2(np.e)
                            val = np.exp2(s[tid, j, e] * scale_log2 - l2)
                            if masked and not mask.visible(m0 + col, n0 + key0 + key_row + (e // 2) * 8):
                                val = 0.0
                            s[tid, j, e] = val
                            dp[tid, j, e] = val * (dp[tid, j, e] - delta_s[col])
                            if softcap > 0:
                                dp[tid, j, e] *= 1 - th_h[tid, j, e] ** 2
                def pack(c):
                    a = np.zeros((128, 4, 4, 2))
                    for st in range(4):
                        a[:, st, 0] = rnd(c[:, 2 * st, 0:2]); a[:, st, 1] = rnd(c[:, 2 * st, 2:4])
                        a[:, st, 2] = rnd(c[:, 2 * st + 1, 0:2]); a[:, st, 3] = rnd(c[:, 2 * st + 1, 2:4])
                    return a
                pa = pack(s); dsa = pack(dp)
                # dS^T to this warpgroup's tile
                ds_base = kSmemDs + wg * DsBytes
                for tid in range(128):
                    warp, lane = tid // 32, tid % 32
                    g, t = lane // 4, lane % 4
                    key_row = warp * 16 + g
                    for st in range(4):
                        c = st * 16 + 2 * t
                        for (kr, cc, reg) in [(key_row, c, 0), (key_row + 8, c, 1), (key_row, c + 8, 2),
                                              (key_row + 8, c + 8, 3)]:
                            o = (base + ds_base) // 2 + tile_offset(64, kr, cc)
                            sm.v[o] = dsa[tid, st, reg, 0]; sm.v[o + 1] = dsa[tid, st, reg, 1]
                for ms in range(kMSteps):
                    for c in range(kDChunks):
                        off = (c * QBlockBytes + ms * 16 * 128) >> 4
                        Bdo = operand(sm, desc_do_mn + off, 64, 16, True, False, base)
                        Bq = operand(sm, desc_q_mn + off, 64, 16, True, False, base)
                        dv[wg, c] += to_frag(a_from_regs(pa[:, ms]) @ Bdo.T)
                        dk[wg, c] += to_frag(a_from_regs(dsa[:, ms]) @ Bq.T)
                desc_ds = desc(base + ds_base, DsBlockBytes, 1024)
                desc_k_mn = desc(k_addr, KBlockBytes, 1024)
                for c in range(kDChunks):
                    DQ = np.zeros((64, 64))
                    for ks in range(kDqKSteps):
                        a_off = (ks * 16 * 128) >> 4
                        b_off = (c * KBlockBytes + (key0 + ks * 16) * 128) >> 4
                        A = operand(sm, desc_ds + a_off, 64, 16, True, True, base)
                        B = operand(sm, desc_k_mn + b_off, 64, 16, True, False, base)
                        DQ += A @ B.T
                    partial[(wg, c)] = to_frag(DQ)
            # warpgroup 0's partial through the [c][8][128] float4 buffer, added by warpgroup 1
            xbuf = np.zeros((kDChunks, 8, 128, 4))
            for c in range(kDChunks):
                for tid in range(128):
                    for j in range(8):
                        xbuf[c, j, tid] = partial[(0, c)][tid, j]
            for c in range(kDChunks):
                fr = partial[(1, c)].copy()
                for tid in range(128):
                    for j in range(8):
                        fr[tid, j] += xbuf[c, j, tid]
                for tid in range(128):
                    warp, lane = tid // 32, tid % 32
                    g, t = lane // 4, lane % 4
                    for half in range(2):
                        r = warp * 16 + g + half * 8
                        if m0 + r < sq:
                            for j in range(8):
                                col = c * 64 + 2 * t + j * 8
                                dq_acc[m0 + r, head, col] += fr[tid, j, half * 2]
                                dq_acc[m0 + r, head, col + 1] += fr[tid, j, half * 2 + 1]
        for wg in range(2):
            key0 = wg * 64
            for c in range(kDChunks):
                blk_k = from_frag(dk[wg, c]); blk_v = from_frag(dv[wg, c])
                cols = slice(c * 64, (c + 1) * 64)
                nk = max(0, min(64, sk - n0 - key0))
                if nk > 0:
                    dk_out[n0 + key0:n0 + key0 + nk, cols] += blk_k[:nk] * scale
                    dv_out[n0 + key0:n0 + key0 + nk, cols] += blk_v[:nk]
    dq_out = dq_acc.transpose(1, 0, 2) * scale
    err = lambda a, b: np.abs(a - b).max() / max(1e-6, np.abs(b).max())
    return err(dq_out, dq_ref), err(dk_out, dk_ref), err(dv_out, dv_ref)


if __name__ == "__main__":
    cases = [(64, 64, 128, False, -1, -1, 1), (64, 100, 200, True, -1, -1, 2), (128, 64, 128, False, -1, -1, 1),
             (128, 130, 190, True, -1, -1, 1), (128, 200, 300, True, 40, -1, 2), (64, 3, 1, False, -1, -1, 1)]
    cases = [c + (0.0,) for c in cases]
    # softcap with rows past the end of the last row block (the zero-filled lse/delta/Q/dO rows
    # give P = 1 there, and must still add nothing), and a window whose first key block no row
    # sees (iters == 0: dK, dV of that block are zero).
    cases += [(128, 70, 150, False, -1, -1, 1, 30.0), (64, 100, 200, True, -1, -1, 2, 20.0),
              (128, 90, 200, True, 24, -1, 2, 15.0), (64, 64, 300, False, 10, 5, 1, 0.0)]
    worst = 0.0
    for D, sq, sk, causal, left, right, hr, cap in cases:
        r = run(D, sq, sk, causal, left, right, hr, softcap=cap)
        worst = max(worst, *r)
        print(D, sq, sk, causal, left, right, hr, cap, ["%.1e" % x for x in r])
        sys.stdout.flush()
    print("worst relative error", worst)
    sys.exit(0 if worst < 1e-2 else 1)
