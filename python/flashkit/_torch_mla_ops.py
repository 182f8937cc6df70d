"""torch custom ops of the MLA decode (imports torch; loaded by flashkit.mla).

    torch.ops.flashkit.mla_metadata(seqlens_k, num_parts) -> (tile_scheduler_metadata, num_splits)
    torch.ops.flashkit.mla_decode(q, k_cache, block_table, seqlens_k, head_dim_v,
        tile_scheduler_metadata, num_splits, softmax_scale, causal, check_inputs) -> (out, lse)

Each allocates its outputs (and the decode its workspace) with torch on the current stream,
with no host sync, so both work under CUDA-graph capture; each has a fake implementation,
so torch.compile(fullgraph=True) traces them.
"""

from __future__ import annotations

import functools
from typing import Tuple

import torch
from torch import Tensor

from ._torch_decode_ops import _call_on, _check_tensors, _stream_of
from ._torch_ops import _eager_direct
from .ops import _native


@functools.lru_cache(maxsize=256)
def _workspace_bytes(B, s_q, h_q, num_parts):
    return _native().mla_workspace_size(B, s_q, h_q, num_parts)


def _metadata_impl(seqlens_k: Tensor, num_parts: int) -> Tuple[Tensor, Tensor]:
    B = seqlens_k.shape[0] if seqlens_k.dim() == 1 else 0
    sched = seqlens_k.new_empty((num_parts, 8), dtype=torch.int32)
    splits = seqlens_k.new_empty((B + 1,), dtype=torch.int32)
    stream, index = _stream_of(seqlens_k)
    _call_on(index, _native().mla_metadata, seqlens_k, sched, splits, stream)
    return sched, splits


def _decode_impl(q: Tensor, k_cache: Tensor, block_table: Tensor, seqlens_k: Tensor,
                 head_dim_v: int, tile_scheduler_metadata: Tensor, num_splits: Tensor,
                 softmax_scale: float, causal: bool,
                 check_inputs: bool = False) -> Tuple[Tensor, Tensor]:
    C = _native()
    stream, index = _stream_of(q)
    if index is None or q.dim() != 4 or tile_scheduler_metadata.dim() != 2:
        # Not a 4-D CUDA q etc.: the C++ validation names the problem.
        empty = torch.empty((0,), dtype=torch.float32, device=q.device)
        C.mla_decode(q, k_cache, block_table, seqlens_k, tile_scheduler_metadata, num_splits,
                     q.new_empty((0,)), empty, empty, head_dim_v, softmax_scale, causal, True, 0,
                     False)
    B, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((B, s_q, h_q, head_dim_v))
    lse = q.new_empty((B, h_q, s_q), dtype=torch.float32)
    nbytes = _workspace_bytes(B, s_q, h_q, tile_scheduler_metadata.shape[0])
    ws = q.new_empty((max(nbytes, 16),), dtype=torch.uint8)
    _call_on(index, C.mla_decode, q, k_cache, block_table, seqlens_k, tile_scheduler_metadata,
             num_splits, out, lse, ws, head_dim_v, softmax_scale, causal, False, stream,
             check_inputs)
    return out, lse


_metadata_op = torch.library.custom_op("flashkit::mla_metadata", _metadata_impl, mutates_args=())
_metadata_op.register_fake(
    lambda seqlens_k, num_parts: (seqlens_k.new_empty((num_parts, 8), dtype=torch.int32),
                                  seqlens_k.new_empty((seqlens_k.shape[0] + 1,), dtype=torch.int32)))

_decode_op = torch.library.custom_op("flashkit::mla_decode", _decode_impl, mutates_args=())
_decode_op.register_fake(
    lambda q, k_cache, block_table, seqlens_k, head_dim_v, tile_scheduler_metadata, num_splits,
    softmax_scale, causal, check_inputs=False:
    (q.new_empty((q.shape[0], q.shape[1], q.shape[2], head_dim_v)),
     q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)))


def mla_metadata(seqlens_k, num_parts):
    _check_tensors("get_mla_metadata", (("cache_seqlens", seqlens_k),))
    if _eager_direct((seqlens_k,)):
        return _metadata_impl(seqlens_k, num_parts)
    return torch.ops.flashkit.mla_metadata(seqlens_k, num_parts)


def mla_decode(q, k_cache, block_table, seqlens_k, head_dim_v, tile_scheduler_metadata,
               num_splits, softmax_scale, causal, check_inputs=False):
    _check_tensors("flash_mla_with_kvcache", (
        ("q", q), ("k_cache", k_cache), ("block_table", block_table),
        ("cache_seqlens", seqlens_k), ("tile_scheduler_metadata", tile_scheduler_metadata),
        ("num_splits", num_splits)))
    args = (q, k_cache, block_table, seqlens_k, head_dim_v, tile_scheduler_metadata, num_splits,
            softmax_scale, causal, check_inputs)
    if _eager_direct((q, k_cache, block_table, seqlens_k, tile_scheduler_metadata, num_splits)):
        return _decode_impl(*args)
    return torch.ops.flashkit.mla_decode(*args)
