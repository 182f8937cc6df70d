"""Where a forward + backward step's extra time goes (development aid, GPU).

In results v17 / v18 (H200) flashkit's fwd_bwd rows take longer than its fwd and bwd rows added up at long non-causal
lengths (D 128 16k: +0.70 ms over 14.19 ms; D 64 16k +0.37, D 256 8k +0.33), where cuDNN's take the sum or less. This
times, in one process and with the same inputs, (a) the forward alone, (b) the backward alone from the saved out / lse
(the bench's bwd rows), (c) the bench's fwd_bwd step (forward with autograd, then torch.autograd.grad), each as a run of
back-to-back calls with CUDA events, and (d) the kernels of (c) under torch.profiler: whether the step runs extra
kernels or the same kernels slower (clocks under the power cap: then (e), the GPU clock read by nvidia-smi during
(a) / (b) / (c) runs of RUN_S seconds each, tells).

    python3 scripts/dev/fwd_bwd_split.py [--D 128] [--S 16384] [--causal] [--run-s 3]
"""
from __future__ import annotations

import argparse
import subprocess
import threading
import time

import torch

import flashkit
from mla_profile import call_us  # (scripts/dev/, this script's folder, is on sys.path)


def clocks_during(fn, seconds):
    """Median SM clock (MHz) and power (W) read by nvidia-smi every 100 ms while fn runs back to back."""
    samples, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True)
            try:
                c, p = (float(x) for x in r.stdout.strip().split(","))
                samples.append((c, p))
            except ValueError:
                pass
            time.sleep(0.1)

    t = threading.Thread(target=poll)
    t.start()
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    stop.set()
    t.join()
    if not samples:
        return float("nan"), float("nan")
    cs = sorted(s[0] for s in samples)
    ps = sorted(s[1] for s in samples)
    return cs[len(cs) // 2], ps[len(ps) // 2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--D", type=int, default=128)
    ap.add_argument("--S", type=int, default=16384)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--run-s", type=float, default=3.0)
    a = ap.parse_args()
    H = {64: 32, 128: 16, 256: 8}.get(a.D, 16)  # the FA3 sweep's heads (16k tokens)
    B = max(1, 16384 // a.S)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(B, a.S, H, a.D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    out, lse = flashkit.attention(q, k, v, causal=a.causal, return_lse=True)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]

    def fwd():
        flashkit.attention(q, k, v, causal=a.causal)

    def bwd():
        flashkit.attention_backward(dout, q, k, v, out, lse, causal=a.causal)

    def step():
        o2 = flashkit.attention(*leaves, causal=a.causal)
        torch.autograd.grad(o2, leaves, dout)

    tf, tb, ts = (call_us(f, n=a.reps, warmup=2) / 1e3 for f in (fwd, bwd, step))  # (ms)
    print(f"B {B} H {H} S {a.S} D {a.D} causal {a.causal}: fwd {tf:.3f} ms, bwd {tb:.3f} ms, sum {tf + tb:.3f}, "
          f"fwd_bwd {ts:.3f} ms, extra {ts - tf - tb:+.3f} ms")
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
    for name, fn in (("fwd", fwd), ("bwd", bwd), ("fwd_bwd", step)):
        c, p = clocks_during(fn, a.run_s)
        print(f"{name:8s} sustained {a.run_s:.0f} s: SM clock median {c:.0f} MHz, power median {p:.0f} W")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
