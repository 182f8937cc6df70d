"""A small causal call per head dim whose persistent walk is rotated on a 132-SM GPU (more units than
CTAs, U | 132), for compute-sanitizer: D 64 S 512 (192-row blocks, U 2) x 68 heads, D 128 S 1k (U 4) x 34.

    compute-sanitizer --tool racecheck python3 walk_rotate_sanitize.py
"""
import torch

import flashkit

g = torch.Generator(device="cuda").manual_seed(1)
for D, H, S in ((64, 68, 512), (128, 34, 1024)):
    q, k, v = (torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    o = flashkit.attention(q, k, v, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                                           v.float().transpose(1, 2), is_causal=True).transpose(1, 2)
    err = (o.float() - ref).abs().max().item()
    print(f"D{D} H{H} S{S}: max err {err:.4f}")
    assert err < 0.03
torch.cuda.synchronize()
print("ok")
