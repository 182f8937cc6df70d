"""SM clock and power while an MLA decode call runs back to back, flashkit against FlashMLA.

On an H200 the split kernels' times at h_q 128 s_q 2 put FlashMLA ~7 % ahead in the steady state
while the dev harness's trace shows our pair at ~6000 cycles and ~1.73 GHz; whether the two
kernels run at the same clock (power limit) decides whether the gap is cycles or energy. For
each configuration and implementation: calls back to back for --seconds, nvidia-smi sampling
every 50 ms in the background; prints the mean time per call (events) and the median SM clock,
power and throttle reasons over the samples taken in the middle half of the run.

  python3 scripts/dev/mla_clocks.py [--seconds 3] [--flashmla-path DIR] "128 2 16384 fixed [B]" ...
"""
from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", default=["128 2 16384 fixed", "128 2 4096 fixed", "16 1 16384 fixed"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--flashmla-path", default=None)
    args = ap.parse_args()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu_clocks import sustained
    from mla_kernel_times import setup

    torch, impls, make_sets = setup(args.flashmla_path)
    for text in args.configs:
        cfg, sets = make_sets(text)
        for impl in impls * 2:  # twice each, interleaved (flashkit, flashmla, flashkit, flashmla)
            fns = [impl.prepare(cfg, d, 64) for d in sets]
            for f in fns:
                f()
            torch.cuda.synchronize()
            calls = [0]

            def step():  # the two data sets in turn
                fns[calls[0] % 2]()
                calls[0] += 1

            us, mhz, w, c, reasons, n = sustained(step, args.seconds)
            print(f"{text:26s} {impl.name:9s} {us:8.1f} us/call ({n} calls)  SM {mhz:6.0f} MHz  {w:6.1f} W  "
                  f"{c:3.0f} C  throttle {' '.join(reasons)}")
        del sets
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
