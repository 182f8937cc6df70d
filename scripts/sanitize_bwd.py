#!/usr/bin/env python3
"""A few tiny flashkit attention backward calls, for NVIDIA compute-sanitizer.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \\
        python scripts/sanitize_bwd.py
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool racecheck --error-exitcode 1 \\
        python scripts/sanitize_bwd.py --quick

PYTORCH_NO_CUDA_MEMORY_CACHING=1 gives every tensor its own cudaMalloc, so memcheck sees a
read or write past the end of any tensor, the workspace included (with PyTorch's caching
allocator it would land in the same pool block and go unnoticed). Sizes are odd (S = 1, 3,
17, 67, 300) so every tile is partial. On the GPU run only flashkit's forward (for out and
lse) and backward kernels, the input generation and the copies: the reference gradients
(float64) and PyTorch's baseline are computed on the CPU.

Cases: fp16 and bf16 x D 64, 96, 128, 192, 256 (``--dims``) x causal or not x the fast and the
deterministic mode; MHA, GQA and MQA; S_q < S_k and S_q > S_k (rows that see no key);
S_k = 0 and S_q = 0; several partial tiles (S 67/300); a varlen batch with empty q and k
sequences; strided q/k/v/dout and strided dq/dk/dv views; sliding windows and softcaps
(a left bound past several key blocks, two-sided with S_q > S_k, one key per row with keys
no row sees, dense and varlen; with and without causal). Every call goes through
``flashkit._C.attention_bwd`` with dq/dk/dv poisoned with NaN and a workspace of exactly
the size asked for, filled with garbage. Each result is checked like the GPU tests (every
element written, SPEC §3 rule against the float64 reference). ``--quick`` keeps two dense
shapes, two window/softcap cases, the varlen batches and the strided case (for racecheck,
which is slow). After each case the device error word must be clear: every input here is
valid and every grid fits, so a set bit is a failure (DET_ORDER: a deterministic walk gave up
waiting for a turn). ``--allow-det-order`` only reports DET_ORDER, for sanitizer runs, where
the tool's slowdown can stretch a legitimate wait past the kernels' give-up time. Exit status 0
when all pass, 1 otherwise, 2 when it cannot run (no torch / CUDA / flashkit).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

# every head dim of the Hopper family (D 96 / 192 on padded tiles since 2026-11-28, whose racecheck found the
# portable copies' duplicate writes: tile_copy.cuh)
DIMS = (64, 96, 128, 192, 256)
# (B, S_q, S_k, H_q, H_kv): single token, tiny MHA, GQA with S_q < S_k, GQA with S_q > S_k
# (first rows see no key), MQA, no keys, no queries (dk/dv must still be written), and
# several partial tiles of keys and of queries (what racecheck needs).
DENSE_SHAPES = [(1, 1, 1, 2, 2), (2, 3, 3, 2, 2), (1, 3, 17, 4, 1), (2, 17, 3, 4, 2),
                (1, 17, 17, 8, 1), (1, 3, 0, 2, 1), (2, 0, 5, 2, 1), (1, 67, 300, 4, 2),
                (1, 300, 67, 2, 1)]
QUICK_SHAPES = [(2, 17, 3, 4, 2), (1, 67, 300, 4, 2)]
VARLEN_LENS = ([3, 0, 17, 1, 5, 130], [17, 5, 0, 1, 3, 290])
# (shape, window, softcap), with causal and without: a left bound past several key blocks,
# two-sided with S_q > S_k (rows without keys), one key per row (keys no row sees: zero
# dk/dv), a right bound only; softcaps on scores of std ~2.
WINDOW_CASES = [((1, 67, 300, 4, 2), (5, -1), 0.0), ((1, 300, 67, 2, 1), (64, 3), 5.0),
                ((1, 17, 40, 4, 1), (0, 0), 30.0), ((1, 130, 130, 2, 2), (-1, 9), 0.0)]
QUICK_WINDOW_CASES = WINDOW_CASES[:2]
VARLEN_WINDOW = ((2, -1), 5.0)
SOFTCAP_QMUL = 2.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    p.add_argument("--dims", nargs="+", type=int, default=list(DIMS))
    p.add_argument("--quick", action="store_true",
                   help=f"dense shapes {QUICK_SHAPES} only (+ varlen, strided): for racecheck")
    p.add_argument("--allow-det-order", action="store_true",
                   help="report DET_ORDER device errors instead of failing (sanitizer runs)")
    args = p.parse_args(argv)

    try:
        import torch

        import flashkit
        from flashkit.testing import (attention_backward_pytorch,
                                      attention_backward_reference,
                                      attention_varlen_backward_pytorch,
                                      attention_varlen_backward_reference, check_close,
                                      check_written, poison_)
    except ImportError as e:
        print(f"sanitize_bwd: cannot import torch/flashkit: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sanitize_bwd: no CUDA device", file=sys.stderr)
        return 2
    if flashkit._C is None:
        print(f"sanitize_bwd: flashkit._C missing: {flashkit._C_IMPORT_ERROR}", file=sys.stderr)
        return 2

    C = flashkit._C
    compiled = set(flashkit.compiled_fwd_variants())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(4321)
    stream = torch.cuda.current_stream().cuda_stream
    failures, ran = [], 0
    # seconds in the CPU reference and baseline (copies included) and in the checks: the summary line reports them
    # with the total, to see where a slow run goes (the GPU test file's runs of this script took ~0.5 s a case)
    spent = {"reference": 0.0, "checks": 0.0}
    t_start = time.perf_counter()
    flashkit.device_errors()  # start from a clear error word
    det_order = int(flashkit.DeviceError.DET_ORDER)

    def randn(shape, dtype):
        return torch.randn(shape, dtype=dtype, device="cuda", generator=gen)

    def cpu(*ts):
        return [t.cpu() for t in ts]

    def name(dtype):
        return str(dtype).removeprefix("torch.")

    def workspace(batch, rows_q, max_seqlen_q, q, deterministic):
        size = C.attention_bwd_workspace_size(batch, rows_q, max_seqlen_q, q.shape[-2],
                                              q.shape[-1], deterministic)
        return torch.full((size,), 0xFF, dtype=torch.uint8, device="cuda")  # garbage

    def check(label, grads, ref, pt):
        nonlocal ran
        ran += 1
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        bad = []
        for gname, g, r, b in zip(("dq", "dk", "dv"), grads, ref, pt):
            for res in (check_written(g, r, name=gname), check_close(g.cpu(), r, b, name=gname)):
                if not res.ok:
                    bad.append(res.message)
        bits = flashkit.device_errors()  # synchronizes; clears what it read
        if bits:
            msg = f"device error bits {bits:#x}: {flashkit.describe_device_errors(bits)}"
            if args.allow_det_order and bits == det_order:
                print(f"     (reported, not failed) {msg}", flush=True)
            else:
                bad.append(msg)
        spent["checks"] += time.perf_counter() - t0
        print(f"{'ok  ' if not bad else 'FAIL'} {label}" + "".join(f"\n     {m}" for m in bad),
              flush=True)
        if bad:
            failures.append(label)

    def dense(dtype, D, causal, det, shape, layout, window=(-1, -1), softcap=0.0):
        B, S_q, S_k, H_q, H_kv = shape
        mods = dict(window=window, softcap=softcap)
        if layout == "contiguous":
            q = randn((B, S_q, H_q, D), dtype)
            k = randn((B, S_k, H_kv, D), dtype)
            v = randn((B, S_k, H_kv, D), dtype)
            dout = randn((B, S_q, H_q, D), dtype)
            grads = [poison_(torch.empty_like(t)) for t in (q, k, v)]
        else:  # heads of twice-as-wide tensors, padded head dims, BHSD storage
            q = randn((B, S_q, 2 * H_q, D), dtype)[:, :, 1::2]
            k = randn((B, S_k, H_kv, D + 8), dtype)[..., :D]
            v = randn((B, H_kv, S_k, D), dtype).transpose(1, 2)
            dout = randn((B, H_q, S_q, D), dtype).transpose(1, 2)
            grads = [poison_(torch.empty((B, S_q, H_q, D + 16), dtype=dtype,
                                         device="cuda"))[..., :D],
                     poison_(torch.empty((B, S_k, 2 * H_kv, D), dtype=dtype,
                                         device="cuda"))[:, :, ::2],
                     poison_(torch.empty((B, H_kv, S_k, D), dtype=dtype,
                                         device="cuda")).transpose(1, 2)]
        if softcap:
            q = q * SOFTCAP_QMUL
        out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **mods)
        C.attention_bwd(dout, q, k, v, out, lse, *grads, causal=causal, deterministic=det,
                        workspace=workspace(B, B * S_q, S_q, q, det), stream=stream,
                        window_left=window[0], window_right=window[1], softcap=softcap)
        t0 = time.perf_counter()
        qc, kc, vc, dc = cpu(q, k, v, dout)
        ref = attention_backward_reference(qc, kc, vc, dc, causal=causal,
                                           compute_dtype=torch.float64, **mods)
        pt = attention_backward_pytorch(qc, kc, vc, dc, causal=causal, **mods)
        spent["reference"] += time.perf_counter() - t0
        extra = (f" window {window} softcap {softcap:g}"
                 if window != (-1, -1) or softcap else "")
        check(f"{name(dtype)} D{D} causal={causal} deterministic={det} {layout} B{B} "
              f"S_q{S_q} S_k{S_k} H{H_q}/{H_kv}{extra}", grads, ref, pt)

    def varlen(dtype, D, causal, det, window=(-1, -1), softcap=0.0):
        lens_q, lens_k = VARLEN_LENS
        H_q, H_kv = 4, 2
        mods = dict(window=window, softcap=softcap)
        q = randn((sum(lens_q), H_q, D), dtype) * (SOFTCAP_QMUL if softcap else 1.0)
        k = randn((sum(lens_k), H_kv, D), dtype)
        v = randn((sum(lens_k), H_kv, D), dtype)
        dout = randn((sum(lens_q), H_q, D), dtype)
        cu_q = torch.tensor([0] + [sum(lens_q[:i + 1]) for i in range(len(lens_q))],
                            dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0] + [sum(lens_k[:i + 1]) for i in range(len(lens_k))],
                            dtype=torch.int32, device="cuda")
        mq, mk = max(lens_q), max(lens_k)
        out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=causal,
                                             return_lse=True, **mods)
        grads = [poison_(torch.empty_like(t)) for t in (q, k, v)]
        C.attention_bwd(dout, q, k, v, out, lse, *grads, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                        max_seqlen_q=mq, max_seqlen_k=mk, causal=causal, deterministic=det,
                        workspace=workspace(len(lens_q), q.shape[0], mq, q, det), stream=stream,
                        window_left=window[0], window_right=window[1], softcap=softcap)
        t0 = time.perf_counter()
        qc, kc, vc, dc, cqc, ckc = cpu(q, k, v, dout, cu_q, cu_k)
        ref = attention_varlen_backward_reference(qc, kc, vc, dc, cqc, ckc, causal=causal,
                                                  compute_dtype=torch.float64, **mods)
        pt = attention_varlen_backward_pytorch(qc, kc, vc, dc, cqc, ckc, causal=causal, **mods)
        spent["reference"] += time.perf_counter() - t0
        extra = (f" window {window} softcap {softcap:g}"
                 if window != (-1, -1) or softcap else "")
        check(f"{name(dtype)} D{D} causal={causal} deterministic={det} varlen q{lens_q} "
              f"k{lens_k}{extra}", grads, ref, pt)

    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for D in args.dims:
            if f"{dtype_name}/{D}" not in compiled:
                print(f"skip {dtype_name}/{D}: not compiled")
                continue
            for causal in (False, True):
                for det in (False, True):
                    shapes = QUICK_SHAPES if args.quick else DENSE_SHAPES
                    cases = [(dense, (dtype, D, causal, det, s, "contiguous")) for s in shapes]
                    cases.append((dense, (dtype, D, causal, det, (2, 17, 9, 4, 2), "strided")))
                    cases.append((varlen, (dtype, D, causal, det)))
                    for shape, window, cap in (QUICK_WINDOW_CASES if args.quick
                                               else WINDOW_CASES):
                        cases.append((dense, (dtype, D, causal, det, shape, "contiguous",
                                              window, cap)))
                    cases.append((varlen, (dtype, D, causal, det) + VARLEN_WINDOW))
                    for fn, fn_args in cases:
                        try:
                            fn(*fn_args)
                        except Exception:  # noqa: BLE001 - report and go on with the others
                            ran += 1
                            failures.append(repr(fn_args))
                            print(f"FAIL {fn.__name__}{fn_args}:\n{traceback.format_exc()}",
                                  flush=True)
    torch.cuda.synchronize()
    print(f"sanitize_bwd: {ran - len(failures)}/{ran} cases passed "
          f"({time.perf_counter() - t_start:.1f} s: reference {spent['reference']:.1f} s, "
          f"checks {spent['checks']:.1f} s)")
    if ran == 0:
        print("sanitize_bwd: nothing ran (no compiled variant selected)", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
