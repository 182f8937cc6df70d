"""Kernel-level times of one flashkit.mla call (split, combine, other) vs the whole call."""
import sys, torch
import flashkit.mla as fm
from torch.profiler import profile, ProfilerActivity

def case(B, s_q, h_q, n, page=64):
    D = 576
    num_pages = B * n // page
    kv = torch.randn((num_pages, page, 1, D), device="cuda").to(torch.bfloat16)
    bt = torch.arange(num_pages, device="cuda", dtype=torch.int32).view(B, n // page)
    sl = torch.full((B,), n, dtype=torch.int32, device="cuda")
    q = torch.randn((B, s_q, h_q, D), device="cuda").to(torch.bfloat16)
    return q, kv, bt, sl

for (B, s_q, h_q, n) in [(128, 2, 128, 16384), (128, 1, 16, 16384), (128, 1, 16, 4096), (128, 2, 64, 4096)]:
    q, kv, bt, sl = case(B, s_q, h_q, n)
    meta, splits = fm.get_mla_metadata(sl, s_q * h_q, 1)
    f = lambda: fm.flash_mla_with_kvcache(q, kv, bt, sl, 512, meta, splits, causal=True)
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        f()
    e1.record()
    torch.cuda.synchronize()
    whole = e0.elapsed_time(e1) / 20 * 1000
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            f()
        torch.cuda.synchronize()
    ks = {}
    for ev in prof.key_averages():
        if ev.device_type == torch.autograd.DeviceType.CUDA or getattr(ev, "device_time_total", 0) > 0:
            ks[ev.key[:60]] = getattr(ev, "device_time_total", getattr(ev, "cuda_time_total", 0)) / 10
    print(f"B={B} s_q={s_q} h_q={h_q} n={n}: whole {whole:.1f} us;",
          "; ".join(f"{k}: {v:.1f}" for k, v in sorted(ks.items(), key=lambda x: -x[1])[:4]))
    print("  num_splits total", int(splits[-1]), "parts", meta.shape[0])
