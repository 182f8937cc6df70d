"""Per-tile timeline of the persistent forward kernel from a FLASHKIT_FWD_TRACE=1 build
(kernel_persistent.cuh documents the fields), D128 by default:

    python3 scripts/dev/fwd_trace.py [D] [S] [causal 0/1]

Prints, per tile (CTA, walk step), the medians over the grid of: the consumers' wait for Q,
for K(0), the first Q K^T, the main loop, the epilogue (warpgroup 0 and 1), and when the
producer issued K(0) / Q / V(0) relative to the tile's begin on warpgroup 0.
"""
import os
import statistics
import sys

import torch

import flashkit

D = int(sys.argv[1]) if len(sys.argv) > 1 else 128
S = int(sys.argv[2]) if len(sys.argv) > 2 else 512
causal = len(sys.argv) > 3 and sys.argv[3] == "1"
# "epi": a FLASHKIT_FWD_TRACE=2 build, whose fields 1, 2 (7, 8) are epilogue points
epi = len(sys.argv) > 4 and sys.argv[4] == "epi"
os.environ.setdefault("FLASHKIT_FWD_PERSISTENT", "1")
H, B = 2048 // D, 16384 // S
q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
lse.zero_()
torch.cuda.synchronize()
out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
torch.cuda.synchronize()
steps = 32
sms = torch.cuda.get_device_properties(0).multi_processor_count
raw = lse.reshape(-1).view(torch.int64)[: sms * steps * 16].view(sms, steps, 16).cpu()
valid = raw[:, :, 15] != 0
t0 = raw[raw > 0].min().item()
rel = (raw - t0).double() / 1000.0  # us
rows = []
for c in range(sms):
    for st in range(steps):
        if not valid[c, st] or raw[c, st, 0] == 0:
            continue
        r = rel[c, st]
        if epi:
            rows.append(dict(
                start0=r[3] - r[0], loop0=r[4] - r[3], norm0=r[1] - r[4], stage0=r[2] - r[1], store0=r[5] - r[2],
                start1=r[9] - r[6], loop1=r[10] - r[9], norm1=r[7] - r[10], stage1=r[8] - r[7], store1=r[11] - r[8],
                wg1_lag=r[6] - r[0], tile=r[5] - r[0]))
            continue
        rows.append(dict(
            q0=r[1] - r[0], k0=r[2] - r[1], s0=r[3] - r[2], loop0=r[4] - r[3], epi0=r[5] - r[4],
            q1=r[7] - r[6], k1=r[8] - r[7], s1=r[9] - r[8], loop1=r[10] - r[9], epi1=r[11] - r[10],
            pk=r[12] - r[0], pq=r[13] - r[0], pv=r[14] - r[0], wg1_lag=r[6] - r[0], tile=r[5] - r[0]))
print(f"D{D} S{S} causal={int(causal)}: {len(rows)} traced tiles on {sms} CTAs; kernel span "
      f"{(raw[raw > 0].max().item() - t0) / 1000:.1f} us")
for key in rows[0]:
    vals = sorted(float(x[key]) for x in rows)
    print(f"  {key:6s} median {statistics.median(vals):7.2f} us   p10 {vals[len(vals) // 10]:7.2f}   p90 {vals[9 * len(vals) // 10]:7.2f}")
