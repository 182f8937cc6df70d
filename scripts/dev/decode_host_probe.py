"""Is a short decode call host-bound? DecodePlan.run's event-timed median (the bench's way),
its host time per call (back-to-back calls without a sync), its GPU time (the same call
replayed from a CUDA graph), and the kernels' durations from torch.profiler.

    python3 scripts/dev/decode_host_probe.py [--out DIR]
"""
import argparse
import time

import torch
import triton.testing as tt

import flashkit


def case(B, S, Hq, Hkv, D, page, out_lines):
    dt = torch.bfloat16
    pages = B * ((S + page - 1) // page) + 7
    g = torch.Generator(device="cuda").manual_seed(0)
    k = torch.randn(pages, page, Hkv, D, device="cuda", dtype=dt, generator=g)
    v = torch.randn(pages, page, Hkv, D, device="cuda", dtype=dt, generator=g)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=g)
    per = (S + page - 1) // page
    bt = torch.randperm(pages, device="cuda", generator=g)[: B * per].view(B, per).int()
    lens = torch.full((B,), S, device="cuda", dtype=torch.int32)
    plan = flashkit.DecodePlan(B, 1, Hq, Hkv, D, device="cuda", max_seqlen_k=S)
    plan.plan(lens)
    fn = lambda: plan.run(q, k, v, bt, lens, causal=True)  # noqa: E731
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ms = tt.do_bench(fn, warmup=10, rep=100, return_mode="median")
    n = 200
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    host = (t1 - t0) / n * 1e6
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    reps = 20
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(20):
        e0.record()
        graph.replay()
        e1.record()
        torch.cuda.synchronize()
        best.append(e0.elapsed_time(e1) / reps * 1e3)
    best.sort()
    # pieces of the host path
    from flashkit import _torch_decode_ops as tdo
    args = (q, k, v, bt, lens, plan.workspace, True, 0.0, False, plan.split_size, plan.max_seqlen_k,
            False, None, None)
    t0 = time.perf_counter()
    for _ in range(n):
        tdo._decode_run_impl(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    impl = (t1 - t0) / n * 1e6
    out_lines.append(f"B={B} S_k={S} H={Hq}/{Hkv} D={D} page={page}: do_bench {ms * 1e3:7.2f} us | host/call "
                     f"{host:7.2f} us (impl alone {impl:7.2f}) | graph replay {best[len(best) // 2]:7.2f} us/call")
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
    txt = "\n".join(lines)
    print(txt)
    open(f"{a.out}/decode_host_probe.txt", "w").write(txt)


if __name__ == "__main__":
    main()
