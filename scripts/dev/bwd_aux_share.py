"""Where a backward call's GPU time goes: the main kernel against the small kernels around it
(bwd_pre_kernel: delta and the dq accumulator's clearing; bwd_post_kernel: dq in the input dtype),
per FA3-sweep shape (a development tool; docs/kernels/bwd.md "The kernels around the main one").

    python3 scripts/dev/bwd_aux_share.py [--dims 64 128 256] [--det] [--out FILE]

For each shape: torch.profiler over REPS calls of the native backward (flashkit._C.attention_bwd,
preallocated outputs and workspace), kernel times summed by kind and divided by REPS; the bytes the
pre and post kernels must move (pre: read O and dO, write the fp32 accumulator's zeros and delta;
post: read the accumulator, write dq) over their time; and, for scale, a device-to-device copy of
the pre kernel's byte count timed the same way.
"""
import argparse
import math

import torch
from torch.profiler import ProfilerActivity, profile

import flashkit

C = flashkit._C
REPS = 10


def kind(name):
    if "bwd_pre_kernel" in name:
        return "pre"
    if "bwd_post_kernel" in name:
        return "post"
    if "bwd_zero_rows" in name:
        return "zero"
    return "main"


def measure(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPS):
            fn()
        torch.cuda.synchronize()
    sums = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kind(e.name)
            sums[k] = sums.get(k, 0.0) + e.device_time / REPS  # us
    return sums


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--det", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = [f"gpu: {torch.cuda.get_device_name()}  deterministic: {a.det}",
             "D  causal      S  main_us  pre_us  post_us  aux_share  pre_GB/s  post_GB/s  copy_GB/s  bwd_TFLOPS"]
    for D in a.dims:
        H = 2048 // D
        for causal in (False, True):
            for S in (512, 1024, 2048, 4096, 8192, 16384):
                B = 16384 // S
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
                                 for _ in range(4))
                out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
                ws = torch.empty(C.attention_bwd_workspace_size(B, B * S, S, H, D, a.det), dtype=torch.uint8,
                                 device="cuda")
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                stream = torch.cuda.current_stream().cuda_stream

                def call():
                    C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, None, None, 0, 0, 1 / math.sqrt(D),
                                    causal, a.det, ws, stream, False)

                t = measure(call)
                n = B * S * H * D
                pre_bytes = 2 * n * 2 + n * 4 + B * S * H * 4
                post_bytes = n * 4 + n * 2
                src = torch.empty(pre_bytes // 2, dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                tc = measure(lambda: dst.copy_(src)).get("main", float("nan"))
                flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0) * 2.5
                total = sum(t.values())
                lines.append(
                    f"{D:3d} {str(causal):6s} {S:6d} {t.get('main', 0):8.1f} {t.get('pre', 0):7.1f} {t.get('post', 0):8.1f}"
                    f"  {(t.get('pre', 0) + t.get('post', 0)) / total:9.3f}  {pre_bytes / t.get('pre', 1) / 1e3:8.0f}"
                    f"  {post_bytes / t.get('post', 1) / 1e3:9.0f}  {pre_bytes / tc / 1e3:9.0f}  {flops / total / 1e6:10.1f}")
                print(lines[-1], flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
