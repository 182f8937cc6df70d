"""PyTorch integration: FlashKit ops as torch custom ops.

Importing this module imports torch (when installed) and registers

    torch.ops.flashkit.attention_fwd(q, k, v, causal, softmax_scale, return_lse)
        -> (out, lse)
    torch.ops.flashkit.attention_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k,
        max_seqlen_q, max_seqlen_k, causal, softmax_scale, return_lse) -> (out, lse)

with fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces a model that
calls ``flashkit.attention`` without a graph break, and the real implementation allocates
with ``torch.empty`` on q's device and launches on the current stream (CUDA-graph capture
works). ``softmax_scale`` 0.0 means 1/sqrt(D). When ``return_lse`` is False the kernel
writes no LSE and the returned ``lse`` is an empty float32 tensor of shape (0,).

``flashkit.ops`` imports this module lazily (only for non-numpy inputs), so
``import flashkit`` never imports torch.
"""

from typing import Tuple

try:
    import torch
except ImportError:  # torch is optional
    torch = None


def is_tensor(x):
    return torch is not None and isinstance(x, torch.Tensor)


def _type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _check_tensors(fn, named):
    for name, x in named:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"flashkit.{fn}: {name} must be a torch.Tensor like q, "
                            f"got {_type_name(x)}")


def _check_ndim(x, name, ndim, layout):
    if x.dim() != ndim:
        raise ValueError(
            f"{name}: expected {ndim} dimensions {layout}, got shape {list(x.shape)}")


if torch is not None:
    from torch import Tensor

    def _plain(t):
        # DLPack refuses tensors that require grad; a detached view shares the storage.
        return t.detach() if t.requires_grad else t

    def _launch(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal):
        from .ops import _native

        C = _native()
        args = (_plain(q), _plain(k), _plain(v), out, lse,
                None if cu_seqlens_q is None else _plain(cu_seqlens_q),
                None if cu_seqlens_k is None else _plain(cu_seqlens_k),
                max_seqlen_q, max_seqlen_k, softmax_scale, causal)
        dev = q.device
        if dev.type != "cuda":
            C.attention_fwd(*args, 0)  # rejected by the C++ validation (not a CUDA tensor)
            return
        stream = torch.cuda.current_stream(dev).cuda_stream
        if dev.index is not None and dev.index != torch.cuda.current_device():
            with torch.cuda.device(dev):  # the launch goes to the current device
                C.attention_fwd(*args, stream)
        else:
            C.attention_fwd(*args, stream)

    def _dense_shapes(q, v, return_lse):
        B, S_q, H_q = q.shape[0], q.shape[1], q.shape[2]
        return (B, S_q, H_q, v.shape[3]), ((B, H_q, S_q) if return_lse else (0,))

    def _varlen_shapes(q, v, return_lse):
        total_q, H_q = q.shape[0], q.shape[1]
        return (total_q, H_q, v.shape[2]), ((H_q, total_q) if return_lse else (0,))

    def _attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: float,
                       return_lse: bool) -> Tuple[Tensor, Tensor]:
        out_shape, lse_shape = _dense_shapes(q, v, return_lse)
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
        _launch(q, k, v, out, lse if return_lse else None, None, None, 0, 0,
                softmax_scale, causal)
        return out, lse

    def _attention_fwd_fake(q, k, v, causal, softmax_scale, return_lse):
        out_shape, lse_shape = _dense_shapes(q, v, return_lse)
        return q.new_empty(out_shape), q.new_empty(lse_shape, dtype=torch.float32)

    def _attention_varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                              cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                              causal: bool, softmax_scale: float,
                              return_lse: bool) -> Tuple[Tensor, Tensor]:
        out_shape, lse_shape = _varlen_shapes(q, v, return_lse)
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
        _launch(q, k, v, out, lse if return_lse else None, cu_seqlens_q, cu_seqlens_k,
                max_seqlen_q, max_seqlen_k, softmax_scale, causal)
        return out, lse

    def _attention_varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, softmax_scale, return_lse):
        out_shape, lse_shape = _varlen_shapes(q, v, return_lse)
        return q.new_empty(out_shape), q.new_empty(lse_shape, dtype=torch.float32)

    def _no_backward(ctx, grad_out, grad_lse):
        raise NotImplementedError(
            "flashkit: the attention backward is not implemented yet; "
            "call flashkit.attention under torch.no_grad() or on detached tensors")

    def _setup_context(ctx, inputs, output):
        pass

    if hasattr(torch.library, "custom_op"):  # torch >= 2.4
        attention_fwd_op = torch.library.custom_op(
            "flashkit::attention_fwd", _attention_fwd, mutates_args=())
        attention_fwd_op.register_fake(_attention_fwd_fake)
        attention_fwd_op.register_autograd(_no_backward, setup_context=_setup_context)

        attention_varlen_fwd_op = torch.library.custom_op(
            "flashkit::attention_varlen_fwd", _attention_varlen_fwd, mutates_args=())
        attention_varlen_fwd_op.register_fake(_attention_varlen_fwd_fake)
        attention_varlen_fwd_op.register_autograd(_no_backward, setup_context=_setup_context)

        _dense_op = torch.ops.flashkit.attention_fwd
        _varlen_op = torch.ops.flashkit.attention_varlen_fwd
    else:  # older torch: eager only (no torch.compile / fake-tensor support)
        _dense_op = _attention_fwd
        _varlen_op = _attention_varlen_fwd


def attention(q, k, v, causal, softmax_scale, return_lse):
    """torch path of flashkit.attention (arguments already normalized by flashkit.ops)."""
    _check_tensors("attention", (("k", k), ("v", v)))
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    _check_ndim(v, "v", 4, "[B, S_k, H_kv, D_v]")
    out, lse = _dense_op(q, k, v, causal, softmax_scale, return_lse)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                     softmax_scale, return_lse):
    """torch path of flashkit.attention_varlen."""
    _check_tensors("attention_varlen", (("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                                        ("cu_seqlens_k", cu_seqlens_k)))
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    _check_ndim(v, "v", 3, "[total_k, H_kv, D_v]")
    out, lse = _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          causal, softmax_scale, return_lse)
    return (out, lse) if return_lse else out
