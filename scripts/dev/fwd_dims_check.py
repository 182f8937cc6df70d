"""Forward speed and accuracy for chosen head dims (D 96/192 are not in the SPEC sweeps):
flashkit.attention against SDPA cuDNN / flash and a float32 reference, hidden 2048, 16k tokens.

    python3 scripts/dev/fwd_dims_check.py [D ...]     (FLASHKIT_FWD_PORTABLE=1: portable)
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashkit


def bench(fn, iters=30):
    for _ in range(3):
        fn()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    st.record()
    for _ in range(iters):
        fn()
    en.record()
    torch.cuda.synchronize()
    return st.elapsed_time(en) / iters


def main():
    dims = [int(a) for a in sys.argv[1:]] or [96, 192]
    fam = "portable" if os.environ.get("FLASHKIT_FWD_PORTABLE") == "1" else "default"
    for D in dims:
        H = 2048 // D
        for S in (512, 2048, 8192):
            B = 16384 // S
            for causal in (False, True):
                g = torch.Generator(device="cuda").manual_seed(S + D)
                q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
                           for _ in range(3))
                out = flashkit.attention(q, k, v, causal=causal)
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
                ref = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(),
                                                     is_causal=causal).transpose(1, 2)
                err = (out.float() - ref).abs().max().item()
                flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
                t_fk = bench(lambda: flashkit.attention(q, k, v, causal=causal))
                row = f"{fam:8s} D={D:3d} S={S:5d} causal={int(causal)} err={err:.2e} flashkit={flops / t_fk / 1e9:6.1f}"
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                    try:
                        with sdpa_kernel(be):
                            t = bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))
                        row += f" {name}={flops / t / 1e9:6.1f}"
                    except Exception as e:  # backend refuses the shape
                        row += f" {name}=n/a"
                print(row + " TFLOPS", flush=True)


if __name__ == "__main__":
    main()
