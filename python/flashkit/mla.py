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

FP8 cache (FlashMLA's layout, ``is_fp8_kvcache=True``): ``k_cache [num_pages, page_size,
h_kv, 656]`` uint8 / float8_e4m3fn, per token 512 e4m3 NoPE values, 4 fp32 scales (one per
128 values) and 64 bf16 RoPE values; :func:`quantize_kv_cache_fp8` writes it,
:func:`dequantize_kv_cache_fp8` reads it back. On Hopper with bf16 q and pages of multiples of 64
tokens the Hopper kernel reads it (dequantized in shared memory by a third warpgroup); otherwise the
portable kernel does (``FLASHKIT_MLA_FP8_PORTABLE=1`` forces that, read on every call).
"""

from __future__ import annotations

__all__ = ["get_mla_metadata", "flash_mla_with_kvcache", "mla_num_parts", "mla_workspace_size",
           "split_kernel_family", "quantize_kv_cache_fp8", "dequantize_kv_cache_fp8"]

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


def split_kernel_family(dtype, fp8_kv_cache=False):
    """'sm90' or 'sm80': the split kernel a call with q in ``dtype`` runs now on the current
    device ('' if not compiled). ``FLASHKIT_MLA_PORTABLE=1`` gives 'sm80'. The FP8 cache
    (``fp8_kv_cache=True``): 'sm90' for bf16 q on Hopper, where pages of multiples of 64 tokens
    run the Hopper kernel and other page sizes the portable one; 'sm80' for fp16 q and with
    ``FLASHKIT_MLA_FP8_PORTABLE=1``."""
    import torch

    name = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(dtype, str(dtype))
    return _native().mla_split_kernel_family(name, bool(fp8_kv_cache))


FP8_TOKEN_BYTES = 656  # 512 e4m3 + 4 fp32 scales + 64 bf16 RoPE values


def quantize_kv_cache_fp8(kv_cache):
    """FlashMLA's FP8 layout of a latent cache.

    Args:
        kv_cache: ``[..., 576]`` float16/bfloat16/float32 (512 NoPE + 64 RoPE dims).

    Returns:
        ``[..., 656]`` uint8: per token the 512 NoPE values as float8_e4m3fn, 4 fp32 scales
        (one per group of 128 values: ``amax / 448``, 1 for an all-zero group; a value
        reads back as ``e4m3 * scale``), then the 64 RoPE values as bf16 (not quantized).
        Runs wherever the tensor lives (torch ops, no kernel).
    """
    import torch

    if not isinstance(kv_cache, torch.Tensor):
        raise TypeError(f"flashkit.mla.quantize_kv_cache_fp8: kv_cache must be a torch.Tensor, "
                        f"got {type(kv_cache).__name__}")
    if kv_cache.dim() == 0 or kv_cache.shape[-1] != 576:
        raise ValueError("flashkit.mla.quantize_kv_cache_fp8: expected a last dimension of 576 "
                         f"(512 NoPE + 64 RoPE), got shape {tuple(kv_cache.shape)}")
    if kv_cache.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError("flashkit.mla.quantize_kv_cache_fp8: expected float16, bfloat16 or float32, "
                         f"got {kv_cache.dtype}")
    lead = kv_cache.shape[:-1]
    nope = kv_cache[..., :512].float().reshape(*lead, 4, 128)
    amax = nope.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    q8 = (nope / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).reshape(*lead, 512)
    out = torch.empty((*lead, FP8_TOKEN_BYTES), dtype=torch.uint8, device=kv_cache.device)
    out[..., :512] = q8.view(torch.uint8)
    out[..., 512:528] = scale.reshape(*lead, 4).contiguous().view(torch.uint8).reshape(*lead, 16)
    out[..., 528:] = kv_cache[..., 512:].to(torch.bfloat16).contiguous().view(torch.uint8).reshape(*lead, 128)
    return out


def dequantize_kv_cache_fp8(kv_fp8, dtype=None):
    """The values an FP8 cache (:func:`quantize_kv_cache_fp8`'s layout) stands for:
    ``[..., 656]`` uint8 / float8_e4m3fn -> ``[..., 576]`` in ``dtype`` (float32 if None),
    NoPE ``e4m3 * scale`` computed in fp32, RoPE the stored bf16."""
    import torch

    if kv_fp8.dtype not in (torch.uint8, torch.float8_e4m3fn):
        raise ValueError("flashkit.mla.dequantize_kv_cache_fp8: expected a uint8 or float8_e4m3fn "
                         f"tensor, got {kv_fp8.dtype}")
    b = kv_fp8.view(torch.uint8) if kv_fp8.dtype != torch.uint8 else kv_fp8
    if b.dim() == 0 or b.shape[-1] != FP8_TOKEN_BYTES:
        raise ValueError("flashkit.mla.dequantize_kv_cache_fp8: expected a last dimension of 656 bytes, "
                         f"got shape {tuple(kv_fp8.shape)}")
    lead = b.shape[:-1]
    b = b.contiguous()
    nope = b[..., :512].view(torch.float8_e4m3fn).float().reshape(*lead, 4, 128)
    scale = b[..., 512:528].contiguous().view(torch.float32).reshape(*lead, 4, 1)
    rope = b[..., 528:].contiguous().view(torch.bfloat16).float()
    out = torch.cat([(nope * scale).reshape(*lead, 512), rope], dim=-1)
    return out if dtype is None else out.to(dtype)


def get_mla_metadata(cache_seqlens, num_heads_per_head_k, num_heads_k, num_heads_q=None,
                     is_fp8_kvcache=False, topk=None):
    """The tile scheduler, computed on the GPU from ``cache_seqlens`` (no host sync).

    Args:
        cache_seqlens: int32 ``[B]`` on the GPU.
        num_heads_per_head_k: ``s_q * h_q // h_kv`` (query rows per KV head).
        num_heads_k: ``h_kv``.
        num_heads_q, is_fp8_kvcache: accepted for newer FlashMLA callers; the schedule does
            not depend on them.
        topk: FlashMLA's sparse attention; not supported (must be None).

    Returns:
        ``(tile_scheduler_metadata [num_parts, 8] int32, num_splits [B + 1] int32)``, with
        num_parts from the device's SM count (:func:`mla_num_parts`).
    """
    if topk is not None:
        raise NotImplementedError("flashkit.mla.get_mla_metadata: sparse attention (topk) is not supported")
    num_parts = mla_num_parts(_sm_count(cache_seqlens.device), num_heads_per_head_k, num_heads_k)
    return _tops().mla_metadata(cache_seqlens, num_parts)


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                           tile_scheduler_metadata, num_splits, softmax_scale=None, causal=False,
                           is_fp8_kvcache=False, indices=None, check_inputs=False):
    """MLA decode over the paged latent cache (split + combine).

    Args:
        q: ``[B, s_q, h_q, 576]`` float16/bfloat16.
        k_cache: ``[num_pages, page_size, h_kv, 576]`` in q's dtype, or with
            ``is_fp8_kvcache=True`` FlashMLA's FP8 layout: uint8 / float8_e4m3fn
            ``[num_pages, page_size, h_kv, 656]`` (:func:`quantize_kv_cache_fp8`),
            dequantized to q's dtype on load (by the portable kernel, also on Hopper).
        block_table: int32 ``[B, max_pages]``;  cache_seqlens: int32 ``[B]``.
        head_dim_v: 512.
        tile_scheduler_metadata, num_splits: from :func:`get_mla_metadata` for these lengths.
        softmax_scale: defaults to ``576 ** -0.5``.
        causal: query token t sees keys ``j < len - (s_q - 1 - t)``.
        is_fp8_kvcache: the cache is in the FP8 layout (FlashMLA's argument; its dtype must
            agree).
        indices: FlashMLA's sparse attention (token indices per query); not supported.
        check_inputs: validate ``block_table`` / ``cache_seqlens`` on the GPU first
            (synchronizes; not inside CUDA-graph capture) and raise ValueError naming the
            first bad entry. Also on with ``FLASHKIT_CHECK_INPUTS=1``.

    Returns:
        ``(out [B, s_q, h_q, 512], lse [B, h_q, s_q] float32, natural log)``.
    """
    import torch

    from .ops import _scale_arg

    if indices is not None:
        raise NotImplementedError("flashkit.mla.flash_mla_with_kvcache: sparse attention (indices) "
                                  "is not supported")
    if isinstance(k_cache, torch.Tensor):
        fp8_dtype = k_cache.dtype in (torch.uint8, torch.float8_e4m3fn)
        if bool(is_fp8_kvcache) != fp8_dtype:
            raise ValueError(
                "flashkit.mla.flash_mla_with_kvcache: "
                + (f"is_fp8_kvcache=True needs a uint8 / float8_e4m3fn cache of 656 bytes per token, "
                   f"got dtype {k_cache.dtype}" if is_fp8_kvcache else
                   f"a {k_cache.dtype} cache is FP8: pass is_fp8_kvcache=True"))
    scale = _scale_arg(softmax_scale)
    return _tops().mla_decode(q, k_cache, block_table, cache_seqlens,
                              _int_arg("head_dim_v", head_dim_v), tile_scheduler_metadata,
                              num_splits, scale, bool(causal), bool(check_inputs))
