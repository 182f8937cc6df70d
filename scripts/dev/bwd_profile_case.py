"""One backward configuration run a few times, for ncu / nsys (a development tool):

    ncu --kernel-name regex:bwd_kernel --launch-skip 2 --launch-count 1 \\
        python3 scripts/dev/bwd_profile_case.py [B S H D [causal [deterministic]]]
"""
import math
import sys

import torch

import flashkit

C = flashkit._C


def main():
    a = sys.argv[1:]
    B, S, H, D = (int(x) for x in a[:4]) if len(a) >= 4 else (4, 4096, 16, 128)
    causal = len(a) > 4 and a[4] == "1"
    det = len(a) > 5 and a[5] == "1"
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    ws = torch.empty(C.attention_bwd_workspace_size(B, B * S, S, H, D, det), dtype=torch.uint8, device="cuda")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(4):
        C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, None, None, 0, 0, 1 / math.sqrt(D), causal, det, ws,
                        stream, False)
    torch.cuda.synchronize()
    print("ok", B, S, H, D, causal, det)


if __name__ == "__main__":
    main()
