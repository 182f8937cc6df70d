"""One measured call (between cudaProfilerStart / Stop) of FlashKit or SDPA's cuDNN backend, for ncu's DRAM
byte counts (scripts/dev/dram_survey.sh): forward or backward of the FA3 sweep's shape at head dim D and
length S (16k tokens, hidden 2048).

    python3 dram_survey.py fk|cudnn fwd|bwd D S causal(0|1)
    python3 dram_survey.py fk|cudnn decode B S_k 1      (paged decode, D 128, 32 / 8 heads, page 16)
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashkit

impl, op, D, S, causal = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
if op == "decode":
    # decode: D is the batch here, S the cached length; D 128, 32 / 8 heads, page 16, one new token
    # (the bench's decode rows; the K/V bytes are B * S * 8 * 128 * 2 * 2). fk: DecodePlan.run of a
    # plan made outside (the bench's form); cudnn: SDPA on the contiguous copy with enable_gqa.
    B, Hq, Hkv, Dh, P = D, 32, 8, 128, 16
    q = torch.randn(B, 1, Hq, Dh, device="cuda", dtype=torch.bfloat16)
    if impl == "fk":
        n = -(-S // P)
        perm = torch.randperm(B * n, dtype=torch.int32)
        table = perm.view(B, n).cuda()
        kc, vc = (torch.randn(B * n, P, Hkv, Dh, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((B,), S, dtype=torch.int32, device="cuda")
        plan = flashkit.DecodePlan(B, 1, Hq, Hkv, Dh, device=q.device, split_size=0, max_seqlen_k=S)
        plan.plan(lens)
        call = lambda: plan.run(q, kc, vc, table, lens, causal=True)
    else:
        kc, vc = (torch.randn(B, Hkv, S, Dh, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        qt = q.transpose(1, 2)

        def call():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kc, vc, enable_gqa=True)
    print(f"K/V bytes {B * S * Hkv * Dh * 4 / 1e6:.1f} MB", file=sys.stderr)
else:
    H, B = 2048 // D, 16384 // S
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))


def sdpa(q, k, v):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)


if op == "decode":
    pass
elif impl == "fk":
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
