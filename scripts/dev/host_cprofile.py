"""cProfile of the Python side of an eager forward + backward through autograd (the host_probe.py
shape), and of attention_backward alone: which Python functions the host time goes to.

    python3 scripts/dev/host_cprofile.py [--out DIR]
"""
import argparse
import cProfile
import io
import pstats

import torch

import flashkit
from host_timing import emit  # (scripts/dev, the script's folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp")
    a = ap.parse_args()
    B, S, H, D = 2, 128, 4, 128  # tiny: host-bound
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    ql, kl, vl = (t.clone().requires_grad_(True) for t in (q, k, v))
    o0, lse0 = flashkit.attention(q, k, v, causal=True, return_lse=True)

    def step():
        o = flashkit.attention(ql, kl, vl, causal=True)
        return torch.autograd.grad(o, (ql, kl, vl), do)

    def bwd():
        return flashkit.attention_backward(do, q, k, v, o0, lse0, causal=True)

    lines = []
    for name, fn in (("fwd_bwd autograd", step), ("attention_backward", bwd)):
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            fn()
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
        lines.append(f"==== {name}: 200 calls ====\n{s.getvalue()}")
    emit(lines, f"{a.out}/host_cprofile.txt")


if __name__ == "__main__":
    main()
