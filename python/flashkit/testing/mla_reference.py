"""References of the MLA decode: the tile scheduler (a CPU mirror of the GPU metadata
kernel, and a checker of its invariants) and the attention itself (gather each sequence's
tokens through the block table, K = the whole 576-dim latent vector, V its first 512 dims,
bottom-right causal mask, lse in natural log, rows that see no key: out 0, lse +inf).

The scheduler functions are plain Python (lists in, lists out); the attention references
take numpy arrays (float64) or torch tensors (float32 on their device, or ``compute_dtype``).
"""

from __future__ import annotations

import math

__all__ = ["MLA_BLOCK_N", "MLA_FIXED_OVERHEAD", "mla_schedule_reference", "check_mla_schedule",
           "mla_reference", "mla_pytorch", "mla_gather", "run_mla_decode_poisoned", "paged_pool"]

MLA_BLOCK_N = 64          # tokens per scheduler block (kMlaBlockN)
MLA_FIXED_OVERHEAD = 5    # scheduler cost of starting a sequence, in blocks (kMlaFixedOverhead)


def _blocks(n):
    return (n + MLA_BLOCK_N - 1) // MLA_BLOCK_N if n > 0 else 0


def mla_schedule_reference(seqlens, num_parts):
    """What the metadata kernel writes: ``(sched, num_splits)``, sched a list of num_parts
    rows of 8 ints (begin_batch, begin_block, end_batch, end_block, begin_split, 0, 0, 0),
    num_splits a list of B + 1 prefix counts. Negative lengths count as 0.

    Greedy in batch order: a piece costs its blocks + overhead; payload
    ``P = max(ceil(total / num_parts) + overhead, 2 * overhead)`` with total the sum of
    ``blocks + overhead`` over non-empty sequences; part q takes whole sequences while they
    fit, cuts the first one that does not after ``remaining - overhead`` blocks (if > 0),
    and the last part takes whatever is left. Parts with no work: ``[B, 0, -1, 0, 0, 0, 0, 0]``.
    """
    lens = [max(0, int(x)) for x in seqlens]
    B = len(lens)
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    ov = MLA_FIXED_OVERHEAD
    sched = [[B, 0, -1, 0, 0, 0, 0, 0] for _ in range(num_parts)]
    total = sum(_blocks(n) + ov for n in lens if n > 0)
    payload = max(-(-total // num_parts) + ov, 2 * ov)
    num_splits = [0] * (B + 1)
    q, remaining, opened, pieces = 0, payload, False, 0
    for b, length in enumerate(lens):
        n = _blocks(length)
        blk = split = 0
        while n > 0:
            row = sched[q]
            need = n - blk + ov
            if q == num_parts - 1 or remaining >= need:
                if not opened:
                    row[0], row[1], row[4], opened = b, blk, split, True
                row[2], row[3] = b, n
                remaining -= need
                split += 1
                break
            take = remaining - ov
            if take > 0:
                if not opened:
                    row[0], row[1], row[4] = b, blk, split
                row[2], row[3] = b, blk + take
                blk += take
                split += 1
            q, remaining, opened = q + 1, payload, False
        pieces += split
        num_splits[b + 1] = pieces
    return sched, num_splits


def check_mla_schedule(seqlens, sched, num_splits):
    """Raises AssertionError unless (sched, num_splits) is a valid schedule for seqlens:
    every block of every non-empty sequence covered exactly once, each sequence's pieces in
    part order with split indices 0..n-1, n = num_splits[b + 1] - num_splits[b] (0 exactly
    for empty sequences, which no part visits), parts without work have begin_batch >= B."""
    lens = [max(0, int(x)) for x in seqlens]
    B = len(lens)
    sched = [[int(v) for v in row] for row in sched]
    num_splits = [int(v) for v in num_splits]
    assert len(num_splits) == B + 1 and num_splits[0] == 0, f"num_splits[0] / length: {num_splits[:3]}"
    pieces = {b: [] for b in range(B)}  # b -> [(part, split, lo, hi)]
    for q, row in enumerate(sched):
        bb, bblk, eb, eblk, bsplit = row[:5]
        if bb >= B:
            continue
        assert 0 <= bb <= eb < B, f"part {q}: batches {bb}..{eb}"
        for b in range(bb, eb + 1):
            lo = bblk if b == bb else 0
            hi = eblk if b == eb else _blocks(lens[b])
            split = bsplit if b == bb else 0
            if lens[b] == 0:
                assert b not in (bb, eb), f"part {q} starts or ends at empty sequence {b}"
                continue
            assert 0 <= lo < hi <= _blocks(lens[b]), f"part {q}, sequence {b}: blocks [{lo}, {hi})"
            pieces[b].append((q, split, lo, hi))
    for b in range(B):
        n = num_splits[b + 1] - num_splits[b]
        got = pieces[b]
        if lens[b] == 0:
            assert n == 0 and not got, f"empty sequence {b}: {n} pieces, visited by {got}"
            continue
        assert n == len(got), f"sequence {b}: num_splits says {n} pieces, parts give {len(got)}"
        assert [s for _, s, _, _ in got] == list(range(n)), f"sequence {b}: split indices {got}"
        pos = 0
        for q, _, lo, hi in got:
            assert lo == pos, f"sequence {b}: part {q} starts at block {lo}, expected {pos}"
            pos = hi
        assert pos == _blocks(lens[b]), f"sequence {b}: covered {pos} of {_blocks(lens[b])} blocks"
    assert num_splits[B] <= B + len(sched), f"{num_splits[B]} pieces > B + num_parts"


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def mla_gather(kv_cache, block_table, seqlens, b):
    """kv [1, n, h_kv, 576] of sequence b's valid tokens, in order (lengths clamped to the
    block table's capacity; tokens whose block id is outside [0, num_pages) left out)."""
    page = kv_cache.shape[1]
    cap = block_table.shape[1] * page
    n = max(0, min(int(seqlens[b]), cap))
    if _is_torch(kv_cache):
        import torch

        pos = torch.arange(n, device=kv_cache.device)
        pages = block_table[b].long()[pos // page] if n else pos
    else:
        import numpy as np

        pos = np.arange(n)
        pages = np.asarray(block_table[b]).astype(np.int64)[pos // page] if n else pos
    ok = (pages >= 0) & (pages < kv_cache.shape[0])
    pos, pages = pos[ok], pages[ok]
    return kv_cache[pages, pos % page][None], bool(ok.all())


def _per_sequence(fn, q, kv_cache, block_table, seqlens, causal, softmax_scale, head_dim_v):
    outs, lses = [], []
    for b in range(q.shape[0]):
        kv, complete = mla_gather(kv_cache, block_table, seqlens, b)
        if causal and not complete:
            raise ValueError("mla_reference: causal with skipped tokens is not modelled")
        out, lse = fn(q[b:b + 1], kv, kv[..., :head_dim_v], causal, softmax_scale)
        outs.append(out)
        lses.append(lse)
    return outs, lses


def mla_reference(q, kv_cache, block_table, seqlens, causal=False, softmax_scale=None,
                  head_dim_v=512, compute_dtype=None):
    """``(out [B, s_q, h_q, 512], lse [B, h_q, s_q])``: float64 for numpy, float32 (or
    ``compute_dtype``) for torch. Empty rows: out 0, lse +inf (FlashMLA's convention)."""
    from .reference import attention_reference

    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    outs, lses = _per_sequence(
        lambda q1, k, v, c, s: attention_reference(q1, k, v, c, s, compute_dtype=compute_dtype),
        q, kv_cache, block_table, seqlens, causal, softmax_scale, head_dim_v)
    if _is_torch(q):
        import torch

        out, lse = torch.cat(outs), torch.cat(lses)
        lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    else:
        import numpy as np

        out, lse = np.concatenate(outs), np.concatenate(lses)
        lse = np.where(np.isneginf(lse), np.inf, lse)
    return out, lse


def mla_pytorch(q, kv_cache, block_table, seqlens, causal=False, softmax_scale=None,
                head_dim_v=512):
    """PyTorch's attention in q's dtype on the gathered cache (the SPEC §3 baseline)."""
    import torch

    from .reference import attention_pytorch

    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    outs, _ = _per_sequence(lambda q1, k, v, c, s: (attention_pytorch(q1, k, v, c, s), None), q,
                            kv_cache, block_table, seqlens, causal, softmax_scale, head_dim_v)
    return torch.cat(outs)


def run_mla_decode_poisoned(q, kv, block_table, seqlens, causal=False, scale=None, expect_errors=0, head_dim_v=512):
    """get_mla_metadata + the decode (through ``flashkit._C``, so that the NaN-poisoned out
    and lse are the tensors written) over a 16-bit or FP8 (656-byte) cache; asserts the
    device error word equals ``expect_errors``. Returns (out, lse). CUDA tensors only."""
    import torch

    import flashkit
    import flashkit.mla as flash_mla
    from .reference import poison_

    flashkit.device_errors(clear=True)
    B, s_q, h_q, _ = q.shape
    h_kv = kv.shape[2]
    sched, splits = flash_mla.get_mla_metadata(seqlens, s_q * h_q // h_kv, h_kv)
    out = poison_(torch.empty((B, s_q, h_q, head_dim_v), dtype=q.dtype, device=q.device))
    lse = poison_(torch.empty((B, h_q, s_q), dtype=torch.float32, device=q.device))
    ws = torch.empty((flash_mla.mla_workspace_size(B, s_q, h_q, sched.shape[0]),), dtype=torch.uint8,
                     device=q.device)
    flashkit._C.mla_decode(q, kv, block_table, seqlens, sched, splits, out, lse, ws, head_dim_v, scale or 0.0,
                           causal, False, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    errors = flashkit.device_errors(clear=True)
    assert errors == expect_errors, f"device error word {errors:#x}, expected {expect_errors:#x}"
    return out, lse


def paged_pool(lens, page, extra_pages, generator, junk=-7, device="cuda", ordered=False):
    """The page layout of a paged test case: sequences of ``lens`` tokens on a shuffled pool
    of pages (every sequence owns at least one page, ``extra_pages`` stay unused); with
    ``ordered`` the pool is not shuffled: each sequence owns consecutive page ids, in order
    (what a fresh allocator gives; the MLA Hopper kernel's page runs), and nothing is drawn.

    Returns ``(num_pages, block_table, slots)``: the block table is int32 ``[B, max pages +
    1]`` with ``junk`` past each sequence's pages (never read by a correct kernel);
    ``slots[b]`` is the (pool page, in-page slot) pair of long tensors of sequence b's
    tokens, for writing them into a cache ``[num_pages, page, ...]`` (None when b is empty).
    The only random draw is the pool's permutation (one ``randperm`` on ``generator``), so
    callers that draw each sequence's values afterwards keep their random streams."""
    import torch

    pages_per = [max(1, math.ceil(max(n, 0) / page)) for n in lens]
    num_pages = sum(pages_per) + extra_pages
    if ordered:
        perm = torch.arange(num_pages, dtype=torch.int32, device=device)
    else:
        perm = torch.randperm(num_pages, generator=generator, device=device).int()
    bt = torch.full((len(lens), max(pages_per) + 1), junk, dtype=torch.int32, device=device)
    slots, i = [], 0
    for b, n in enumerate(lens):
        bt[b, :pages_per[b]] = perm[i:i + pages_per[b]]
        i += pages_per[b]
        if n > 0:
            pos = torch.arange(n, device=device)
            slots.append((bt[b].long()[pos // page], pos % page))
        else:
            slots.append(None)
    return num_pages, bt, slots
