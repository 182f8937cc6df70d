"""One paged-decode configuration run a few times (the target of an ncu profile; development aid).

    ncu -k regex:decode_split -s 3 -c 1 python3 scripts/dev/decode_profile_case.py 64:16384:32:8 fp8 [--calls 6]

The inputs are decode_quick_bench.py's (D 128, page 16, permuted block table, s_q 1).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from decode_quick_bench import paged_inputs  # noqa: E402

import flashkit  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", help="B:S:HQ:HKV")
    ap.add_argument("kv", choices=["bf16", "int8", "fp8"])
    ap.add_argument("--calls", type=int, default=6)
    a = ap.parse_args()
    B, S, hq, hkv = (int(x) for x in a.config.split(":"))
    q, k, v, bt, sl, scales, kvd = paged_inputs(B, S, hq, hkv, a.kv)
    plan = flashkit.DecodePlan(B, 1, hq, hkv, 128, device="cuda", kv_dtype=None if a.kv == "bf16" else kvd)
    plan.plan(sl)
    for _ in range(a.calls):
        plan.run(q, k, v, bt, sl, **scales)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 0
    print("ok", a.config, a.kv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
