"""Times of MLA decode calls: the whole call (CUDA events, 20 calls after 5) and each kernel
(torch.profiler, 20 calls), for flashkit.mla or, with --flashmla, FlashMLA (`flash_mla` on
sys.path, e.g. PYTHONPATH=.carry/flashmla_built). Causal, fixed lengths, page 64, bf16, a
shuffled block table, one cache reused (the shapes of scripts/dev/mla_sm90_check.cu).
usage: python3 mla_profile.py [--flashmla] ["h_q s_q mean [B];..."]"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def call_us(f, n=20, warmup=5):
    """Mean time of n back-to-back calls of f after `warmup`, by CUDA events, in us (also used by
    mla_fp8_probe.py)."""
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        f()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / n * 1e3


def one(mod, name, hq, sq, mean, b=128, page=64):
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = torch.full((b,), mean, dtype=torch.int32, device="cuda")
    mp = (mean + page - 1) // page
    bt = torch.randperm(b * mp, dtype=torch.int32, device="cuda", generator=g).view(b, mp)
    kv = torch.randn(b * mp, page, 1, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    q = torch.randn(b, sq, hq, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    meta, splits = mod.get_mla_metadata(lens, sq * hq, 1)
    f = lambda: mod.flash_mla_with_kvcache(q, kv, bt, lens, 512, meta, splits, causal=True)
    ms = call_us(f) / 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            f()
        torch.cuda.synchronize()
    ks = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t > 0:
            ks[ev.key[:60]] = t / 20
    tokens = b * mean
    tflops = 2.0 * sq * tokens * hq * (576 + 512) / ms / 1e9
    gbs = (tokens * 576 * 2 + b * sq * hq * 1088 * 2) / (ms * 1e-3) / 1e9
    print(f"{name} hq={hq} sq={sq} mean={mean} B={b}: call {ms * 1e3:.1f} us ({tflops:.0f} TFLOPS, {gbs:.0f} GB/s)"
          f" | splits {int(splits[-1])}, parts {meta.shape[0]} | "
          + "; ".join(f"{k}: {v:.1f} us" for k, v in sorted(ks.items(), key=lambda x: -x[1])[:4]), flush=True)


def main(argv):
    fm = "--flashmla" in argv
    argv = [a for a in argv if a != "--flashmla"]
    if fm:
        import flash_mla as mod
    else:
        import flashkit.mla as mod
    cfgs = argv[0] if argv else "128 2 16384;16 1 16384;16 1 4096;64 2 4096"
    for cfg in cfgs.split(";"):
        one(mod, "flashmla" if fm else "flashkit", *map(int, cfg.split()))


if __name__ == "__main__":
    main(sys.argv[1:])
