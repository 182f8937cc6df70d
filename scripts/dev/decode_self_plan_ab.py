#!/usr/bin/env python3
"""A/B of the self-planned split CTAs (kernels/decode/self_plan.cuh) in the one-call form:
flashkit.decode (plan + split + combine) captured as a CUDA graph of 10 back-to-back calls, with
FLASHKIT_DECODE_SELF_PLAN=0 and with the default, in interleaved rounds (ABBA), plus the run-only
time of a DecodePlan (the bench's form, which the switch does not touch) for reference.

    python scripts/dev/decode_self_plan_ab.py [--rounds 2] [--configs kv:B:S:HQ:HKV[:s_q] ...]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import flashkit  # noqa: E402
from decode_quick_bench import graph_ms, paged_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--configs", nargs="+", default=[
        "bf16:1:1024:32:8", "bf16:1:4096:32:8", "bf16:1:16384:32:8", "bf16:1:65536:32:8",
        "fp8:1:4096:32:8", "fp8:1:16384:32:8", "fp8:1:65536:32:8", "bf16:1:4096:32:8:4",
        "bf16:4:4096:32:8", "bf16:16:8192:32:8", "fp8:16:8192:32:8", "bf16:32:2048:32:8",
        "bf16:64:8192:32:8"])
    a = ap.parse_args()
    print(torch.cuda.get_device_name())
    print(f"{'row':<24} {'run-only':>9} " + " ".join(f"{'off r' + str(r):>8} {'on r' + str(r):>8}" for r in range(a.rounds))
          + f" {'off':>8} {'on':>8} {'on-off':>7}")
    for cfg in a.configs:
        parts = cfg.split(":")
        kv, (B, S, hq, hkv) = parts[0], (int(x) for x in parts[1:5])
        s_q = int(parts[5]) if len(parts) > 5 else 1
        q, k, v, bt, sl, scales, kvd = paged_inputs(B, S, hq, hkv, kv, 16, s_q, 128, torch.bfloat16)
        plan = flashkit.DecodePlan(B, s_q, hq, hkv, 128, device="cuda", kv_dtype=None if kv == "bf16" else kvd)
        plan.plan(sl)
        run_only = graph_ms(lambda: plan.run(q, k, v, bt, sl, **scales)) * 1e3
        one = lambda: flashkit.decode(q, k, v, bt, sl, **scales)  # noqa: E731
        times = {"off": [], "on": []}
        for r in range(a.rounds):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
                if mode == "off":
                    os.environ["FLASHKIT_DECODE_SELF_PLAN"] = "0"
                else:
                    os.environ.pop("FLASHKIT_DECODE_SELF_PLAN", None)
                times[mode].append(graph_ms(one) * 1e3)  # the switch is read at capture
        os.environ.pop("FLASHKIT_DECODE_SELF_PLAN", None)
        off = sum(times["off"]) / len(times["off"])
        on = sum(times["on"]) / len(times["on"])
        cells = " ".join(f"{times['off'][r]:>8.2f} {times['on'][r]:>8.2f}" for r in range(a.rounds))
        print(f"{cfg:<24} {run_only:>9.2f} {cells} {off:>8.2f} {on:>8.2f} {on - off:>+7.2f}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    assert flashkit.device_errors() == 0


if __name__ == "__main__":
    main()
