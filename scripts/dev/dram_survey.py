"""One measured call (between cudaProfilerStart / Stop) of FlashKit or SDPA's cuDNN backend, for ncu's DRAM
byte counts (scripts/dev/dram_survey.sh): forward or backward of the FA3 sweep's shape at head dim D and
length S (16k tokens, hidden 2048).

    python3 dram_survey.py fk|cudnn fwd|bwd D S causal(0|1)
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashkit

impl, op, D, S, causal = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
H, B = 2048 // D, 16384 // S
q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))


def sdpa(q, k, v):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)


if impl == "fk":
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    call = (lambda: flashkit.attention(q, k, v, causal=causal)) if op == "fwd" else \
        (lambda: flashkit.attention_backward(do, q, k, v, out, lse, causal=causal))
else:
    if op == "fwd":
        call = lambda: sdpa(q, k, v)
    else:
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        o = sdpa(qg, kg, vg)
        call = lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
for _ in range(3):
    call()
torch.cuda.synchronize()
# ncu --profile-from-start off: only the kernels between these two calls, from every thread (autograd runs
# the backward on its own thread, which an NVTX range of this one would miss)
torch.cuda.cudart().cudaProfilerStart()
call()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
