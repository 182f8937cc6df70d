#!/usr/bin/env python3
"""A few tiny flashkit attention calls, for NVIDIA compute-sanitizer.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \\
        python scripts/sanitize_small.py
    (same with --tool racecheck; scripts/gpu_suite.sh runs both)

PYTORCH_NO_CUDA_MEMORY_CACHING=1 gives every tensor its own cudaMalloc, so memcheck sees
a read or write past the end of any tensor (with PyTorch's caching allocator it would land
in the same pool block and go unnoticed). Sizes are odd (S = 1, 3, 17) so every tile is
partial. Only the flashkit kernels, the input generation and the copies run on the GPU:
the reference and PyTorch's baseline are computed on the CPU.

Cases: fp16 and bf16 x D 64, 128, 256 x causal or not; MHA and GQA; S_q < S_k and
S_q > S_k (rows that see no key); S_k = 0; several partial tiles (S 67/300); a varlen
batch with empty q and k sequences; strided (non-contiguous) q/k/v; sliding windows and
softcaps (the window/softcap kernel instantiations: left bounds that skip key tiles,
two-sided, one key per row, with and without causal, dense and varlen); and varlen calls with
wrong cu_seqlens (``flashkit.testing.bad_index``: decreasing, negative, past the end of
q/k, not starting at 0 / ending at the rows, longer than max_seqlen_q/k, huge values),
each checked against its contract (no write outside out/lse, outputs as specified, the
device error bits) and once more in check mode (the ValueError, nothing written).
``--quick`` keeps two dense shapes, two window/softcap cases and no wrong-index case (for
racecheck, which is slow);
``--bad-index-only`` runs only the wrong-index cases. Each result is checked like the GPU tests (SPEC §3 rule,
LSE, every element written). Exit status 0 when all pass, 1 otherwise, 2 when it cannot
run (no torch / CUDA / flashkit).
"""

from __future__ import annotations

import argparse
import sys
import traceback

DIMS = (64, 128, 256)
# (B, S_q, S_k, H_q, H_kv): single token, tiny MHA, GQA with S_q < S_k, GQA with
# S_q > S_k (first rows see no key), square 17, no keys at all, and several partial
# tiles of keys (pipelined loads: what racecheck needs) and of queries.
DENSE_SHAPES = [(1, 1, 1, 2, 2), (2, 3, 3, 2, 2), (1, 3, 17, 4, 1), (2, 17, 3, 4, 2),
                (1, 17, 17, 8, 2), (1, 3, 0, 2, 1), (1, 67, 300, 4, 2), (1, 300, 67, 2, 1)]
QUICK_SHAPES = [(2, 17, 3, 4, 2), (1, 67, 300, 4, 2)]
VARLEN_LENS = ([3, 0, 17, 1, 5, 130], [17, 5, 0, 1, 3, 290])
# (shape, window, softcap), run with causal and without (causal clips the right bound to
# 0): a left bound past several key tiles (S_k 300), a two-sided window with S_q > S_k, one
# key per row, a right bound only; softcaps of 5 and 30 on scores of std ~3.
WINDOW_CASES = [((1, 67, 300, 4, 2), (5, -1), 0.0), ((1, 300, 67, 2, 1), (64, 3), 5.0),
                ((2, 17, 3, 4, 2), (0, 0), 30.0), ((1, 130, 130, 2, 2), (-1, 9), 0.0)]
QUICK_WINDOW_CASES = WINDOW_CASES[:2]
VARLEN_WINDOW = ((2, -1), 5.0)
SOFTCAP_QMUL = 3.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    p.add_argument("--dims", nargs="+", type=int, default=list(DIMS))
    p.add_argument("--quick", action="store_true",
                   help=f"dense shapes {QUICK_SHAPES} only (+ varlen, strided): for racecheck")
    p.add_argument("--bad-index-only", action="store_true",
                   help="only the varlen calls with wrong cu_seqlens (flashkit.testing.bad_index)")
    args = p.parse_args(argv)

    try:
        import torch

        import flashkit
        from flashkit.testing import (attention_pytorch, attention_reference,
                                      attention_varlen_pytorch, attention_varlen_reference,
                                      bad_index, check_close, check_lse, check_written, poison_)
    except ImportError as e:
        print(f"sanitize_small: cannot import torch/flashkit: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sanitize_small: no CUDA device", file=sys.stderr)
        return 2
    if flashkit._C is None:
        print(f"sanitize_small: flashkit._C missing: {flashkit._C_IMPORT_ERROR}", file=sys.stderr)
        return 2

    compiled = set(flashkit.compiled_fwd_variants())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    stream = torch.cuda.current_stream().cuda_stream
    failures, ran = [], 0

    def randn(shape, dtype):
        return torch.randn(shape, dtype=dtype, device="cuda", generator=gen)

    def cpu(*ts):
        return [t.cpu() for t in ts]

    def check(label, out, lse, out_ref, lse_ref, out_pt):
        nonlocal ran
        ran += 1
        torch.cuda.synchronize()
        results = [check_written(out, out_ref), check_close(out.cpu(), out_ref, out_pt),
                   check_lse(lse, lse_ref)]
        bad = [r.message for r in results if not r.ok]
        print(f"{'ok  ' if not bad else 'FAIL'} {label}" + "".join(f"\n     {m}" for m in bad),
              flush=True)
        if bad:
            failures.append(label)

    def name(dtype):
        return str(dtype).removeprefix("torch.")

    def dense(dtype, D, causal, shape, layout, window=(-1, -1), softcap=0.0):
        B, S_q, S_k, H_q, H_kv = shape
        if layout == "contiguous":
            q = randn((B, S_q, H_q, D), dtype)
            k = randn((B, S_k, H_kv, D), dtype)
            v = randn((B, S_k, H_kv, D), dtype)
        else:  # heads of twice-as-wide tensors, and padded head dims
            q = randn((B, S_q, 2 * H_q, D), dtype)[:, :, 1::2]
            k = randn((B, S_k, H_kv, D + 8), dtype)[..., :D]
            v = randn((B, H_kv, S_k, D), dtype).transpose(1, 2)
        if softcap:
            q = q * SOFTCAP_QMUL
        mods = dict(window=window, softcap=softcap)
        out = poison_(torch.empty((B, S_q, H_q, D), dtype=dtype, device="cuda"))
        lse = poison_(torch.empty((B, H_q, S_q), dtype=torch.float32, device="cuda"))
        flashkit._C.attention_fwd(q, k, v, out, lse=lse, causal=causal, stream=stream,
                                  window_left=window[0], window_right=window[1],
                                  softcap=softcap)
        qc, kc, vc = cpu(q, k, v)
        out_ref, lse_ref = attention_reference(qc, kc, vc, causal=causal,
                                               compute_dtype=torch.float64, **mods)
        out_pt = attention_pytorch(qc, kc, vc, causal=causal, **mods)
        extra = (f" window {window} softcap {softcap:g}"
                 if window != (-1, -1) or softcap else "")
        check(f"{name(dtype)} D{D} causal={causal} {layout} B{B} S_q{S_q} S_k{S_k} "
              f"H{H_q}/{H_kv}{extra}", out, lse, out_ref, lse_ref, out_pt)

    def varlen(dtype, D, causal, window=(-1, -1), softcap=0.0):
        lens_q, lens_k = VARLEN_LENS
        H_q, H_kv = 4, 2
        mods = dict(window=window, softcap=softcap)
        q = randn((sum(lens_q), H_q, D), dtype) * (SOFTCAP_QMUL if softcap else 1.0)
        k = randn((sum(lens_k), H_kv, D), dtype)
        v = randn((sum(lens_k), H_kv, D), dtype)
        cu_q = torch.tensor([0] + [sum(lens_q[:i + 1]) for i in range(len(lens_q))],
                            dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0] + [sum(lens_k[:i + 1]) for i in range(len(lens_k))],
                            dtype=torch.int32, device="cuda")
        out = poison_(torch.empty_like(q))
        lse = poison_(torch.empty((H_q, q.shape[0]), dtype=torch.float32, device="cuda"))
        flashkit._C.attention_fwd(q, k, v, out, lse=lse, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                  max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                                  causal=causal, stream=stream, window_left=window[0],
                                  window_right=window[1], softcap=softcap)
        qc, kc, vc, cqc, ckc = cpu(q, k, v, cu_q, cu_k)
        out_ref, lse_ref = attention_varlen_reference(qc, kc, vc, cqc, ckc, causal=causal,
                                                      compute_dtype=torch.float64, **mods)
        out_pt = attention_varlen_pytorch(qc, kc, vc, cqc, ckc, causal=causal, **mods)
        extra = (f" window {window} softcap {softcap:g}"
                 if window != (-1, -1) or softcap else "")
        check(f"{name(dtype)} D{D} causal={causal} varlen q{lens_q} k{lens_k}{extra}",
              out, lse, out_ref, lse_ref, out_pt)

    def bad(case, dtype, D, causal, check_mode):
        nonlocal ran
        run = bad_index.run_check_mode if check_mode else bad_index.run_case
        problems = run(flashkit, torch, case, dtype, D, causal, gen)
        ran += 1
        label = (f"{name(dtype)} D{D} causal={causal} bad cu_seqlens {case.name}"
                 f"{' (check mode)' if check_mode else ''}")
        print(f"{'ok  ' if not problems else 'FAIL'} {label}" +
              "".join(f"\n     {m}" for m in problems), flush=True)
        if problems:
            failures.append(label)

    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for D in args.dims:
            if f"{dtype_name}/{D}" not in compiled:
                print(f"skip {dtype_name}/{D}: not compiled")
                continue
            for causal in (False, True):
                shapes = QUICK_SHAPES if args.quick else DENSE_SHAPES
                cases = [(dense, (dtype, D, causal, s, "contiguous")) for s in shapes]
                cases.append((dense, (dtype, D, causal, (2, 17, 9, 4, 2), "strided")))
                cases.append((varlen, (dtype, D, causal)))
                for shape, window, cap in (QUICK_WINDOW_CASES if args.quick else WINDOW_CASES):
                    cases.append((dense, (dtype, D, causal, shape, "contiguous", window, cap)))
                cases.append((varlen, (dtype, D, causal) + VARLEN_WINDOW))
                if args.bad_index_only:
                    cases = []
                if args.bad_index_only or not args.quick:
                    cases += [(bad, (c, dtype, D, causal, False)) for c in bad_index.CASES]
                    if causal:  # check mode: causal or not makes no difference there
                        cases += [(bad, (c, dtype, D, causal, True)) for c in bad_index.CASES]
                for fn, fn_args in cases:
                    try:
                        fn(*fn_args)
                    except Exception:  # noqa: BLE001 - report and go on with the others
                        ran += 1
                        failures.append(repr(fn_args))
                        print(f"FAIL {fn.__name__}{fn_args}:\n{traceback.format_exc()}",
                              flush=True)
    torch.cuda.synchronize()
    print(f"sanitize_small: {ran - len(failures)}/{ran} cases passed")
    if ran == 0:
        print("sanitize_small: nothing ran (no compiled variant selected)", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
