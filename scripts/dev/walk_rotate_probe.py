"""Where the rotated persistent walk (FwdParams::walk_rotate) and the snake walk differ: run once with
FLASHKIT_FWD_WALK_ROTATE unset and once with =0 (save / compare), each output also against an fp32
reference; prints max errors, the number of differing elements and the differing 192/128-row blocks.

    python3 walk_rotate_probe.py save F.pt ; FLASHKIT_FWD_WALK_ROTATE=0 python3 walk_rotate_probe.py compare F.pt
"""
import sys

import torch

import flashkit

SHAPES = ((64, 4, 12, 1024, 192), (64, 1, 24, 2048, 192), (128, 1, 40, 1024, 128))


def run():
    g = torch.Generator(device="cuda").manual_seed(7)
    res = []
    for D, B, H, S, bm in SHAPES:
        q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(B, S, H // 4, D, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(k.shape, device="cuda", dtype=k.dtype, generator=g)
        outs = []
        for rep in range(2):
            o = torch.full_like(q, float("nan"))
            o, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
            outs.append(o.clone())
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float().transpose(1, 2), k.float().transpose(1, 2).repeat_interleave(4, 1),
            v.float().transpose(1, 2).repeat_interleave(4, 1), is_causal=True).transpose(1, 2)
        err = (outs[0].float() - ref).abs().max().item()
        rep_same = torch.equal(outs[0], outs[1])
        res.append((D, B, H, S, bm, outs[0].cpu(), err, rep_same))
    return res


mode, path = sys.argv[1], sys.argv[2]
res = run()
if mode == "save":
    torch.save([r[5] for r in res], path)
    for r in res:
        print(f"D{r[0]} B{r[1]} H{r[2]} S{r[3]}: max|o - ref| {r[6]:.4f}, run-to-run equal {r[7]}")
else:
    other = torch.load(path)
    for r, o2 in zip(res, other):
        o1 = r[5]
        diff = (o1.float() - o2.float()).abs()
        n = int((o1 != o2).sum())
        rows = (diff.amax(dim=(2, 3)) > 0).nonzero()  # (b, s)
        blocks = sorted({(int(b), int(s) // r[4]) for b, s in rows.tolist()})
        heads = sorted({int(h) for h in (diff.amax(dim=(1, 3)) > 0).nonzero()[:, 1].tolist()})
        print(f"D{r[0]} B{r[1]} H{r[2]} S{r[3]}: max|o - ref| {r[6]:.4f} (this run), run-to-run equal {r[7]}; "
              f"vs saved: {n} elements differ, max {diff.max().item():.4g}; (batch, row block) {blocks[:20]}; heads {heads[:20]}")
