"""torch custom ops of the paged decode (imports torch; loaded by flashkit.decode).

    torch.ops.flashkit.decode(q, k_cache, v_cache, block_table, seqlens_k, causal,
        softmax_scale, return_lse, split_size, max_seqlen_k) -> (out, lse)
    torch.ops.flashkit.decode_plan(seqlens_k, workspace!, batch, s_q, h_q, h_kv, d, d_v,
        split_size, max_seqlen_k) -> ()
    torch.ops.flashkit.decode_run(q, k_cache, v_cache, block_table, seqlens_k, workspace,
        causal, softmax_scale, return_lse, split_size, max_seqlen_k) -> (out, lse)
    torch.ops.flashkit.decode_run_out(q, k_cache, v_cache, block_table, seqlens_k, workspace,
        out!, lse!?, causal, softmax_scale, split_size, max_seqlen_k) -> ()
    torch.ops.flashkit.append_kv(k_cache!, v_cache!, k_new, v_new, block_table,
        seqlens_k) -> ()

Each has a fake implementation, so torch.compile(fullgraph=True) traces them, and each
launches on the current stream with no host sync (CUDA-graph capture works). When
``return_lse`` is False the returned ``lse`` is an empty float32 tensor of shape (0,).
"""

from __future__ import annotations

import functools
from typing import Optional, Tuple

import torch
from torch import Tensor

from ._torch_ops import _current_device, _eager_direct
from .ops import _native

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _raw_stream is None:
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _check_tensors(fn, named):
    for name, x in named:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"flashkit.{fn}: {name} must be a torch.Tensor, got {_type_name(x)}")


def _stream_of(t):
    index = t.get_device()
    return (0, None) if index < 0 else (_raw_stream(index), index)


def _call_on(index, fn, *args):
    """fn(*args) with CUDA device ``index`` current (the kernels go to the current device);
    index None (a CPU tensor, which the C++ validation rejects) calls it as it is."""
    if index is not None and index != _current_device():
        with torch.cuda.device(index):
            return fn(*args)
    return fn(*args)


@functools.lru_cache(maxsize=256)
def _workspace_bytes(B, s_q, h_q, h_kv, d, dv, split_size, max_seqlen_k, index, kv_dtype=""):
    return _native().decode_workspace_size(B, s_q, h_q, h_kv, d, dv, split_size, max_seqlen_k,
                                           index, kv_dtype)


_QUANT_DTYPES = {torch.int8: "int8", torch.float8_e4m3fn: "float8_e4m3fn"}


def kv_dtype_name(q, k_cache):
    """'' for a cache in q's dtype, 'int8' / 'float8_e4m3fn' for a quantized one."""
    return _QUANT_DTYPES.get(k_cache.dtype, "")


def _alloc_o(q, v_cache):
    qs = q.shape
    return q.new_empty((qs[0], qs[1], qs[2], v_cache.shape[3]))


def _alloc_out(q, v_cache, return_lse):
    B, s_q, H_q = q.shape[0], q.shape[1], q.shape[2]
    out = _alloc_o(q, v_cache)
    lse = q.new_empty((B, H_q, s_q) if return_lse else (0,), dtype=torch.float32)
    return out, lse


def _fake_out(q, v_cache, return_lse):
    B, s_q, H_q = q.shape[0], q.shape[1], q.shape[2]
    return (q.new_empty((B, s_q, H_q, v_cache.shape[3])),
            q.new_empty((B, H_q, s_q) if return_lse else (0,), dtype=torch.float32))


def _max_seqlen(block_table, k_cache, split_size, max_seqlen_k):
    if split_size > 0 and max_seqlen_k == 0:
        return int(block_table.shape[1]) * int(k_cache.shape[1])
    return max_seqlen_k


def _decode_into(q, k_cache, v_cache, block_table, seqlens_k, out, lse, causal, softmax_scale,
                 split_size, max_seqlen_k, check_inputs, k_scale, v_scale):
    """Plan + run in one call, writing ``out`` (and ``lse`` unless None)."""
    C = _native()
    stream, index = _stream_of(q)
    if index is None or q.dim() != 4 or k_cache.dim() != 4 or v_cache.dim() != 4 or block_table.dim() != 2:
        # Not a 4-D CUDA q etc.: let the C++ validation name the problem.
        C.decode_run(q, k_cache, v_cache, block_table, seqlens_k, out, lse, None, softmax_scale,
                     causal, split_size, max_seqlen_k, False, True, 0, False, k_scale, v_scale)
    msl = _max_seqlen(block_table, k_cache, split_size, max_seqlen_k)
    qs = q.shape
    nbytes = _workspace_bytes(qs[0], qs[1], qs[2], k_cache.shape[2], qs[3], v_cache.shape[3],
                              split_size, msl, index, kv_dtype_name(q, k_cache))
    ws = q.new_empty(((nbytes + 3) // 4,), dtype=torch.int32)
    _call_on(index, C.decode_run, q, k_cache, v_cache, block_table, seqlens_k, out, lse, ws,
             softmax_scale, causal, split_size, msl, True, False, stream, check_inputs, k_scale,
             v_scale)


def _decode_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                 seqlens_k: Tensor, causal: bool, softmax_scale: float, return_lse: bool,
                 split_size: int, max_seqlen_k: int, check_inputs: bool = False,
                 k_scale: Optional[Tensor] = None,
                 v_scale: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    out, lse = _alloc_out(q, v_cache, return_lse)
    _decode_into(q, k_cache, v_cache, block_table, seqlens_k, out, lse if return_lse else None,
                 causal, softmax_scale, split_size, max_seqlen_k, check_inputs, k_scale, v_scale)
    return out, lse


def _run_into(q, k_cache, v_cache, block_table, seqlens_k, workspace, out, lse, causal,
              softmax_scale, split_size, max_seqlen_k, check_inputs, k_scale, v_scale):
    """The planned split + combine writing ``out`` (and ``lse`` unless None)."""
    stream, index = _stream_of(q)
    _call_on(index, _native().decode_run, q, k_cache, v_cache, block_table, seqlens_k, out, lse,
             workspace, softmax_scale, causal, split_size, max_seqlen_k, False, False, stream,
             check_inputs, k_scale, v_scale)


def _decode_run_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                     seqlens_k: Tensor, workspace: Tensor, causal: bool, softmax_scale: float,
                     return_lse: bool, split_size: int, max_seqlen_k: int,
                     check_inputs: bool = False, k_scale: Optional[Tensor] = None,
                     v_scale: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    out, lse = _alloc_out(q, v_cache, return_lse)
    _run_into(q, k_cache, v_cache, block_table, seqlens_k, workspace, out,
              lse if return_lse else None, causal, softmax_scale, split_size, max_seqlen_k,
              check_inputs, k_scale, v_scale)
    return out, lse


def _decode_run_out_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                         seqlens_k: Tensor, workspace: Tensor, out: Tensor, lse: Optional[Tensor],
                         causal: bool, softmax_scale: float, split_size: int, max_seqlen_k: int,
                         check_inputs: bool = False, k_scale: Optional[Tensor] = None,
                         v_scale: Optional[Tensor] = None) -> None:
    _run_into(q, k_cache, v_cache, block_table, seqlens_k, workspace, out, lse, causal,
              softmax_scale, split_size, max_seqlen_k, check_inputs, k_scale, v_scale)


def _decode_plan_impl(seqlens_k: Tensor, workspace: Tensor, batch: int, s_q: int, h_q: int,
                      h_kv: int, head_dim: int, head_dim_v: int, split_size: int,
                      max_seqlen_k: int, kv_dtype: str = "") -> None:
    stream, index = _stream_of(seqlens_k)
    _call_on(index, _native().decode_plan, seqlens_k, workspace, batch, s_q, h_q, h_kv, head_dim,
             head_dim_v, split_size, max_seqlen_k, stream, kv_dtype)


def _append_kv_impl(k_cache: Tensor, v_cache: Tensor, k_new: Tensor, v_new: Tensor,
                    block_table: Tensor, seqlens_k: Tensor, k_scale: Optional[Tensor] = None,
                    v_scale: Optional[Tensor] = None) -> None:
    stream, index = _stream_of(k_new)
    _call_on(index, _native().append_kv, k_new, v_new, k_cache, v_cache, block_table, seqlens_k,
             stream, k_scale, v_scale)


_decode_op = torch.library.custom_op("flashkit::decode", _decode_impl, mutates_args=())
_decode_op.register_fake(
    lambda q, k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale, return_lse,
    split_size, max_seqlen_k, check_inputs=False, k_scale=None, v_scale=None:
    _fake_out(q, v_cache, return_lse))

_decode_run_op = torch.library.custom_op("flashkit::decode_run", _decode_run_impl, mutates_args=())
_decode_run_op.register_fake(
    lambda q, k_cache, v_cache, block_table, seqlens_k, workspace, causal, softmax_scale,
    return_lse, split_size, max_seqlen_k, check_inputs=False, k_scale=None, v_scale=None:
    _fake_out(q, v_cache, return_lse))

_decode_run_out_op = torch.library.custom_op("flashkit::decode_run_out", _decode_run_out_impl,
                                             mutates_args=("out", "lse"))
_decode_run_out_op.register_fake(lambda *args, **kwargs: None)

_decode_plan_op = torch.library.custom_op("flashkit::decode_plan", _decode_plan_impl,
                                          mutates_args=("workspace",))
_decode_plan_op.register_fake(lambda *args: None)

_append_kv_op = torch.library.custom_op("flashkit::append_kv", _append_kv_impl,
                                        mutates_args=("k_cache", "v_cache", "k_scale", "v_scale"))
_append_kv_op.register_fake(lambda *args: None)


def decode(q, k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale, return_lse,
           split_size, max_seqlen_k, check_inputs=False, k_scale=None, v_scale=None):
    _check_tensors("decode", (("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                              ("block_table", block_table), ("seqlens_k", seqlens_k)))
    args = (q, k_cache, v_cache, block_table, seqlens_k, causal, softmax_scale, return_lse,
            split_size, max_seqlen_k, check_inputs, k_scale, v_scale)
    if _eager_direct((q, k_cache, v_cache, block_table, seqlens_k)):
        # no autograd / compile / modes: skip the dispatcher (and the empty lse)
        out, lse = _alloc_out(q, v_cache, True) if return_lse else (_alloc_o(q, v_cache), None)
        _decode_into(q, k_cache, v_cache, block_table, seqlens_k, out, lse, causal, softmax_scale,
                     split_size, max_seqlen_k, check_inputs, k_scale, v_scale)
        return out, lse
    return torch.ops.flashkit.decode(*args)


def decode_run(q, k_cache, v_cache, block_table, seqlens_k, workspace, causal, softmax_scale,
               return_lse, split_size, max_seqlen_k, check_inputs=False, k_scale=None,
               v_scale=None, out=None, lse=None):
    """(out, lse): lse is None when not return_lse. ``out`` / ``lse``: tensors to write
    instead of new ones (the C++ validation checks their shapes, dtypes and devices)."""
    tensors = (q, k_cache, v_cache, block_table, seqlens_k)
    _check_tensors("DecodePlan.run", (("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                                      ("block_table", block_table), ("seqlens_k", seqlens_k)))
    if out is None and lse is None:
        if _eager_direct(tensors + (workspace,)):
            # no dispatcher, and no lse tensor unless asked for
            o, l = _alloc_out(q, v_cache, True) if return_lse else (_alloc_o(q, v_cache), None)
            _run_into(q, k_cache, v_cache, block_table, seqlens_k, workspace, o, l, causal,
                      softmax_scale, split_size, max_seqlen_k, check_inputs, k_scale, v_scale)
            return o, l
        o, l = torch.ops.flashkit.decode_run(q, k_cache, v_cache, block_table, seqlens_k,
                                             workspace, causal, softmax_scale, return_lse,
                                             split_size, max_seqlen_k, check_inputs, k_scale,
                                             v_scale)
        return o, (l if return_lse else None)
    if lse is not None and not return_lse:
        raise ValueError("DecodePlan.run: lse was given but return_lse is False")
    _check_tensors("DecodePlan.run", tuple((n, t) for n, t in (("out", out), ("lse", lse))
                                           if t is not None))
    if out is None or (return_lse and lse is None):
        o, l = _alloc_out(q, v_cache, return_lse)
        out = o if out is None else out
        lse = l if lse is None and return_lse else lse
    args = (q, k_cache, v_cache, block_table, seqlens_k, workspace, out, lse, causal, softmax_scale,
            split_size, max_seqlen_k, check_inputs, k_scale, v_scale)
    if _eager_direct(tensors + (workspace, out) + ((lse,) if lse is not None else ())):
        _run_into(*args)
    else:
        torch.ops.flashkit.decode_run_out(*args)
    return out, lse


def decode_plan(seqlens_k, workspace, *sizes):
    _check_tensors("DecodePlan.plan", (("seqlens_k", seqlens_k),))
    if _eager_direct((seqlens_k, workspace)):
        return _decode_plan_impl(seqlens_k, workspace, *sizes)
    torch.ops.flashkit.decode_plan(seqlens_k, workspace, *sizes)


def append_kv(k_cache, v_cache, k_new, v_new, block_table, seqlens_k, k_scale=None, v_scale=None):
    _check_tensors("append_kv", (("k_cache", k_cache), ("v_cache", v_cache), ("k_new", k_new),
                                 ("v_new", v_new), ("block_table", block_table),
                                 ("seqlens_k", seqlens_k)))
    tensors = (k_cache, v_cache, k_new, v_new, block_table, seqlens_k)
    if _eager_direct(tensors):
        return _append_kv_impl(*tensors, k_scale, v_scale)
    torch.ops.flashkit.append_kv(*tensors, k_scale, v_scale)
