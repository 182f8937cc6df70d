"""Times one MLA decode shape over the bf16 cache and over FlashMLA's FP8 cache (CUDA events, 20 calls
after 5; b 128, causal, fixed lengths, page 64, shuffled block table). The FP8 kernel follows the
environment (FLASHKIT_MLA_FP8_PORTABLE, FLASHKIT_MLA_FP8_ABLATE).
usage: python3 mla_fp8_probe.py ["h_q s_q mean;..."] [--fp8-only]"""
import sys

import torch

import flashkit.mla as mla
from mla_profile import call_us  # (scripts/dev/, this script's folder, is on sys.path)


def one(hq, sq, mean, fp8_only, b=128, page=64):
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = torch.full((b,), mean, dtype=torch.int32, device="cuda")
    mp = (mean + page - 1) // page
    bt = torch.randperm(b * mp, dtype=torch.int32, device="cuda", generator=g).view(b, mp)
    kv = torch.randn(b * mp, page, 1, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    kv8 = mla.quantize_kv_cache_fp8(kv)
    q = torch.randn(b, sq, hq, 576, dtype=torch.bfloat16, device="cuda", generator=g)
    meta, splits = mla.get_mla_metadata(lens, sq * hq, 1)
    out = []
    for name, cache, fp8 in (("bf16", kv, False), ("fp8", kv8, True)):
        if fp8_only and not fp8:
            continue
        f = lambda: mla.flash_mla_with_kvcache(q, cache, bt, lens, 512, meta, splits, causal=True, is_fp8_kvcache=fp8)
        out.append(f"{name} {call_us(f):.1f} us")
    print(f"hq={hq} sq={sq} mean={mean}: " + ", ".join(out), flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    for cfg in (args[0] if args else "16 1 8192;128 2 8192").split(";"):
        one(*map(int, cfg.split()), fp8_only="--fp8-only" in sys.argv)
