"""Where a whole MLA decode call spends its time, flashkit against FlashMLA (device run).

For each configuration ("h_q s_q mean_sk mode [b]", b = 128 by default, page 64, the bench's data), both
implementations' calls (metadata once, untimed, as in the bench) are run under torch.profiler;
the script prints, per implementation, the mean device time per call of each kernel (split,
combine, anything else) and the span of a call from its first kernel's start to its last
kernel's end (so launch gaps between the kernels show as span - sum). Two data sets are
called in turn, as the bench's rotating timer does, so that no call reads the previous
call's cache out of L2.

  python3 scripts/dev/mla_kernel_times.py [--calls 20] [--flashmla-path DIR] "128 2 16384 fixed" ...
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict


def setup(flashmla_path):
    """(torch, the usable implementations [flashkit, FlashMLA], make_sets); make_sets(text) parses
    "h_q s_q mean_sk mode [b]" into (cfg, two data sets made as the bench makes them). Shared with
    mla_clocks.py."""
    import torch

    from flashkit.bench import mla_impls as mi
    from flashkit.bench import mla_sweeps
    from flashkit.bench.mla_runner import MlaData

    impls = []
    for name in (mi.FLASHKIT, mi.FLASHMLA):
        impl = mi.make_impl(name, (64,))
        why = impl.setup(mi.Env(flashmla_path))
        if why:
            print(f"{name}: not run: {why}")
        else:
            impls.append(impl)
    dev = torch.device("cuda")
    print(torch.cuda.get_device_name(0))

    def make_sets(text):
        hq, sq, sk, mode, *rest = text.split()
        cfg = mla_sweeps.MlaConfig(B=int(rest[0]) if rest else 128, s_q=int(sq), S_k=int(sk), H_q=int(hq),
                                   mode=mode)
        lengths = mla_sweeps.seqlens(cfg, 0)
        return cfg, [MlaData(torch, cfg, lengths, 256, cfg.seed(0) + 1 + 7919 * r, dev) for r in range(2)]

    return torch, impls, make_sets


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", default=["128 2 16384 fixed", "128 1 16384 varlen",
                                                  "64 2 8192 fixed", "16 1 16384 fixed"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--flashmla-path", default=None)
    args = ap.parse_args()

    torch, impls, make_sets = setup(args.flashmla_path)
    from torch.profiler import ProfilerActivity, profile

    for text in args.configs:
        cfg, sets = make_sets(text)
        for impl in impls:
            fns = [impl.prepare(cfg, d, 64) for d in sets]
            for f in fns:  # warm up
                f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(args.calls):
                    fns[i % 2]()
                torch.cuda.synchronize()
            kern = [e for e in prof.events() if e.device_type.name == "CUDA"]
            per = defaultdict(list)
            for e in kern:
                per[e.name].append(e.time_range.elapsed_us())
            starts = sorted((e.time_range.start, e.time_range.end) for e in kern)
            # calls: group the kernels in launch order, len(starts) / calls kernels per call
            k = len(starts) // args.calls if args.calls else 0
            spans = [starts[i * k + k - 1][1] - starts[i * k][0] for i in range(args.calls)] if k else []
            tot = sum(sum(v) for v in per.values()) / args.calls
            print(f"{text:26s} {impl.name:9s} kernels/call {k}  span {statistics.median(spans):8.1f} us"
                  f"  kernel sum {tot:8.1f} us")
            for name, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
                print(f"    {sum(v) / args.calls:8.1f} us/call  n={len(v):3d}  {name[:110]}")
        del sets
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
