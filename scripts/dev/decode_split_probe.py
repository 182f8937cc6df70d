"""B = 1 decode: graph time of the 16-bit and the 8-bit caches for fixed split sizes against
the balanced plan (split_size 0), and the per-kernel profile of the balanced plan.

    python3 scripts/dev/decode_split_probe.py scripts     (the folder of decode_quick_bench.py)
    env: PROBE_S="65536 16384 8192", PROBE_KV="bf16 fp8", PROBE_SPLITS="0 256 512 1024 2048 4096"
"""
import os, sys, torch, flashkit
sys.path.insert(0, sys.argv[1])
from decode_quick_bench import graph_ms, kernel_breakdown
d, page, dt = 128, 16, torch.bfloat16
SPLITS = [int(x) for x in os.environ.get("PROBE_SPLITS", "0 256 512 1024 2048 4096").split()]
for S in [int(x) for x in os.environ.get("PROBE_S", "65536 16384 8192").split()]:
    B, hq, hkv = 1, 32, 8
    P = B * ((S + page - 1) // page)
    for kv in os.environ.get("PROBE_KV", "bf16 fp8").split():
        kvd = {"bf16": dt, "fp8": torch.float8_e4m3fn, "int8": torch.int8}[kv]
        k = (torch.randn((P, page, hkv, d), device="cuda") * (1 if kv == "bf16" else 40)).to(dt).to(kvd)
        v = (torch.randn((P, page, hkv, d), device="cuda") * (1 if kv == "bf16" else 40)).to(dt).to(kvd)
        sc = {} if kv == "bf16" else dict(k_scale=torch.rand((P, page, hkv), device="cuda") / 100,
                                          v_scale=torch.rand((P, page, hkv), device="cuda") / 100)
        bt = torch.randperm(P, device="cuda", dtype=torch.int32).view(B, -1)
        sl = torch.full((B,), S, dtype=torch.int32, device="cuda")
        q = torch.randn((B, 1, hq, d), device="cuda", dtype=dt)
        for split in SPLITS:
            if split and split * 2 > S * 2: continue
            plan = flashkit.DecodePlan(B, 1, hq, hkv, d, device="cuda", kv_dtype=None if kv == "bf16" else kvd,
                                       split_size=split, max_seqlen_k=S if split else 0)
            plan.plan(sl)
            step = lambda: plan.run(q, k, v, bt, sl, **sc)
            tg = graph_ms(step) * 1e3
            line = f"S{S:6} {kv:4} split {split:5}: {tg:7.1f} us"
            if split == 0:
                br = kernel_breakdown(lambda: (plan.plan(sl), step()))
                line += "   " + "  ".join(f"{n[:40]} {u:.1f}" for n, u in br.items())
            print(line, flush=True)
        del k, v
        torch.cuda.empty_cache()
