"""Reference of the paged decode: gather each sequence's cache into a contiguous copy and
run the high-precision dense reference (bottom-right causal alignment is exactly the
decode rule: query token t of s_q sees keys j <= len - s_q + t).

torch tensors only (the decode tests run on the GPU). Tokens whose block id is outside
``[0, num_pages)`` are left out, as the kernel does; lengths are clamped to the block
table's capacity.
"""

from __future__ import annotations

__all__ = ["decode_reference", "decode_pytorch", "gather_kv"]


def gather_kv(k_cache, v_cache, block_table, seqlens_k, b):
    """(k [1, n, H_kv, D], v [1, n, H_kv, D_v]) of sequence b's valid tokens, in order."""
    import torch

    page = k_cache.shape[1]
    cap = block_table.shape[1] * page
    n = max(0, min(int(seqlens_k[b]), cap))
    pos = torch.arange(n, device=k_cache.device)
    pages = block_table[b].long()[pos // page] if n else pos
    ok = (pages >= 0) & (pages < k_cache.shape[0])
    pos, pages = pos[ok], pages[ok]
    k = k_cache[pages, pos % page]
    v = v_cache[pages, pos % page]
    return k.unsqueeze(0), v.unsqueeze(0), ok


def _per_sequence(fn, q, k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale):
    import torch

    outs, lses = [], []
    for b in range(q.shape[0]):
        k, v, ok = gather_kv(k_cache, v_cache, block_table, seqlens_k, b)
        if not bool(ok.all()) and causal:
            raise ValueError("decode_reference: causal with skipped tokens is not modelled")
        res = fn(q[b:b + 1], k, v, causal, softmax_scale)
        out, lse = res if isinstance(res, tuple) else (res, None)
        outs.append(out)
        if lse is not None:
            lses.append(lse)
    out = torch.cat(outs) if outs else q.new_empty(q.shape)
    return out, (torch.cat(lses) if lses else None)


def decode_reference(q, k_cache, v_cache, block_table, seqlens_k, causal=True,
                     softmax_scale=None):
    """``(out [B, s_q, H_q, D_v], lse [B, H_q, s_q])`` computed in float64 on the inputs' device
    (the decode issue's reference: a contiguous gather of the cache, float64)."""
    import torch

    from .reference import attention_reference

    return _per_sequence(
        lambda q1, k, v, c, s: attention_reference(q1, k, v, c, s, compute_dtype=torch.float64), q,
        k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale)


def decode_pytorch(q, k_cache, v_cache, block_table, seqlens_k, causal=True,
                   softmax_scale=None):
    """PyTorch's own attention in q's dtype on the gathered cache (the SPEC §3 baseline)."""
    from .reference import attention_pytorch

    out, _ = _per_sequence(lambda q1, k, v, c, s: attention_pytorch(q1, k, v, c, s), q,
                           k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale)
    return out
