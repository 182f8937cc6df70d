"""PyTorch integration: FlashKit ops as torch custom ops.

Importing this module imports torch (when installed) and registers

    torch.ops.flashkit.attention_fwd(q, k, v, causal, softmax_scale, return_lse)
        -> (out, lse)
    torch.ops.flashkit.attention_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k,
        max_seqlen_q, max_seqlen_k, causal, softmax_scale, return_lse,
        check_inputs=False) -> (out, lse)

with fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces a model that
calls ``flashkit.attention`` without a graph break, and the real implementation allocates
with ``torch.empty`` on q's device and launches on the current stream (CUDA-graph capture
works). ``softmax_scale`` 0.0 means 1/sqrt(D). When ``return_lse`` is False the kernel
writes no LSE and the returned ``lse`` is an empty float32 tensor of shape (0,).

Plain eager calls that need no autograd (no_grad / inference, or no input requiring grad),
outside torch.compile and any dispatch or function mode, skip the custom-op dispatcher
and run the same implementation directly: that saves ~20 us of host time per call.

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

    from .ops import _native

    _Plain = torch.Tensor
    _is_compiling = getattr(torch.compiler, "is_compiling", None)
    _dispatch_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
    _function_mode_on = getattr(torch._C, "_is_torch_function_mode_enabled", None)
    _HAS_EAGER_CHECKS = None not in (_is_compiling, _dispatch_stack_len, _function_mode_on)
    # The current stream as an int without building a torch.cuda.Stream (inductor's way).
    _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if _raw_stream is None:
        def _raw_stream(index):
            return torch.cuda.current_stream(index).cuda_stream

    def _eager_direct(tensors):
        """True when the custom-op dispatcher adds nothing: a plain eager call that needs
        no autograd, outside torch.compile/export and any dispatch or function mode."""
        if not _HAS_EAGER_CHECKS or _is_compiling():
            return False
        if _dispatch_stack_len() or _function_mode_on():
            return False
        grad = torch.is_grad_enabled()
        for t in tensors:
            if type(t) is not _Plain or (grad and t.requires_grad):
                return False
        return True

    def _launch(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, check_inputs=False):
        # _C reads torch tensors directly (no DLPack), requires_grad or not.
        C = _native()
        index = q.get_device()  # -1 on the CPU
        if index < 0:  # rejected by the C++ validation (not a CUDA tensor)
            C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                            max_seqlen_k, softmax_scale, causal, 0, check_inputs)
            return
        if index != torch.cuda.current_device():
            with torch.cuda.device(index):  # the launch goes to the current device
                C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, softmax_scale, causal, _raw_stream(index),
                                check_inputs)
        else:
            C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                            max_seqlen_k, softmax_scale, causal, _raw_stream(index),
                            check_inputs)

    def _dense(q, k, v, causal, softmax_scale, return_lse):
        """Allocates and launches; returns (out, lse or None)."""
        B, S_q, H_q = q.shape[0], q.shape[1], q.shape[2]
        out = torch.empty((B, S_q, H_q, v.shape[3]), dtype=q.dtype, device=q.device)
        lse = (torch.empty((B, H_q, S_q), dtype=torch.float32, device=q.device)
               if return_lse else None)
        _launch(q, k, v, out, lse, None, None, 0, 0, softmax_scale, causal)
        return out, lse

    def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                softmax_scale, return_lse, check_inputs=False):
        total_q, H_q = q.shape[0], q.shape[1]
        out = torch.empty((total_q, H_q, v.shape[2]), dtype=q.dtype, device=q.device)
        lse = (torch.empty((H_q, total_q), dtype=torch.float32, device=q.device)
               if return_lse else None)
        _launch(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, check_inputs)
        return out, lse

    def _no_lse(q):
        return torch.empty((0,), dtype=torch.float32, device=q.device)

    # --- custom ops -------------------------------------------------------------------
    def _attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: float,
                       return_lse: bool) -> Tuple[Tensor, Tensor]:
        out, lse = _dense(q, k, v, causal, softmax_scale, return_lse)
        return out, (lse if lse is not None else _no_lse(q))

    def _attention_fwd_fake(q, k, v, causal, softmax_scale, return_lse):
        B, S_q, H_q = q.shape[0], q.shape[1], q.shape[2]
        lse_shape = (B, H_q, S_q) if return_lse else (0,)
        return (q.new_empty((B, S_q, H_q, v.shape[3])),
                q.new_empty(lse_shape, dtype=torch.float32))

    def _attention_varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                              cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                              causal: bool, softmax_scale: float, return_lse: bool,
                              check_inputs: bool = False) -> Tuple[Tensor, Tensor]:
        out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal, softmax_scale, return_lse, check_inputs)
        return out, (lse if lse is not None else _no_lse(q))

    def _attention_varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, softmax_scale, return_lse,
                                   check_inputs=False):
        total_q, H_q = q.shape[0], q.shape[1]
        lse_shape = (H_q, total_q) if return_lse else (0,)
        return (q.new_empty((total_q, H_q, v.shape[2])),
                q.new_empty(lse_shape, dtype=torch.float32))

    # No backward kernel yet. The autograd formula calls an op that raises when it runs
    # but has a fake implementation, so torch.compile can still trace (and AOTAutograd
    # partition) a model in training mode: its forward works, its backward raises.
    _NO_BACKWARD = ("flashkit: the attention backward is not implemented yet; call "
                    "flashkit.attention under torch.no_grad() / torch.inference_mode() or on "
                    "tensors that do not require grad")

    def _attention_bwd_unavailable(grad_out: Tensor, q: Tensor, k: Tensor,
                                   v: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError(_NO_BACKWARD)

    def _attention_bwd_unavailable_fake(grad_out, q, k, v):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def _save_qkv(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1], inputs[2])

    def _dense_backward(ctx, grad_out, grad_lse):
        q, k, v = ctx.saved_tensors
        dq, dk, dv = _bwd_op(grad_out, q, k, v)
        return dq, dk, dv, None, None, None

    def _varlen_backward(ctx, grad_out, grad_lse):
        q, k, v = ctx.saved_tensors
        dq, dk, dv = _bwd_op(grad_out, q, k, v)
        return dq, dk, dv, None, None, None, None, None, None, None, None

    if hasattr(torch.library, "custom_op"):  # torch >= 2.4
        attention_fwd_op = torch.library.custom_op(
            "flashkit::attention_fwd", _attention_fwd, mutates_args=())
        attention_fwd_op.register_fake(_attention_fwd_fake)
        attention_fwd_op.register_autograd(_dense_backward, setup_context=_save_qkv)

        attention_varlen_fwd_op = torch.library.custom_op(
            "flashkit::attention_varlen_fwd", _attention_varlen_fwd, mutates_args=())
        attention_varlen_fwd_op.register_fake(_attention_varlen_fwd_fake)
        attention_varlen_fwd_op.register_autograd(_varlen_backward, setup_context=_save_qkv)

        _bwd_unavailable_op = torch.library.custom_op(
            "flashkit::_attention_bwd_unavailable", _attention_bwd_unavailable,
            mutates_args=())
        _bwd_unavailable_op.register_fake(_attention_bwd_unavailable_fake)

        _dense_op = torch.ops.flashkit.attention_fwd
        _varlen_op = torch.ops.flashkit.attention_varlen_fwd
        _bwd_op = torch.ops.flashkit._attention_bwd_unavailable
    else:  # older torch: eager only, no autograd (no torch.compile / fake-tensor support)
        _dense_op = _attention_fwd
        _varlen_op = _attention_varlen_fwd


def attention(q, k, v, causal, softmax_scale, return_lse):
    """torch path of flashkit.attention (arguments already normalized by flashkit.ops)."""
    _check_tensors("attention", (("k", k), ("v", v)))
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    _check_ndim(v, "v", 4, "[B, S_k, H_kv, D_v]")
    if _eager_direct((q, k, v)):
        out, lse = _dense(q, k, v, causal, softmax_scale, return_lse)
    else:
        out, lse = _dense_op(q, k, v, causal, softmax_scale, return_lse)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                     softmax_scale, return_lse, check_inputs=False):
    """torch path of flashkit.attention_varlen."""
    _check_tensors("attention_varlen", (("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                                        ("cu_seqlens_k", cu_seqlens_k)))
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    _check_ndim(v, "v", 3, "[total_k, H_kv, D_v]")
    if _eager_direct((q, k, v, cu_seqlens_q, cu_seqlens_k)):
        out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal, softmax_scale, return_lse, check_inputs)
    else:
        out, lse = _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal, softmax_scale, return_lse, check_inputs)
    return (out, lse) if return_lse else out
