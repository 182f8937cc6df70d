#!/usr/bin/env python3
"""Quick decode bandwidth probe (development tool; the full sweep is
``python -m flashkit.bench --op decode``): FlashKit's paged decode against a plain
device-to-device copy of the same bytes, a few configurations, CUDA events, median.

    python scripts/decode_quick_bench.py [--page 16] [--configs B:S:HQ:HKV ...]
        [--layout nhd hnd] [--table perm seq] [--cudnn]

--layout hnd stores each page as [H_kv, page, D] (passed as a strided [page, H_kv, D] view: one KV head's
tokens of a page are contiguous), bf16 only; --table seq gives each sequence consecutive pages in order
(perm: a random permutation of the pool, the bench's layout); --cudnn also times SDPA's cuDNN backend on
a contiguous [B, H, S, D] copy in the same graph harness (the decode bar's peer).
"""
import argparse
import statistics

import torch

import flashkit


def median_ms(fn, reps=30, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def graph_ms(fn, calls=10, reps=20):
    """GPU time per call from a CUDA graph of `calls` back-to-back calls (no host gaps)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return median_ms(g.replay, reps=reps) / calls


def paged_inputs(B, S, hq, hkv, kv, page=16, s_q=1, d=128, dt=torch.bfloat16, layout="nhd", table="perm"):
    """A paged cache of B sequences of S tokens (permuted block table) and q: returns
    (q, k, v, block_table, seqlens, scales, cache dtype); kv is bf16, int8 or fp8 (one byte per
    value, random values (never zeros) and fp32 scales: the kernel's speed is what counts)."""
    pages_per = (S + page - 1) // page
    P = B * pages_per
    kvd = {"bf16": dt, "int8": torch.int8, "fp8": torch.float8_e4m3fn}[kv]
    scales = {}
    if kv == "bf16" and layout == "hnd":
        k = torch.randn((P, hkv, page, d), device="cuda", dtype=dt).transpose(1, 2)
        v = torch.randn((P, hkv, page, d), device="cuda", dtype=dt).transpose(1, 2)
    elif kv == "bf16":
        k = torch.randn((P, page, hkv, d), device="cuda", dtype=dt)
        v = torch.randn((P, page, hkv, d), device="cuda", dtype=dt)
    else:
        assert layout == "nhd", "hnd: bf16 caches only here"
        k = (torch.randn((P, page, hkv, d), device="cuda") * 40).to(torch.int8 if kv == "int8" else dt).to(kvd)
        v = (torch.randn((P, page, hkv, d), device="cuda") * 40).to(torch.int8 if kv == "int8" else dt).to(kvd)
        scales = dict(k_scale=torch.rand((P, page, hkv), device="cuda") / 100,
                      v_scale=torch.rand((P, page, hkv), device="cuda") / 100)
    if table == "seq":
        bt = torch.arange(P, device="cuda", dtype=torch.int32).view(B, pages_per)
    else:
        bt = torch.randperm(P, device="cuda", dtype=torch.int32).view(B, pages_per)
    sl = torch.full((B,), S, dtype=torch.int32, device="cuda")
    q = torch.randn((B, s_q, hq, d), device="cuda", dtype=dt)
    return q, k, v, bt, sl, scales, kvd


def kernel_breakdown(fn):
    """Per-kernel GPU time (us) of one call, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0):
            t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
            if t:
                out[e.key[:40]] = t / 5
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--page", type=int, nargs="+", default=[16])
    p.add_argument("--sq", type=int, nargs="+", default=[1])
    p.add_argument("--profile", action="store_true", help="print per-kernel GPU time")
    p.add_argument("--kv", nargs="+", default=["bf16"], choices=["bf16", "int8", "fp8"],
                   help="cache dtypes (int8 / fp8: one byte per value + fp32 scales)")
    p.add_argument("--layout", nargs="+", default=["nhd"], choices=["nhd", "hnd"])
    p.add_argument("--table", nargs="+", default=["perm"], choices=["perm", "seq"])
    p.add_argument("--split-size", type=int, nargs="+", default=[0],
                   help="DecodePlan split_size values (0: the balanced plan)")
    p.add_argument("--cudnn", action="store_true", help="also time SDPA cuDNN on a contiguous copy")
    p.add_argument("--csv", help="also write SPEC-format rows (us and GB/s) to this CSV")
    p.add_argument("--configs", nargs="+",
                   default=["1:65536:32:8", "16:8192:32:8", "64:8192:32:8", "128:4096:32:8",
                            "64:8192:64:8", "16:16384:32:32", "128:1024:32:8"])
    a = p.parse_args()
    d = 128
    dt = torch.bfloat16
    print(f"{'kv':>4} {'B':>4} {'S':>6} {'Hq/Hkv':>7} {'page':>4} {'sq':>2} {'KV MB':>8} {'us':>8} {'GB/s':>7} "
          f"{'graph us':>8} {'GB/s':>7} {'copy GB/s':>9} {'ratio':>6}  layout")
    rows = []
    gpu = torch.cuda.get_device_name()
    for cfg in a.configs:
        B, S, hq, hkv = (int(x) for x in cfg.split(":"))
        for page in a.page:
            for s_q in a.sq:
              for kv, layout, table, split in [(x, y, z, w) for x in a.kv for y in a.layout for z in a.table
                                               for w in a.split_size if x == "bf16" or y == "nhd"]:
                q, k, v, bt, sl, scales, kvd = paged_inputs(B, S, hq, hkv, kv, page, s_q, d, dt, layout, table)
                plan = flashkit.DecodePlan(B, s_q, hq, hkv, d, device="cuda", split_size=split,
                                           max_seqlen_k=S if split else 0,
                                           kv_dtype=None if kv == "bf16" else kvd)
                plan.plan(sl)
                step = lambda: plan.run(q, k, v, bt, sl, **scales)  # noqa: E731
                t = median_ms(step)
                tg = graph_ms(step)
                elem = 2 if kv == "bf16" else 1
                kv_bytes = 2 * B * S * hkv * (d * elem + (0 if kv == "bf16" else 4))
                nbytes = kv_bytes + 2 * q.numel() * 2
                src = torch.empty(kv_bytes // 2, dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                tc = median_ms(lambda: dst.copy_(src))
                copy_bw = 2 * src.numel() / tc / 1e6  # read + write
                bw = nbytes / t / 1e6
                bwg = nbytes / tg / 1e6
                for unit, value in (("us", tg * 1e3), ("GB/s", bwg)):
                    rows.append(dict(op="decode", impl="flashkit", dtype={"bf16": "bf16", "int8": "int8", "fp8": "fp8_e4m3"}[kv],
                                     D=d, Dv=d, B=B, H_q=hq, H_kv=hkv, S_q=s_q, S_k=S, causal=True,
                                     mode="fwd", page_size=page, value=round(value, 2), unit=unit,
                                     gpu=gpu, date=__import__("datetime").date.today().isoformat(),
                                     commit=__import__("os").environ.get("FLASHKIT_COMMIT", "unknown")))
                print(f"{kv:>4} {B:>4} {S:>6} {hq:>3}/{hkv:<3} {page:>4} {s_q:>2} {kv_bytes/1e6:>8.0f} "
                      f"{t*1e3:>8.1f} {bw:>7.0f} {tg*1e3:>8.1f} {bwg:>7.0f} {copy_bw:>9.0f} "
                      f"{bwg/copy_bw:>6.2f}  {layout} {table}" + (f" split {split}" if split else ""))
                if a.profile:
                    for name, us in kernel_breakdown(lambda: (plan.plan(sl), step())).items():
                        print(f"      {us:9.1f} us  {name}")
                del k, v, src, dst
                torch.cuda.empty_cache()
            if a.cudnn:
                from torch.nn.attention import SDPBackend, sdpa_kernel

                for s_q in a.sq:
                    kc = torch.randn((B, hkv, S, d), device="cuda", dtype=dt)
                    vc = torch.randn((B, hkv, S, d), device="cuda", dtype=dt)
                    qc = torch.randn((B, hq, s_q, d), device="cuda", dtype=dt)

                    def sdpa():
                        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                            return torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, enable_gqa=hq != hkv)
                    tg = graph_ms(sdpa)
                    kv_bytes = 2 * B * S * hkv * d * 2
                    print(f"{'cudnn':>5} {B:>3} {S:>6} {hq:>3}/{hkv:<3} {0:>4} {s_q:>2} {kv_bytes/1e6:>8.0f} "
                          f"{'':>8} {'':>7} {tg*1e3:>8.1f} {(kv_bytes + 4 * qc.numel()) / tg / 1e6:>7.0f}  contiguous copy")
                    del kc, vc
                    torch.cuda.empty_cache()
    assert flashkit.device_errors() == 0
    if a.csv:
        import csv

        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
