#!/usr/bin/env python3
"""A few small MLA decode calls for NVIDIA compute-sanitizer (memcheck, racecheck).

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \\
        python scripts/sanitize_mla.py               (scripts/gpu_suite.sh runs it)

Every tensor has its own cudaMalloc, so a read or write past any tensor is seen. Cases:
bf16/fp16; h_q 16 and 72 (two m-blocks, a partial one) with h_kv 1 and 2; s_q 1 and 3
causal; page sizes 1, 16 and 64 with a permuted block table and NaN in every unused slot;
lengths 0, 1, 63, 65 and a sequence split over many parts (metadata + split + combine); pages of
16 and 32 tokens with consecutive ids (the Hopper kernel's one-copy runs at page 16, bf16, in --quick too); the
FP8 cache (FlashMLA's layout, 0xFF bytes in unused slots) with fp16/bf16 q; the
metadata kernel for B = 1 and 3000; out-of-range block ids and lengths (error bits, no
fault). Each result is checked against the float32 reference. ``--quick`` keeps six cases
(one 16-bit and one FP8 per dtype, the two run cases; racecheck is slow). FLASHKIT_MLA_PORTABLE=1 in the environment sanitizes the portable
kernel. Exit 0 when all pass, 1 otherwise, 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import sys
import traceback


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", metavar="TEXT", help="run only the cases whose label contains TEXT")
    args = p.parse_args(argv)
    try:
        import torch

        import flashkit
        import flashkit.mla as flash_mla
        from flashkit.testing import (check_close, check_mla_schedule, mla_pytorch,
                                      mla_reference, mla_schedule_reference, paged_pool)
    except ImportError as e:
        print(f"sanitize_mla: cannot import torch/flashkit: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sanitize_mla: no CUDA device", file=sys.stderr)
        return 2
    gen = torch.Generator(device="cuda")
    gen.manual_seed(4321)

    def case(lens, s_q, h_q, h_kv, page, dtype, runs=False):
        # runs: consecutive page ids per sequence, so its 64-token blocks are runs (the run map)
        num_pages, bt, slots = paged_pool(lens, page, 2, gen, junk=-3, ordered=runs)
        kv = torch.full((num_pages, page, h_kv, 576), float("nan"), dtype=dtype, device="cuda")
        for n, at in zip(lens, slots):
            if at is not None:
                kv[at] = torch.randn((n, h_kv, 576), device="cuda", generator=gen).to(dtype)
        q = torch.randn((len(lens), s_q, h_q, 576), device="cuda", generator=gen).to(dtype)
        return q, kv, bt, torch.tensor(lens, dtype=torch.int32, device="cuda")

    def fp8(q, kv, bt, sl):
        """The same case over the FP8 cache (0xFF bytes where kv holds NaN)."""
        kv8 = torch.full((*kv.shape[:3], 656), 0xFF, dtype=torch.uint8, device="cuda")
        ok = ~torch.isnan(kv).any(-1)
        kv8[ok] = flash_mla.quantize_kv_cache_fp8(kv[ok])
        return q, kv8, bt, sl

    def run(label, q, kv, bt, sl, causal=True, expect=0, compare=True):
        flashkit.device_errors(clear=True)
        s_q, h_q, h_kv = q.shape[1], q.shape[2], kv.shape[2]
        sched, splits = flash_mla.get_mla_metadata(sl, s_q * h_q // h_kv, h_kv)
        is_fp8 = kv.dtype == torch.uint8
        out, lse = flash_mla.flash_mla_with_kvcache(q, kv, bt, sl, 512, sched, splits, causal=causal,
                                                    is_fp8_kvcache=is_fp8)
        torch.cuda.synchronize()
        bits = flashkit.device_errors(clear=True)
        assert bits == expect, f"{label}: device error bits {bits:#x}, expected {expect:#x}"
        if is_fp8:
            kv = flash_mla.dequantize_kv_cache_fp8(kv, q.dtype)
        if compare:
            ref, lse_ref = mla_reference(q, kv, bt, sl, causal)
            res = check_close(out, ref, mla_pytorch(q, kv, bt, sl, causal))
            assert res.ok, f"{label}: {res.message}"
            fin = torch.isfinite(lse_ref)
            assert torch.equal(torch.isposinf(lse), torch.isposinf(lse_ref)), f"{label}: lse +inf rows"
            assert (lse[fin] - lse_ref[fin]).abs().max() < 1e-2 if fin.any() else True, f"{label}: lse"
        else:
            assert not torch.isnan(out).any(), f"{label}: NaN output"

    def metadata(label, lens, parts):
        sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
        sched = torch.empty((parts, 8), dtype=torch.int32, device="cuda")
        splits = torch.empty((len(lens) + 1,), dtype=torch.int32, device="cuda")
        flashkit._C.mla_metadata(sl, sched, splits, torch.cuda.current_stream().cuda_stream)
        ref = mla_schedule_reference(lens, parts)
        assert (sched.tolist(), splits.tolist()) == (ref[0], ref[1]), f"{label}: differs from the mirror"
        check_mla_schedule(lens, sched.tolist(), splits.tolist())

    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        cases.append((f"{dtype} h16 s_q1 page16", lambda d=dtype: run(
            "a", *case([0, 1, 63, 65, 3000], 1, 16, 1, 16, d), causal=False)))
        cases.append((f"{dtype} FP8 cache h16 s_q2 page16 causal", lambda d=dtype: run(
            "fp8", *fp8(*case([0, 1, 63, 65, 2000], 2, 16, 1, 16, d)))))
        if dtype == torch.bfloat16:
            cases.append(("bf16 FP8 cache h128 s_q2 page64 causal (Hopper: the converters)", lambda d=dtype: run(
                "fp8-64", *fp8(*case([0, 1, 63, 65, 2000], 2, 128, 1, 64, d)))))
            cases.append(("bf16 h16 s_q1 page16 runs", lambda d=dtype: run(
                "runs16", *case([0, 1, 63, 65, 130, 3000], 1, 16, 1, 16, d, runs=True), causal=False)))
            cases.append(("bf16 h128 s_q2 page32 runs causal", lambda d=dtype: run(
                "runs32", *case([64, 100, 1500], 2, 128, 1, 32, d, runs=True))))
        # 16 and 32 query rows per KV head at pages of 64 and 128 tokens (the narrow kernel was measured on
        # these: branch wip/mla-narrow, mla.md "A transposed kernel for few rows")
        if dtype == torch.bfloat16:
            cases.append(("bf16 h16 s_q1 page64 (16 rows per KV head)", lambda d=dtype: run(
                "n16", *case([0, 1, 63, 65, 130, 3000], 1, 16, 1, 64, d), causal=False)))
        else:
            cases.append(("fp16 h16 s_q2 page128 causal (32 rows per KV head)", lambda d=dtype: run(
                "n32", *case([0, 1, 64, 129, 2000], 2, 16, 1, 128, d))))
        if args.quick:
            continue
        cases.append((f"{dtype} h72x2 s_q3 page1 causal", lambda d=dtype: run(
            "b", *case([2, 40, 130], 3, 72, 2, 1, d))))
        cases.append((f"{dtype} h16 one long sequence (many splits)", lambda d=dtype: run(
            "c", *case([50000], 1, 16, 1, 64, d))))
    if not args.quick:
        cases.append(("metadata B=1", lambda: metadata("m1", [12345], 16)))
        cases.append(("metadata B=3000", lambda: metadata("m2", [(i * 37) % 900 for i in range(3000)], 66)))

        def bad(lens, page, bad_block, tag):
            """Out-of-range block ids (one past the pool at block `bad_block` of sequence 1, -1 at block 0 of
            sequence 0), then bad lengths (negative, past the table): the error bits, never a fault."""
            q, kv, bt, sl = case(lens, 1, 16, 1, page, torch.bfloat16)
            bt[1, bad_block] = kv.shape[0] + 9
            bt[0, 0] = -1
            run(f"bad ids{tag}", q, kv, bt, sl, causal=False, expect=4, compare=False)
            sl2 = sl.clone()
            sl2[0] = -5
            sl2[1] = bt.shape[1] * page + 77
            run(f"bad lengths{tag}", q, kv, bt, sl2, causal=False, expect=4 | 8, compare=False)
        cases.append(("bad block ids / lengths", lambda: bad([200, 500], 16, 3, "")))
        # page 64, 16 rows: the whole-box kernel's checks
        cases.append(("bad block ids / lengths (page 64)", lambda: bad([300, 700], 64, 2, " page64")))

    failed = 0
    if args.only:
        cases = [c for c in cases if args.only in c[0]]
    for label, fn in cases:
        try:
            fn()
            print(f"ok      {label}")
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAILED  {label}")
            traceback.print_exc()
    torch.cuda.synchronize()
    print(f"sanitize_mla: {len(cases) - failed} of {len(cases)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
