"""SM clock and power while paged decode runs back to back: bf16 against the 8-bit caches (sampling: gpu_clocks.py).

On an H200 the 8-bit kernels' graph times (10 calls back to back) are 5-10 % above their single-call times at
the long rows while bf16's are below (bench/results/decode-quant-h200-2026-11-28-v10.notes.txt). Whether the
8-bit kernels lose SM clock under sustained load (power cap) decides whether issue 10's H200 gap is cycles or
energy. For each configuration and cache type (interleaved, twice): `DecodePlan.run` back to back for --seconds
with nvidia-smi sampling every 50 ms; prints the time per call (events over 20 calls), the median SM clock,
power and temperature over the middle half of the run, the throttle reasons seen, and cycles per call.

  python3 scripts/dev/decode_clocks.py [--seconds 2] [--kv bf16 int8 fp8] B:S:HQ:HKV ...
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from decode_quick_bench import paged_inputs  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_clocks import sustained  # noqa: E402

import flashkit  # noqa: E402


def single_call_us(step, reps=30):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        time.sleep(0.002)  # idle between calls
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", default=["64:16384:32:8", "16:8192:32:8", "128:8192:32:8"])
    ap.add_argument("--kv", nargs="+", default=["bf16", "int8", "fp8"])
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}")
    for cfg in args.configs:
        B, S, hq, hkv = (int(x) for x in cfg.split(":"))
        steps = {}
        for kv in args.kv:
            q, k, v, bt, sl, scales, kvd = paged_inputs(B, S, hq, hkv, kv)
            plan = flashkit.DecodePlan(B, 1, hq, hkv, 128, device="cuda", kv_dtype=None if kv == "bf16" else kvd)
            plan.plan(sl)
            steps[kv] = (lambda plan=plan, q=q, k=k, v=v, bt=bt, sl=sl, sc=scales: plan.run(q, k, v, bt, sl, **sc))
            steps[kv]()
        torch.cuda.synchronize()
        for rnd in range(2):
            for kv, step in steps.items():
                one = single_call_us(step)
                us, mhz, w, c, reasons, _ = sustained(step, args.seconds)
                print(f"{cfg:16s} {kv:5s} round {rnd}: single call {one:8.1f} us  sustained {us:8.1f} us  "
                      f"SM {mhz:6.0f} MHz  {w:6.1f} W  {c:3.0f} C  cycles/call {us * mhz / 1e3:9.0f} k  "
                      f"throttle {' '.join(reasons)}", flush=True)
        del steps
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
