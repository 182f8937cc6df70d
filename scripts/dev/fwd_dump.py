"""Forward outputs of a fixed set of shapes, saved or compared bitwise: run once per build
(e.g. FLASHKIT_FWD_WIDE_WGMMA=1 and =0) to show two kernel variants compute the same bits.

    python3 scripts/dev/fwd_dump.py save OUT.pt        python3 scripts/dev/fwd_dump.py compare OUT.pt
Also checks every output against a float32 reference (max abs error) so a saved file is known good.
FWD_DUMP_MODS=1: the same shapes with a sliding window and with a softcap instead (the kMods
instantiations: causal rows with window (300, -1), the others (200, 100) and, separately, a
softcap of 20 on scores scaled up 4x).
"""
import os
import sys

import torch

import flashkit


MODS = os.environ.get("FWD_DUMP_MODS") == "1"


def cases():
    for dt in (torch.bfloat16, torch.float16):
        for d in (64, 96, 128, 192, 256):
            for (b, s_q, s_k, hq, hkv) in ((2, 1, 1, 4, 4), (2, 100, 100, 4, 2), (1, 1000, 1000, 4, 4),
                                           (1, 2048, 2048, 2, 1), (2, 128, 4000, 4, 4)):
                for causal in (False, True):
                    if not MODS:
                        yield dt, d, b, s_q, s_k, hq, hkv, causal, (-1, -1), 0.0
                    else:
                        yield dt, d, b, s_q, s_k, hq, hkv, causal, ((300, -1) if causal else (200, 100)), 0.0
                        yield dt, d, b, s_q, s_k, hq, hkv, causal, (-1, -1), 20.0


def main():
    mode, path = sys.argv[1], sys.argv[2]
    outs, worst = {}, 0.0
    for i, (dt, d, b, s_q, s_k, hq, hkv, causal, window, cap) in enumerate(cases()):
        g = torch.Generator(device="cuda").manual_seed(1000 + i)
        q = (torch.randn((b, s_q, hq, d), device="cuda", generator=g) * (4.0 if cap else 1.0)).to(dt)
        k = torch.randn((b, s_k, hkv, d), device="cuda", generator=g).to(dt)
        v = torch.randn((b, s_k, hkv, d), device="cuda", generator=g).to(dt)
        mods = {"window": window, "softcap": cap} if MODS else {}
        o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **mods)
        key = f"{dt}-d{d}-b{b}-{s_q}x{s_k}-h{hq}/{hkv}-c{int(causal)}-w{window}-cap{cap}"
        outs[key] = (o.cpu(), lse.cpu())
        rep = hq // hkv
        kf = k.float().repeat_interleave(rep, dim=2)
        vf = v.float().repeat_interleave(rep, dim=2)
        sc = torch.einsum("bqhd,bkhd->bhqk", q.float(), kf) * d ** -0.5
        if cap:
            sc = cap * torch.tanh(sc / cap)
        left, right = window
        if causal:
            right = 0
        if causal or left >= 0 or right >= 0:
            i_ = torch.arange(s_q, device="cuda")[:, None] + (s_k - s_q)
            j_ = torch.arange(s_k, device="cuda")[None, :]
            m = torch.ones(s_q, s_k, device="cuda", dtype=torch.bool)
            if right >= 0:
                m &= j_ <= i_ + right
            if left >= 0:
                m &= j_ >= i_ - left
            sc = sc.masked_fill(~m, float("-inf"))
        p = torch.softmax(sc, dim=-1).nan_to_num(0.0)
        ref = torch.einsum("bhqk,bkhd->bqhd", p, vf)
        err = (o.float() - ref).abs().max().item()
        worst = max(worst, err)
        assert err < (5e-2 if cap else 2e-2), f"{key}: max abs error {err}"
    if mode == "save":
        torch.save(outs, path)
        print(f"saved {len(outs)} outputs, worst max abs error vs fp32 {worst:.2e}")
    else:
        ref = torch.load(path)
        diff = [k for k in outs if not (torch.equal(outs[k][0], ref[k][0]) and torch.equal(outs[k][1], ref[k][1]))]
        print(f"compared {len(outs)} outputs: {len(outs) - len(diff)} bitwise equal; worst max abs error {worst:.2e}")
        for k in diff[:20]:
            print("  differs:", k, (outs[k][0].float() - ref[k][0].float()).abs().max().item())
        sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
