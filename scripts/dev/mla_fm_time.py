"""Times FlashMLA (flash_mla on sys.path) on the dev harness's shapes: b = 128, causal, fixed
lengths, page 64, bf16, one cache reused (as scripts/dev/mla_sm90_check.cu does). Prints the
whole call (CUDA events, 20 calls) and the split kernel alone (torch.profiler).
usage: python3 mla_fm_time.py "hq sq mean;hq sq mean;..." """
import sys
import torch
import flash_mla
from torch.profiler import profile, ProfilerActivity


def one(hq, sq, mean, b=128, page=64):
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = torch.full((b,), mean, dtype=torch.int32, device="cuda")
    mp = (mean + page - 1) // page
    bt = torch.randperm(b * mp, dtype=torch.int32, device="cuda", generator=g).view(b, mp)
    kv = torch.randn(b * mp, page, 1, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    q = torch.randn(b, sq, hq, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    md, ns = flash_mla.get_mla_metadata(lens, sq * hq, 1)
    f = lambda: flash_mla.flash_mla_with_kvcache(q, kv, bt, lens, 512, md, ns, causal=True)
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        f()
    e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            f()
        torch.cuda.synchronize()
    split = comb = 0.0
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if "splitkv_mla" in ev.key:
            split += t / 20
        elif "combine" in ev.key:
            comb += t / 20
    tokens = b * mean
    flops = 2.0 * sq * tokens * hq * (576 + 512)
    gbs = (tokens * 576 * 2 + b * sq * hq * 1088 * 2) / (ms * 1e-3) / 1e9
    print(f"flashmla hq={hq} sq={sq} mean={mean}: call {ms*1e3:.1f} us ({flops/ms/1e9:.0f} TFLOPS, {gbs:.0f} GB/s)"
          f" | split kernel {split:.1f} us, combine {comb:.1f} us", flush=True)


for cfg in sys.argv[1].split(";"):
    one(*map(int, cfg.split()))
