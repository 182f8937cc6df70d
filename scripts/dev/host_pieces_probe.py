"""Host time per call of the pieces of a short decode call and a dense forward (no GPU-bound
work: tiny shapes, 300 back-to-back calls, one sync), to find where the microseconds go.

    python3 scripts/dev/host_pieces_probe.py [--out DIR]
"""
import argparse
import inspect

import torch

import flashkit
from flashkit import _torch_decode_ops as tdo
from flashkit import _torch_ops as tops
from host_timing import emit, host_us_per_call  # (scripts/dev, the script's folder)


def _no_out():
    raise TypeError("this tree's DecodePlan.run has no out=")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp")
    a = ap.parse_args()
    dt = torch.bfloat16
    B, S, Hq, Hkv, D, page = 1, 256, 32, 8, 128, 16
    pages = 64
    k = torch.randn(pages, page, Hkv, D, device="cuda", dtype=dt)
    v = torch.randn_like(k)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt)
    bt = torch.arange(S // page, device="cuda", dtype=torch.int32).view(1, -1)
    lens = torch.full((B,), S, device="cuda", dtype=torch.int32)
    plan = flashkit.DecodePlan(B, 1, Hq, Hkv, D, device="cuda", max_seqlen_k=S)
    plan.plan(lens)
    out = torch.empty(B, 1, Hq, D, device="cuda", dtype=dt)
    C = flashkit._C
    stream = torch.cuda.current_stream().cuda_stream
    ws = plan.workspace
    lines = [f"host pieces on {torch.cuda.get_device_name()}, torch {torch.__version__}"]
    rows = [
        ("torch.empty x2", lambda: (torch.empty(B, 1, Hq, D, device="cuda", dtype=dt),
                                    torch.empty(0, device="cuda", dtype=torch.float32))),
        ("torch add (1 launch)", lambda: torch.add(q, q)),
        ("stream query", lambda: tops._raw_stream(0)),
        ("C.decode_run (preallocated)", lambda: C.decode_run(q, k, v, bt, lens, out, None, ws, 0.0, True, 0, S,
                                                             False, False, stream, False, None, None)),
        ("C.decode_run validate_only", lambda: C.decode_run(q, k, v, bt, lens, out, None, ws, 0.0, True, 0, S,
                                                            False, True, stream, False, None, None)),
        ("_decode_run_impl", lambda: tdo._decode_run_impl(q, k, v, bt, lens, ws, True, 0.0, False, plan.split_size,
                                                          plan.max_seqlen_k)),
        ("DecodePlan.run", lambda: plan.run(q, k, v, bt, lens)),
        ("DecodePlan.run return_lse", lambda: plan.run(q, k, v, bt, lens, return_lse=True)),
        # out= exists from 2026-11-27 (eighteenth session); older trees print an error row
        ("DecodePlan.run out=", (lambda: plan.run(q, k, v, bt, lens, out=out)) if "out" in
         inspect.signature(plan.run).parameters else _no_out),
        ("flashkit.decode (plan + run)", lambda: flashkit.decode(q, k, v, bt, lens)),
        ("DecodePlan.plan", lambda: plan.plan(lens)),
    ]
    qd = torch.randn(1, 64, 4, 128, device="cuda", dtype=dt)
    kd, vd = torch.randn_like(qd), torch.randn_like(qd)
    od = torch.empty_like(qd)
    rows += [
        ("flashkit.attention S64 (direct)", lambda: flashkit.attention(qd, kd, vd, causal=True)),
        ("tops._dense", lambda: tops._dense(qd, kd, vd, True, 0.0, False)),
        ("C.attention_fwd (preallocated)", lambda: C.attention_fwd(qd, kd, vd, od, None, None, None, 0, 0, 0.0, True,
                                                                   stream, False, -1, -1, 0.0)),
        ("sdpa (flash) S64", lambda: torch.nn.functional.scaled_dot_product_attention(
            qd.transpose(1, 2), kd.transpose(1, 2), vd.transpose(1, 2), is_causal=True)),
    ]
    for name, fn in rows:
        try:
            lines.append(f"{name:34s} {host_us_per_call(fn, n=300):8.2f} us/call")
        except Exception as e:  # a signature that differs: say so, go on
            lines.append(f"{name:34s} error {type(e).__name__}: {str(e)[:160]}")
    emit(lines, f"{a.out}/host_pieces.txt")


if __name__ == "__main__":
    main()
