"""MLA decode (DeepSeek multi-head latent attention, absorbed form) over a paged latent
cache: a drop-in for FlashMLA's Python interface.

::

    import flashkit.mla as flash_mla

    tile_scheduler_metadata, num_splits = flash_mla.get_mla_metadata(
        cache_seqlens, s_q * h_q // h_kv, h_kv)
    for layer in layers:
        out, lse = flash_mla.flash_mla_with_kvcache(
            q, k_cache, block_table, cache_seqlens, 512, tile_scheduler_metadata, num_splits,
            causal=True)

Layout: ``q [B, s_q, h_q, 576]`` (s_q = 1..4), ``k_cache [num_pages, page_size, h_kv, 576]``
(K is the whole latent vector, V its first 512 dims; any page size; last dim contiguous),
``block_table [B, max_pages]`` int32, ``cache_seqlens [B]`` int32 (the new tokens
included). Returns ``out [B, s_q, h_q, 512]`` in q's dtype and ``lse [B, h_q, s_q]`` float32
(natural log). With ``causal``, query token t sees keys ``j < len - (s_q - 1 - t)``. A row
that sees no key gets out 0 and lse +inf (FlashMLA's convention).

Both calls launch on the current stream with no host sync (CUDA-graph capturable; re-run
``get_mla_metadata`` whenever the lengths change) and are ``torch.library`` custom ops with
fake implementations (``torch.compile(fullgraph=True)`` traces ``flash_mla_with_kvcache``).
Device-side index data is never trusted: lengths outside ``[0, max_pages * page_size]`` are
clamped and block ids outside ``[0, num_pages)`` are skipped; both set a bit of the device
error word (:func:`flashkit.device_errors`). ``FLASHKIT_MLA_PORTABLE=1`` forces the portable
split kernel (read on every call).
"""

from __future__ import annotations

__all__ = ["get_mla_metadata", "flash_mla_with_kvcache", "mla_num_parts", "mla_workspace_size",
           "split_kernel_family"]

_SM_COUNT = {}


def _tops():
    from . import _torch_mla_ops

    return _torch_mla_ops


def _native():
    from .ops import _native as n

    return n()


def _int_arg(name, v):
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    return int(v)


def _sm_count(device):
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    n = _SM_COUNT.get(index)
    if n is None:
        n = _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return n


def mla_num_parts(num_sms, num_heads_per_head_k, num_heads_k):
    """Scheduler parts: ``num_sms // h_kv // ceil(rows_per_kv / 64)``, at least 1."""
    return _native().mla_num_parts(_int_arg("num_sms", num_sms),
                                   _int_arg("num_heads_per_head_k", num_heads_per_head_k),
                                   _int_arg("num_heads_k", num_heads_k))


def mla_workspace_size(batch, s_q, num_heads_q, num_parts):
    """Bytes of workspace ``flash_mla_with_kvcache`` allocates for these sizes."""
    return _native().mla_workspace_size(batch, s_q, num_heads_q, num_parts)


def split_kernel_family(dtype):
    """'sm90' or 'sm80': the split kernel a call in ``dtype`` runs now on the current device
    ('' if not compiled). ``FLASHKIT_MLA_PORTABLE=1`` gives 'sm80'."""
    import torch

    name = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(dtype, str(dtype))
    return _native().mla_split_kernel_family(name)


def get_mla_metadata(cache_seqlens, num_heads_per_head_k, num_heads_k):
    """The tile scheduler, computed on the GPU from ``cache_seqlens`` (no host sync).

    Args:
        cache_seqlens: int32 ``[B]`` on the GPU.
        num_heads_per_head_k: ``s_q * h_q // h_kv`` (query rows per KV head).
        num_heads_k: ``h_kv``.

    Returns:
        ``(tile_scheduler_metadata [num_parts, 8] int32, num_splits [B + 1] int32)``, with
        num_parts from the device's SM count (:func:`mla_num_parts`).
    """
    num_parts = mla_num_parts(_sm_count(cache_seqlens.device), num_heads_per_head_k, num_heads_k)
    return _tops().mla_metadata(cache_seqlens, num_parts)


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                           tile_scheduler_metadata, num_splits, softmax_scale=None, causal=False,
                           check_inputs=False):
    """MLA decode over the paged latent cache (split + combine).

    Args:
        q: ``[B, s_q, h_q, 576]`` float16/bfloat16.
        k_cache: ``[num_pages, page_size, h_kv, 576]`` in q's dtype.
        block_table: int32 ``[B, max_pages]``;  cache_seqlens: int32 ``[B]``.
        head_dim_v: 512.
        tile_scheduler_metadata, num_splits: from :func:`get_mla_metadata` for these lengths.
        softmax_scale: defaults to ``576 ** -0.5``.
        causal: query token t sees keys ``j < len - (s_q - 1 - t)``.
        check_inputs: validate ``block_table`` / ``cache_seqlens`` on the GPU first
            (synchronizes; not inside CUDA-graph capture) and raise ValueError naming the
            first bad entry. Also on with ``FLASHKIT_CHECK_INPUTS=1``.

    Returns:
        ``(out [B, s_q, h_q, 512], lse [B, h_q, s_q] float32, natural log)``.
    """
    from .ops import _scale_arg

    scale = _scale_arg(softmax_scale)
    return _tops().mla_decode(q, k_cache, block_table, cache_seqlens,
                              _int_arg("head_dim_v", head_dim_v), tile_scheduler_metadata,
                              num_splits, scale, bool(causal), bool(check_inputs))
