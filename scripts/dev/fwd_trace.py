"""Per-tile timeline of the persistent forward kernel from a FLASHKIT_FWD_TRACE=1 build
(kernel_persistent.cuh documents the fields), D128 by default:

    python3 scripts/dev/fwd_trace.py [D] [S] [causal 0/1]

Prints, per tile (CTA, walk step), the medians over the grid of: the consumers' wait for Q,
for K(0), the first Q K^T, the main loop, the epilogue (warpgroup 0 and 1, and 2 at d64, whose
persistent kernel has three consumer warpgroups: 24 fields per step instead of 16), and when
the producer issued K(0) / Q / V(0) relative to the tile's begin on warpgroup 0. A warpgroup
that skipped the whole block (rows past the end, or no visible key) has no K(0) / first-S /
last-P V points: its tile is left out of that warpgroup's columns.
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
nwg = 3 if D == 64 and os.environ.get("FLASHKIT_FWD_D64_WG3", "1") != "0" else 2
nf, pb = (24 if nwg == 3 else 16), 6 * nwg  # fields per step, the producer's first field
raw = lse.reshape(-1).view(torch.int64)[: sms * steps * nf].view(sms, steps, nf).cpu()
valid = raw[:, :, pb + 3] != 0
t0 = raw[raw > 0].min().item()
rel = (raw - t0).double() / 1000.0  # us
rows = []
for c in range(sms):
    for st in range(steps):
        if not valid[c, st] or raw[c, st, 0] == 0:
            continue
        r, z = rel[c, st], raw[c, st]
        row = dict(tile=r[5] - r[0])
        for w in range(nwg):
            f = 6 * w
            if any(z[f + i] == 0 for i in range(6)):
                continue  # this warpgroup skipped the block
            if epi:
                row.update({f"start{w}": r[f + 3] - r[f], f"loop{w}": r[f + 4] - r[f + 3],
                            f"norm{w}": r[f + 1] - r[f + 4], f"stage{w}": r[f + 2] - r[f + 1],
                            f"store{w}": r[f + 5] - r[f + 2]})
            else:
                row.update({f"q{w}": r[f + 1] - r[f], f"k{w}": r[f + 2] - r[f + 1], f"s{w}": r[f + 3] - r[f + 2],
                            f"loop{w}": r[f + 4] - r[f + 3], f"epi{w}": r[f + 5] - r[f + 4]})
            if w:
                row[f"wg{w}_lag"] = r[f] - r[0]
        if not epi:
            row.update(pk=r[pb] - r[0], pq=r[pb + 1] - r[0], pv=r[pb + 2] - r[0])
        rows.append(row)
print(f"D{D} S{S} causal={int(causal)}, {nwg} consumer warpgroups: {len(rows)} traced tiles on {sms} CTAs; "
      f"kernel span {(raw[raw > 0].max().item() - t0) / 1000:.1f} us")
keys = list(dict.fromkeys(k for x in rows for k in x))
for key in keys:
    vals = sorted(float(x[key]) for x in rows if key in x)
    print(f"  {key:8s} median {statistics.median(vals):7.2f} us   p10 {vals[len(vals) // 10]:7.2f}   "
          f"p90 {vals[9 * len(vals) // 10]:7.2f}   ({len(vals)} tiles)")
