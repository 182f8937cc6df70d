#!/usr/bin/env python3
"""Forward shapes against flashkit.testing's float32 reference, a quick device smoke check before an A/B (fwd_sm90.md:
"176-key tiles", "Half diagonal"): D 96 / 128 (FWD_SMOKE_DIMS), causal and not (S_q = S_k, S_q < S_k, S_q > S_k), odd
sizes, GQA, varlen with empty sequences, fp16 and bf16; prints the max error per case and exits 1 on a
miss (a fixed 2e-2 bound, looser than SPEC §3: the GPU tests apply that)."""
import os
import sys

import torch

import flashkit
from flashkit.testing.reference import attention_reference, attention_varlen_reference


def main():
    torch.manual_seed(0)
    bad = 0
    dims = [int(x) for x in os.environ.get("FWD_SMOKE_DIMS", "128 96").split()]
    for dt, d, causal in [(x, y, z) for x in (torch.bfloat16, torch.float16) for y in dims
                          for z in (False, True)]:
        for (b, sq, sk, hq, hkv) in [(1, 1, 1, 2, 2), (2, 3, 3, 2, 2), (1, 177, 177, 2, 1), (2, 1000, 1000, 4, 4),
                                     (1, 512, 352, 2, 2), (1, 300, 5000, 4, 1), (3, 2048, 2048, 2, 2),
                                     (1, 128, 176, 2, 2), (1, 129, 175, 2, 2), (1, 200, 64, 2, 2), (2, 64, 200, 2, 2),
                                     (1, 1000, 1064, 2, 2), (1, 1064, 1000, 2, 2), (2, 256, 256, 2, 2)]:
            q = torch.randn(b, sq, hq, d, device="cuda", dtype=dt)
            k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
            v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
            out = flashkit.attention(q, k, v, causal=causal)
            r, _ = attention_reference(q, k, v, causal=causal)
            err = (out.float() - r).abs().max().item()
            ok = err < 2e-2 and torch.isfinite(out).all().item()
            bad += not ok
            print(f"{'ok  ' if ok else 'MISS'} {dt} D {d} causal {causal} dense {(b, sq, sk, hq, hkv)} max err {err:.2e}")
        # varlen with an empty sequence and lengths that leave partial 176-key tiles
        lq, lk = [5, 0, 700, 333, 1], [400, 3, 0, 1000, 177]
        cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), device="cuda", dtype=torch.int32)
        ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), device="cuda", dtype=torch.int32)
        q = torch.randn(sum(lq), 4, d, device="cuda", dtype=dt)
        k = torch.randn(sum(lk), 2, d, device="cuda", dtype=dt)
        v = torch.randn(sum(lk), 2, d, device="cuda", dtype=dt)
        out = flashkit.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal)
        r, _ = attention_varlen_reference(q, k, v, cq, ck, causal=causal)
        err = (out.float() - r).abs().max().item()
        ok = err < 2e-2 and torch.isfinite(out).all().item()
        bad += not ok
        print(f"{'ok  ' if ok else 'MISS'} {dt} D {d} causal {causal} varlen {lq} / {lk} max err {err:.2e}")
    print("FAILED" if bad else "all ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
