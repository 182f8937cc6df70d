#!/usr/bin/env python3
"""A few tiny paged-decode calls for NVIDIA compute-sanitizer (memcheck, racecheck).

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \\
        python scripts/sanitize_decode.py            (scripts/gpu_suite.sh runs it)

Every tensor has its own cudaMalloc (no caching pool), so a read or write past any tensor is
seen. Cases: fp16/bf16 x D 64/128/256; GQA 1, 4 and 16 (32-row items); s_q 1 and 3 causal;
page sizes 1, 16 and 48 with a permuted block table and NaN in every unused slot; lengths
0, 1, page +- 1 and a split sequence (plan + split + combine); out-of-range block ids and
lengths (the kernels must skip them: error bits, no fault); append_kv with a bad slot; a
fixed split size. Each result is checked against the float64 reference. ``--quick`` keeps
two cases per dtype (racecheck is slow). Exit 0 when all pass, 1 otherwise, 2 when it
cannot run.
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    try:
        import torch

        import flashkit
        from flashkit.testing import check_close, check_lse, decode_pytorch, decode_reference
    except ImportError as e:
        print(f"sanitize_decode: cannot import torch/flashkit: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sanitize_decode: no CUDA device", file=sys.stderr)
        return 2
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)

    def case(lens, s_q, h_q, h_kv, d, page, dtype):
        pages_per = [max(1, math.ceil(n / page)) for n in lens]
        num_pages = sum(pages_per) + 2
        k = torch.full((num_pages, page, h_kv, d), float("nan"), dtype=dtype, device="cuda")
        v = torch.full_like(k, float("nan"))
        perm = torch.randperm(num_pages, device="cuda", generator=gen).int()
        bt = torch.full((len(lens), max(pages_per) + 1), -3, dtype=torch.int32, device="cuda")
        i = 0
        for b, n in enumerate(lens):
            bt[b, :pages_per[b]] = perm[i:i + pages_per[b]]
            i += pages_per[b]
            if n:
                pos = torch.arange(n, device="cuda")
                pg = bt[b].long()[pos // page]
                k[pg, pos % page] = torch.randn((n, h_kv, d), device="cuda", generator=gen).to(dtype)
                v[pg, pos % page] = torch.randn((n, h_kv, d), device="cuda", generator=gen).to(dtype)
        q = torch.randn((len(lens), s_q, h_q, d), device="cuda", generator=gen).to(dtype)
        return q, k, v, bt, torch.tensor(lens, dtype=torch.int32, device="cuda")

    def run(label, q, k, v, bt, sl, causal=True, split_size=0, expect=0, compare=True):
        flashkit.device_errors(clear=True)
        out, lse = flashkit.decode(q, k, v, bt, sl, causal=causal, return_lse=True,
                                   split_size=split_size)
        torch.cuda.synchronize()
        bits = flashkit.device_errors(clear=True)
        assert bits == expect, f"{label}: device error bits {bits:#x}, expected {expect:#x}"
        if compare:
            ref, lse_ref = decode_reference(q, k, v, bt, sl, causal)
            res = check_close(out, ref, decode_pytorch(q, k, v, bt, sl, causal))
            assert res.ok, f"{label}: {res.message}"
            res = check_lse(lse, lse_ref)
            assert res.ok, f"{label}: {res.message}"
        else:
            assert torch.isfinite(out).all(), f"{label}: non-finite output"

    cases = []
    for dtype in (torch.float16, torch.bfloat16):
        for d in ((128,) if args.quick else (64, 128, 256)):
            cases.append((f"basic d{d}", dtype, d, dict(lens=[0, 1, 15, 17, 700], s_q=1, h_q=8,
                                                        h_kv=2, d=d, page=16), {}))
            if not args.quick:
                cases.append((f"sq3 gqa16 d{d}", dtype, d, dict(lens=[3, 40, 1300], s_q=3, h_q=16,
                                                                 h_kv=1, d=d, page=48), {}))
                cases.append((f"page1 mha d{d}", dtype, d, dict(lens=[2, 33, 520], s_q=1, h_q=4,
                                                                 h_kv=4, d=d, page=1), {}))
                cases.append((f"fixed split d{d}", dtype, d, dict(lens=[5, 900], s_q=2, h_q=8,
                                                                   h_kv=2, d=d, page=16),
                              dict(split_size=128)))
        cases.append(("split sequence", dtype, 128, dict(lens=[30000], s_q=1, h_q=8, h_kv=2,
                                                         d=128, page=16), {}))
        # 4 splits of 512 tokens, merged by the last split CTA (fused merge), beside 6, which the
        # combine kernel merges (the fused merge takes at most 4: api/decode.cpp kFusedMaxSplits)
        cases.append(("fused merge", dtype, 128, dict(lens=[2000, 3000, 5], s_q=1, h_q=8, h_kv=2,
                                                      d=128, page=16), dict(split_size=512)))
    ran, failures = 0, []
    for label, dtype, d, shape, kw in cases:
        ran += 1
        try:
            q, k, v, bt, sl = case(dtype=dtype, **shape)
            run(f"{label} {dtype}", q, k, v, bt, sl, **kw)
        except Exception:  # noqa: BLE001
            failures.append(label)
            print(f"FAIL {label} {dtype}:\n{traceback.format_exc()}", flush=True)
    # Quantized caches (int8 / fp8 e4m3): quantize-on-append, then decode, against the
    # reference on the dequantized cache.
    for kind, kvd in (("int8", torch.int8), ("fp8", torch.float8_e4m3fn)):
        for d in ((128,) if args.quick else (64, 128, 256)):
            ran += 1
            label = f"quantized {kind} d{d}"
            try:
                q, k, v, bt, sl = case([0, 1, 17, 300], 2, 8, 2, d, 16, torch.bfloat16)
                P, page, H, _ = k.shape
                kq = torch.full((P, page, H, d), 0x7F, dtype=torch.uint8, device="cuda").view(kvd)
                vq = torch.full_like(kq, 0)
                ks = torch.full((P, page, H), float("nan"), device="cuda")
                vs = torch.full_like(ks, float("nan"))
                for b in range(q.shape[0]):
                    n = int(sl[b])
                    if n:
                        pos = torch.arange(n, device="cuda")
                        pg = bt[b].long()[pos // page]
                        flashkit.append_kv(kq, vq, k[pg, pos % page].unsqueeze(0).contiguous(),
                                           v[pg, pos % page].unsqueeze(0).contiguous(), bt[b:b + 1],
                                           sl[b:b + 1], k_scale=ks, v_scale=vs)
                out, lse = flashkit.decode(q, kq, vq, bt, sl, return_lse=True, k_scale=ks, v_scale=vs)
                torch.cuda.synchronize()
                assert flashkit.device_errors(clear=True) == 0
                kf = torch.nan_to_num(kq.float() * ks[..., None])
                vf = torch.nan_to_num(vq.float() * vs[..., None])
                ref, lse_ref = decode_reference(q.float(), kf, vf, bt, sl)
                res = check_close(out, ref, decode_pytorch(q, kf.to(q.dtype), vf.to(q.dtype), bt, sl))
                assert res.ok, f"{label}: {res.message}"
            except Exception:  # noqa: BLE001
                failures.append(label)
                print(f"FAIL {label}:\n{traceback.format_exc()}", flush=True)
    # Index data that must never be dereferenced: bad block ids, bad lengths, bad append slot.
    try:
        ran += 1
        q, k, v, bt, sl = case([100, 300], 1, 8, 2, 128, 16, torch.bfloat16)
        bad = bt.clone()
        bad[0, 2] = k.shape[0] + 1000
        bad[1, 5] = -100000
        run("bad block ids", q, k, v, bad, sl, causal=False, expect=4, compare=False)
        ran += 1
        big = torch.tensor([-5, 2 ** 31 - 1], dtype=torch.int32, device="cuda")
        k.nan_to_num_(0.5)
        v.nan_to_num_(0.5)
        run("bad lengths", q, k, v, bt, big, causal=False, expect=8 | 4, compare=False)
        ran += 1
        flashkit.device_errors(clear=True)
        kn = torch.randn((2, 1, 2, 128), device="cuda", generator=gen).to(torch.bfloat16)
        flashkit.append_kv(k, v, kn, kn.clone(), bt, torch.tensor([2 ** 30, 7], dtype=torch.int32,
                                                                    device="cuda"))
        torch.cuda.synchronize()
        assert flashkit.device_errors(clear=True) == 16
    except Exception:  # noqa: BLE001
        failures.append("bad index data")
        print(f"FAIL bad index data:\n{traceback.format_exc()}", flush=True)
    torch.cuda.synchronize()
    print(f"sanitize_decode: {ran - len(failures)}/{ran} cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
