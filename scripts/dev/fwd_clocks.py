"""SM clock and power while the dense forward runs back to back: flashkit against SDPA's cuDNN backend.

Issue 8 asks 650 TFLOPS at D 128 S 16k non-causal on an H200; the decode measurement (decode_clocks.py) found this
machine's H200 capping power near 575-590 W. For each shape (bf16, FA3-sweep layout: B*S = 16k tokens, H*D = 2048),
both implementations interleaved twice: calls back to back for --seconds while nvidia-smi samples every 50 ms;
prints TFLOPS, the median SM clock and power over the middle half, throttle reasons, and TFLOPS per GHz.

  python3 scripts/dev/fwd_clocks.py [--seconds 2] [--bwd | --fwd-bwd] [--bench-timing] D:S:causal ...

--fwd-bwd times a forward and its autograd backward together (the bench's fwd_bwd mode), for the open item of
docs/kernels/bwd.md (v17): flashkit's fwd_bwd runs ~4 % below the composite of its own fwd and bwd rows at D 128
8k / 16k, cuDNN's at or above it.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_clocks import sustained  # noqa: E402

import flashkit  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["128:16384:0", "128:1024:0", "256:16384:0", "64:16384:0"])
    ap.add_argument("--seconds", type=float, default=2.0)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--bwd", action="store_true", help="time the backward (dq, dk, dv of a saved forward) instead")
    mode.add_argument("--fwd-bwd", action="store_true", help="time a forward and its autograd backward together")
    ap.add_argument("--bench-timing", action="store_true",
                    help="after the sustained rounds, also time each call as the bench does (flashkit.bench.timing: "
                         "do_bench, L2 flushed before each call, median), two interleaved rounds")
    args = ap.parse_args()
    grad = args.bwd or args.fwd_bwd
    print(torch.cuda.get_device_name())
    for sh in args.shapes:
        d, s, causal = (int(x) for x in sh.split(":"))
        b, h = 16384 // s, 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
                   for _ in range(3))
        qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_(grad) for x in (q, k, v))
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0) * (2.5 if args.bwd else 3.5 if args.fwd_bwd else 1.0)
        if args.fwd_bwd:
            do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
            do_t = do.transpose(1, 2)

            def fk():
                o = flashkit.attention(q, k, v, causal=bool(causal))
                torch.autograd.grad(o, (q, k, v), do)

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal))
                torch.autograd.grad(o, (qt, kt, vt), do_t)
        elif args.bwd:
            do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
            o_fk = flashkit.attention(q, k, v, causal=bool(causal))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                o_cd = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal))
            do_t = do.transpose(1, 2)

            def fk():
                torch.autograd.grad(o_fk, (q, k, v), do, retain_graph=True)

            def cudnn():
                torch.autograd.grad(o_cd, (qt, kt, vt), do_t, retain_graph=True)
        else:
            def fk():
                flashkit.attention(q, k, v, causal=bool(causal))

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal))

        for f in (fk, cudnn):
            f()
        torch.cuda.synchronize()
        for rnd in range(2):
            for name, f in (("flashkit", fk), ("cudnn", cudnn)):
                us, mhz, w, c, reasons, _ = sustained(f, args.seconds)
                tf = flops / us / 1e6
                print(f"D {d:3d} S {s:5d} causal {causal}  {name:8s} round {rnd}: {us:9.1f} us  {tf:6.1f} TFLOPS  "
                      f"SM {mhz:6.0f} MHz  {w:6.1f} W  {c:3.0f} C  {tf / mhz * 1e3:6.1f} TFLOPS/GHz  "
                      f"throttle {' '.join(reasons)}", flush=True)
        if args.bench_timing:  # the bench's own timing of the same calls (bwd.md: the bench's fwd_bwd row sat 4.5 %
            # below this script's sustained rate for flashkit at D 128 16k, 1 % above for cuDNN)
            from flashkit.bench import timing
            for rnd in range(2):
                for name, f in (("flashkit", fk), ("cudnn", cudnn)):
                    ms = timing.bench_median_ms(f)
                    print(f"D {d:3d} S {s:5d} causal {causal}  {name:8s} bench timing round {rnd}: {ms * 1e3:9.1f} us  "
                          f"{flops / ms / 1e9:6.1f} TFLOPS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
