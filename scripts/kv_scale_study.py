#!/usr/bin/env python3
"""Scale granularity of the 8-bit KV caches, measured (issue 10: "FP8 e4m3 with per-page-per-head
scales (or per-token-per-head: measure and pick)"). CPU only, float64 attention, no GPU needed.

FlashKit ships per-token-per-head scales (amax / 448 for e4m3, amax / 127 for int8; the append kernel
quantizes each token as it is written). This script compares them, on the same data, with
per-page-per-head scales in the forms a paged cache could keep them:

  token        one scale per (token, head): what FlashKit ships
  page         one scale per (page, head), from the amax of the whole page (every token known when
               the page is written: prefill; the best case for page scales)
  page_first   the page's scale fixed by its first token's amax times a headroom (1, 2 or 4); later
               tokens that exceed it saturate. What an append-time quantizer can do without touching
               the page's earlier tokens.
  page_requant the page's scale raised whenever a new token exceeds it, the earlier tokens
               dequantized and quantized again (a read-modify-write of the page per such append; the
               earlier tokens are rounded twice)

Metric: one decode step (s_q 1, GQA 32/8, D 128) over S tokens: the attention output's relative L2
error against unquantized float64 attention, and its largest absolute error over the output's RMS;
median over seeds. Bytes per token and KV head (K + V) show what each costs to read.

    python3 scripts/kv_scale_study.py [--tokens 4096] [--page 16] [--seeds 3] [--csv FILE]
"""
import argparse
import csv
import math
import statistics

import torch

QMAX = {"fp8_e4m3": 448.0, "int8": 127.0}


def quantize(x, scale, kind):
    """x / scale stored in 8 bits, returned dequantized (float64). scale broadcasts against x."""
    y = x / scale
    if kind == "int8":
        y = y.round().clamp(-127, 127)
    else:
        y = y.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float64)
    return y * scale


def safe(amax, kind):
    return torch.where(amax > 0, amax / QMAX[kind], torch.ones_like(amax))


def quant_cache(x, kind, scheme, page, headroom=1.0):
    """x: [S, H, D] float64 -> the dequantized cache under `scheme`."""
    S, H, D = x.shape
    if scheme == "token":
        return quantize(x, safe(x.abs().amax(-1, keepdim=True), kind), kind)
    pad = (-S) % page
    xp = torch.cat([x, x.new_zeros(pad, H, D)]) if pad else x
    pages = xp.view(-1, page, H, D)  # [P, page, H, D]
    if scheme == "page":
        scale = safe(pages.abs().amax(dim=(1, 3), keepdim=True), kind)  # [P, 1, H, 1]
        out = quantize(pages, scale, kind)
    elif scheme == "page_first":
        scale = safe(pages[:, :1].abs().amax(dim=(1, 3), keepdim=True) * headroom, kind)
        out = quantize(pages, scale, kind)
    elif scheme == "page_requant":
        out = torch.empty_like(pages)
        scale = None
        for t in range(page):  # tokens appended one at a time
            tok = pages[:, t:t + 1]
            need = safe(tok.abs().amax(dim=(1, 3), keepdim=True), kind)
            if scale is None:
                scale = need
            else:
                grow = need > scale
                if bool(grow.any()):
                    new = torch.where(grow, need, scale)
                    # earlier tokens of the pages whose scale grew: read, dequantized, quantized again
                    out[:, :t] = torch.where(grow, quantize(out[:, :t], new, kind), out[:, :t])
                    scale = new
            out[:, t:t + 1] = quantize(tok, scale, kind)
    else:
        raise ValueError(scheme)
    return out.reshape(-1, H, D)[:S]


def attention(q, k, v):
    """q [Hq, D], k / v [S, Hkv, D] -> out [Hq, D] (float64, one decode step, no mask)."""
    hq, d = q.shape
    r = hq // k.shape[1]
    kk = k.repeat_interleave(r, dim=1).transpose(0, 1)  # [Hq, S, D]
    vv = v.repeat_interleave(r, dim=1).transpose(0, 1)
    p = torch.softmax(torch.einsum("hd,hsd->hs", q, kk) / math.sqrt(d), dim=-1)
    return torch.einsum("hs,hsd->hd", p, vv)


def make_data(kind, S, H, D, gen):
    k = torch.randn(S, H, D, generator=gen, dtype=torch.float64)
    v = torch.randn(S, H, D, generator=gen, dtype=torch.float64)
    if kind == "token_norms":  # per-token magnitudes spread log-normally (sigma 0.5)
        k = k * torch.exp(0.5 * torch.randn(S, H, 1, generator=gen, dtype=torch.float64))
        v = v * torch.exp(0.5 * torch.randn(S, H, 1, generator=gen, dtype=torch.float64))
    elif kind == "outlier_tokens":  # an attention-sink-like token (x8) and 1% of tokens x4
        f = torch.ones(S, 1, 1, dtype=torch.float64)
        f[torch.randperm(S, generator=gen)[: max(1, S // 100)]] = 4.0
        f[0] = 8.0
        k, v = k * f, v * f
    elif kind == "outlier_channels":  # two K channels 30x the rest (the tests' case)
        k[..., :2] *= 30.0
    elif kind != "normal":
        raise ValueError(kind)
    return k, v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--csv")
    a = ap.parse_args()
    schemes = [("token", 1.0), ("page", 1.0), ("page_first", 1.0), ("page_first", 2.0), ("page_first", 4.0),
               ("page_requant", 1.0)]
    datas = ["normal", "token_norms", "outlier_tokens", "outlier_channels"]
    rows = []
    print(f"S={a.tokens} page={a.page} H={a.hq}/{a.hkv} D={a.d} seeds={a.seeds}: relative L2 / max abs over RMS "
          "of one decode step's output against float64 attention on the unquantized cache (median over seeds)")
    for cache in ("fp8_e4m3", "int8"):
        for data in datas:
            for scheme, head in schemes:
                rel, mx = [], []
                for seed in range(a.seeds):
                    gen = torch.Generator().manual_seed(1000 * seed + datas.index(data))
                    k, v = make_data(data, a.tokens, a.hkv, a.d, gen)
                    q = torch.randn(a.hq, a.d, generator=gen, dtype=torch.float64)
                    ref = attention(q, k, v)
                    got = attention(q, quant_cache(k, cache, scheme, a.page, head),
                                    quant_cache(v, cache, scheme, a.page, head))
                    err = got - ref
                    rms = ref.pow(2).mean().sqrt()
                    rel.append(float(err.norm() / ref.norm()))
                    mx.append(float(err.abs().max() / rms))
                name = scheme if scheme != "page_first" else f"page_first_x{head:g}"
                per_tok = a.d + (4.0 if scheme == "token" else 4.0 / a.page)
                rows.append(dict(cache=cache, data=data, scheme=name, page=a.page, tokens=a.tokens,
                                 rel_l2=statistics.median(rel), max_abs_over_rms=statistics.median(mx),
                                 bytes_per_token_head=2 * per_tok))
                print(f"{cache:9s} {data:17s} {name:15s} rel_l2 {rows[-1]['rel_l2']:.4f}  "
                      f"max/rms {rows[-1]['max_abs_over_rms']:.4f}  K+V bytes/token/head {2 * per_tok:.2f}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
