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
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", default=["128 2 16384 fixed", "128 2 4096 fixed", "16 1 16384 fixed"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--flashmla-path", default=None)
    args = ap.parse_args()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from mla_kernel_times import setup

    torch, impls, make_sets = setup(args.flashmla_path)
    for text in args.configs:
        cfg, sets = make_sets(text)
        for impl in impls * 2:  # twice each, interleaved (flashkit, flashmla, flashkit, flashmla)
            fns = [impl.prepare(cfg, d, 64) for d in sets]
            for f in fns:
                f()
            torch.cuda.synchronize()
            log = tempfile.NamedTemporaryFile("w+", suffix=".csv")
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,"
                                    "clocks_throttle_reasons.active", "--format=csv,noheader,nounits", "-lms", "50"],
                                   stdout=log, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            t_end = time.time() + args.seconds
            n = 0
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            while time.time() < t_end:
                e0.record()
                for i in range(20):
                    fns[i % 2]()
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1000 / 20)
                n += 20
            smi.terminate()
            smi.wait()
            log.seek(0)
            rows = [r.split(", ") for r in log.read().strip().splitlines() if r.count(",") >= 4]
            mid = rows[len(rows) // 4: max(len(rows) // 4 + 1, 3 * len(rows) // 4)]
            clk = [float(r[1]) for r in mid if r[1].strip().replace(".", "").isdigit()]
            pwr = [float(r[2]) for r in mid if r[2].strip().replace(".", "").isdigit()]
            tmp = [float(r[3]) for r in mid if r[3].strip().isdigit()]
            reasons = sorted({r[4].strip() for r in mid})
            t_mid = times[len(times) // 4: max(len(times) // 4 + 1, 3 * len(times) // 4)]
            print(f"{text:26s} {impl.name:9s} {statistics.median(t_mid):8.1f} us/call ({n} calls)  "
                  f"SM {statistics.median(clk) if clk else -1:6.0f} MHz  {statistics.median(pwr) if pwr else -1:6.1f} W  "
                  f"{max(tmp) if tmp else -1:3.0f} C  throttle {' '.join(reasons)}  samples {len(mid)}")
        del sets
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
