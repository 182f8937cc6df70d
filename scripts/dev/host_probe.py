"""Where a short fwd_bwd call's time goes: GPU time vs host time per call, and the CUDA API calls
the host makes (syncs, mallocs, attribute sets), FlashKit's autograd path against SDPA cuDNN.

    python3 scripts/dev/host_probe.py [--out DIR]
"""
import argparse

import torch
import triton.testing as tt
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashkit
from host_timing import emit, host_us_per_call  # (scripts/dev, the script's folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp")
    ap.add_argument("--shape", default="32,512,16,128")
    a = ap.parse_args()
    B, S, H, D = map(int, a.shape.split(","))
    dt = torch.bfloat16
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=dt) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_(True) for t in (q, k, v))
    dot = do.transpose(1, 2).contiguous()

    def fk_fwd_bwd():
        o = flashkit.attention(q, k, v, causal=True)
        return torch.autograd.grad(o, (q, k, v), do)

    def fk_fwd_only():
        with torch.no_grad():
            return flashkit.attention(q.detach(), k.detach(), v.detach(), causal=True)

    o0, lse0 = flashkit.attention(q.detach(), k.detach(), v.detach(), causal=True, return_lse=True)

    def fk_bwd_only():
        return flashkit.attention_backward(do, q.detach(), k.detach(), v.detach(), o0, lse0, causal=True)

    def cd_fwd_bwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
            return torch.autograd.grad(o, (qt, kt, vt), dot)

    lines = [f"shape B={B} S={S} H={H} D={D} causal bf16 on {torch.cuda.get_device_name()}"]
    for name, fn in (("fk_fwd", fk_fwd_only), ("fk_bwd", fk_bwd_only), ("fk_fwd_bwd", fk_fwd_bwd),
                     ("cudnn_fwd_bwd", cd_fwd_bwd)):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ms = tt.do_bench(fn, warmup=25, rep=200, return_mode="median")
        host = host_us_per_call(fn, n=50, warmup=0)
        lines.append(f"{name:14s} do_bench median {ms * 1e3:8.1f} us | host enqueue {host:8.1f} us/call")
    from torch.profiler import profile, ProfilerActivity
    for name, fn in (("fk_fwd_bwd", fk_fwd_bwd), ("cudnn_fwd_bwd", cd_fwd_bwd)):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        tab = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
        lines.append(f"\n==== {name} (20 calls) ====\n{tab}")
        prof.export_chrome_trace(f"{a.out}/trace_{name}_{a.shape.replace(',', '-')}.json")
    emit(lines, f"{a.out}/host_probe_{a.shape.replace(',', '-')}.txt")


if __name__ == "__main__":
    main()
