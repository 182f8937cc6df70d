"""Is a short decode call host-bound? DecodePlan.run's event-timed median (the bench's way),
its host time per call (back-to-back calls without a sync), its GPU time (the same call
replayed from a CUDA graph: decode_quick_bench.graph_ms), and the kernels' durations from torch.profiler.

    python3 scripts/dev/decode_host_probe.py [--out DIR]
"""
import argparse
import sys
from pathlib import Path

import torch
import triton.testing as tt

import flashkit
from host_timing import emit, host_us_per_call  # (scripts/dev, the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: decode_quick_bench
from decode_quick_bench import graph_ms, paged_inputs  # noqa: E402


def case(B, S, Hq, Hkv, D, page, out_lines):
    q, k, v, bt, lens, _, _ = paged_inputs(B, S, Hq, Hkv, "bf16", page=page, d=D)
    plan = flashkit.DecodePlan(B, 1, Hq, Hkv, D, device="cuda", max_seqlen_k=S)
    plan.plan(lens)
    fn = lambda: plan.run(q, k, v, bt, lens, causal=True)  # noqa: E731
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ms = tt.do_bench(fn, warmup=10, rep=100, return_mode="median")
    n = 200
    host = host_us_per_call(fn, n=n)
    graph_us = graph_ms(fn, calls=20, reps=20) * 1e3
    # pieces of the host path
    from flashkit import _torch_decode_ops as tdo
    args = (q, k, v, bt, lens, plan.workspace, True, 0.0, False, plan.split_size, plan.max_seqlen_k,
            False, None, None)
    impl = host_us_per_call(lambda: tdo._decode_run_impl(*args), n=n)
    out_lines.append(f"B={B} S_k={S} H={Hq}/{Hkv} D={D} page={page}: do_bench {ms * 1e3:7.2f} us | host/call "
                     f"{host:7.2f} us (impl alone {impl:7.2f}) | graph replay {graph_us:7.2f} us/call")
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    out_lines.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14,
                                               max_name_column_width=60))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp")
    a = ap.parse_args()
    lines = [f"decode host probe on {torch.cuda.get_device_name()}"]
    for S in (1024, 4096, 16384):
        case(1, S, 32, 8, 128, 16, lines)
    case(1, 1024, 32, 32, 128, 16, lines)
    emit(lines, f"{a.out}/decode_host_probe.txt")


if __name__ == "__main__":
    main()
