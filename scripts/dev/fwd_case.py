"""One forward call of the FA3 sweep's shape family, run a few times (for ncu / nsys; a
development tool): 16k tokens, hidden 2048, bf16.

    python3 scripts/dev/fwd_case.py D S causal(0|1)
"""
import sys

import torch

import flashkit

D, S, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
H = 2048 // D
B = 16384 // S
q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    flashkit.attention(q, k, v, causal=causal)
torch.cuda.synchronize()
