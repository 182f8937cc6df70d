"""PyTorch integration: FlashKit ops as torch custom ops.

Importing this module imports torch (when installed) and registers

    torch.ops.flashkit.attention_fwd(q, k, v, causal, softmax_scale, return_lse,
        deterministic=False, window_left=-1, window_right=-1, softcap=0.0) -> (out, lse)
    torch.ops.flashkit.attention_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k,
        max_seqlen_q, max_seqlen_k, causal, softmax_scale, return_lse,
        check_inputs=False, deterministic=False, window_left=-1, window_right=-1,
        softcap=0.0) -> (out, lse)
    torch.ops.flashkit.attention_bwd(dout, q, k, v, out, lse, causal, softmax_scale,
        deterministic, window_left=-1, window_right=-1, softcap=0.0) -> (dq, dk, dv)
    torch.ops.flashkit.attention_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q,
        cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
        deterministic, window_left=-1, window_right=-1, softcap=0.0) -> (dq, dk, dv)

with fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces a model that
calls ``flashkit.attention`` without a graph break (AOTAutograd puts the backward op in the
backward graph), and the real implementations allocate with ``torch.empty`` on q's device
and launch on the current stream (CUDA-graph capture works). ``softmax_scale`` 0.0 means
1/sqrt(D); ``window_left``/``window_right`` (-1: no bound) and ``softcap`` (0.0: off) are
``flashkit.attention``'s ``window`` and ``softcap``. When ``return_lse`` is False the kernel
writes no LSE and the returned ``lse`` is an empty float32 tensor of shape (0,).

Autograd: the forward ops save q, k, v, out and lse, and their backward calls the backward
op with the forward's causal, softmax_scale, window and softcap (``deterministic`` is the
forward op's argument too, so the choice travels with the graph).
A forward that may be differentiated must compute the LSE: ``flashkit.attention`` asks for
it whenever grad mode is on and q, k or v requires grad, and returns only ``out`` when the
caller did not ask for it. The gradient through ``lse`` itself is not supported: a backward
that receives one raises NotImplementedError (grad outputs are not materialized, so an
unused lse costs nothing).

Plain eager calls that need no autograd (no_grad / inference, or no input requiring grad),
outside torch.compile and any dispatch or function mode, skip the custom-op dispatcher
and run the same implementation directly: that saves ~20 us of host time per call. Plain
eager calls that autograd differentiates (outside torch.compile, functorch transforms and
any mode) run through a torch.autograd.Function (``_DenseFn`` / ``_VarlenFn``) with the same
implementations, saved tensors and backward arguments: the custom op's autograd wrapper cost
~500 us of host time per forward + backward (H100 machine, 2026-11-27), more than the GPU time
of a short training step.

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

    # The current device without torch.cuda.current_device()'s lazy-init check (callers hold
    # a CUDA tensor, so CUDA is initialized).
    _current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device

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

    _functorch_stack = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)

    def _eager_autograd(tensors):
        """True for a plain eager call that autograd will differentiate, outside torch.compile,
        functorch transforms and any dispatch or function mode: a torch.autograd.Function
        (_DenseFn / _VarlenFn) then runs the forward and backward implementations directly,
        without the custom-op dispatcher (its autograd wrapper costs several hundred us of host
        time per forward + backward, more than the GPU time of a short training step)."""
        if not _HAS_EAGER_CHECKS or _functorch_stack is None or _is_compiling():
            return False
        if _dispatch_stack_len() or _function_mode_on() or _functorch_stack() is not None:
            return False
        for t in tensors:
            if type(t) is not _Plain:
                return False
        return True

    def _on_device(index, fn, *args):
        """fn(*args, stream) on the current stream of CUDA device ``index``, made the current
        device for the call (the launch goes to the current device); index < 0 (a CPU
        tensor, rejected by the C++ validation) calls fn(*args, 0)."""
        if index < 0:
            return fn(*args, 0)
        if index != _current_device():
            with torch.cuda.device(index):
                return fn(*args, _raw_stream(index))
        return fn(*args, _raw_stream(index))

    def _launch(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, check_inputs, mods):
        # _C reads torch tensors directly (no DLPack), requires_grad or not.
        # mods: (window_left, window_right, softcap).
        C = _native()
        _on_device(q.get_device(),
                   lambda stream: C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                                  max_seqlen_q, max_seqlen_k, softmax_scale,
                                                  causal, stream, check_inputs, *mods))

    def _dense(q, k, v, causal, softmax_scale, return_lse, window_left=-1, window_right=-1,
               softcap=0.0):
        """Allocates and launches; returns (out, lse or None)."""
        B, S_q, H_q = q.shape[0], q.shape[1], q.shape[2]
        out = q.new_empty((B, S_q, H_q, v.shape[3]))
        lse = (q.new_empty((B, H_q, S_q), dtype=torch.float32)
               if return_lse else None)
        _launch(q, k, v, out, lse, None, None, 0, 0, softmax_scale, causal, False,
                (window_left, window_right, softcap))
        return out, lse

    def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                softmax_scale, return_lse, check_inputs=False, window_left=-1, window_right=-1,
                softcap=0.0):
        total_q, H_q = q.shape[0], q.shape[1]
        out = q.new_empty((total_q, H_q, v.shape[2]))
        lse = (q.new_empty((H_q, total_q), dtype=torch.float32)
               if return_lse else None)
        _launch(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, check_inputs, (window_left, window_right, softcap))
        return out, lse

    def _no_lse(q):
        return q.new_empty((0,), dtype=torch.float32)

    # --- backward: allocation and launch ------------------------------------------------
    def _kernel_ready(g):
        """``g`` as the kernels read it: last dimension contiguous, other strides (of dims
        with more than one element) non-negative multiples of 16 bytes, 16-byte aligned
        data. The dout autograd hands over can be anything (an expanded scalar, a transposed
        or sliced view): such a tensor is copied into a contiguous one."""
        if g.dim() == 0 or g.numel() == 0:
            return g
        if g.data_ptr() % 16 == 0:
            align = 16 // g.element_size()
            last = g.dim() - 1
            for i, (n, st) in enumerate(zip(g.shape, g.stride())):
                if n > 1 and (st != 1 if i == last else (st < 0 or st % align)):
                    break
            else:
                return g
        return g.clone(memory_format=torch.contiguous_format)

    def _workspace(q, batch, rows_q, max_seqlen_q, deterministic):
        """The scratch buffer attention_bwd needs (uint8, contents do not matter)."""
        size = _native().attention_bwd_workspace_size(
            max(int(batch), 0), max(int(rows_q), 0), max(int(max_seqlen_q), 0),
            int(q.shape[-2]), int(q.shape[-1]), bool(deterministic))
        return q.new_empty((max(int(size), 0),), dtype=torch.uint8)

    def _launch_bwd(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic,
                    workspace, mods):
        C = _native()
        _on_device(q.get_device(),
                   lambda stream: C.attention_bwd(
                       dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic,
                       workspace, stream, False, *mods))

    def _grads_like(q, k, v):
        # Contiguous, like the fake implementations say.
        return (q.new_empty(q.shape),
                k.new_empty(k.shape),
                v.new_empty(v.shape))

    def _dense_bwd(dout, q, k, v, out, lse, causal, softmax_scale, deterministic,
                   window_left=-1, window_right=-1, softcap=0.0):
        """Allocates dq, dk, dv (like q, k, v, contiguous) and the workspace; launches."""
        dq, dk, dv = _grads_like(q, k, v)
        B, S_q = q.shape[0], q.shape[1]
        ws = _workspace(q, B, B * S_q, S_q, deterministic)
        _launch_bwd(_kernel_ready(dout), q, k, v, out, lse, dq, dk, dv, None, None, 0, 0,
                    softmax_scale, causal, deterministic, ws,
                    (window_left, window_right, softcap))
        return dq, dk, dv

    def _varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                    max_seqlen_k, causal, softmax_scale, deterministic, window_left=-1,
                    window_right=-1, softcap=0.0):
        dq, dk, dv = _grads_like(q, k, v)
        batch = cu_seqlens_q.shape[0] - 1 if cu_seqlens_q.dim() == 1 else 0
        ws = _workspace(q, batch, q.shape[0], max_seqlen_q, deterministic)
        _launch_bwd(_kernel_ready(dout), q, k, v, out, lse, dq, dk, dv, cu_seqlens_q,
                    cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                    deterministic, ws, (window_left, window_right, softcap))
        return dq, dk, dv

    # --- custom ops -------------------------------------------------------------------
    def _attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: float,
                       return_lse: bool, deterministic: bool = False, window_left: int = -1,
                       window_right: int = -1, softcap: float = 0.0) -> Tuple[Tensor, Tensor]:
        # deterministic: only recorded for the backward (the forward always is).
        out, lse = _dense(q, k, v, causal, softmax_scale, return_lse, window_left,
                          window_right, softcap)
        return out, (lse if lse is not None else _no_lse(q))

    def _attention_fwd_fake(q, k, v, causal, softmax_scale, return_lse, deterministic=False,
                            window_left=-1, window_right=-1, softcap=0.0):
        B, S_q, H_q = q.shape[0], q.shape[1], q.shape[2]
        lse_shape = (B, H_q, S_q) if return_lse else (0,)
        return (q.new_empty((B, S_q, H_q, v.shape[3])),
                q.new_empty(lse_shape, dtype=torch.float32))

    def _attention_varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                              cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                              causal: bool, softmax_scale: float, return_lse: bool,
                              check_inputs: bool = False, deterministic: bool = False,
                              window_left: int = -1, window_right: int = -1,
                              softcap: float = 0.0) -> Tuple[Tensor, Tensor]:
        out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal, softmax_scale, return_lse, check_inputs, window_left,
                           window_right, softcap)
        return out, (lse if lse is not None else _no_lse(q))

    def _attention_varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, softmax_scale, return_lse,
                                   check_inputs=False, deterministic=False, window_left=-1,
                                   window_right=-1, softcap=0.0):
        total_q, H_q = q.shape[0], q.shape[1]
        lse_shape = (H_q, total_q) if return_lse else (0,)
        return (q.new_empty((total_q, H_q, v.shape[2])),
                q.new_empty(lse_shape, dtype=torch.float32))

    def _attention_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       causal: bool, softmax_scale: float, deterministic: bool,
                       window_left: int = -1, window_right: int = -1,
                       softcap: float = 0.0) -> Tuple[Tensor, Tensor, Tensor]:
        return _dense_bwd(dout, q, k, v, out, lse, causal, softmax_scale, deterministic,
                          window_left, window_right, softcap)

    def _attention_varlen_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
                              lse: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                              max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                              softmax_scale: float, deterministic: bool,
                              window_left: int = -1, window_right: int = -1,
                              softcap: float = 0.0) -> Tuple[Tensor, Tensor, Tensor]:
        return _varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, causal, softmax_scale, deterministic, window_left,
                           window_right, softcap)

    def _grads_fake_like(q, k, v):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def _attention_bwd_fake(dout, q, k, v, out, lse, causal, softmax_scale, deterministic,
                            window_left=-1, window_right=-1, softcap=0.0):
        return _grads_fake_like(q, k, v)

    def _attention_varlen_bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                   max_seqlen_q, max_seqlen_k, causal, softmax_scale,
                                   deterministic, window_left=-1, window_right=-1, softcap=0.0):
        return _grads_fake_like(q, k, v)

    # --- autograd of the forward ops ----------------------------------------------------
    _NO_LSE_GRAD = ("flashkit: gradient through lse is not supported (use out, not the lse "
                    "that flashkit.attention(..., return_lse=True) returns, in the loss)")
    _LSE_MISSING = ("flashkit: the forward ran with return_lse=False, so there is no lse to "
                    "differentiate with; call the forward op with return_lse=True (flashkit."
                    "attention does so by itself whenever q, k or v requires grad)")

    # setup_context gets the forward op's arguments (defaults filled in by torch >= 2.5;
    # torch 2.4 may leave out trailing arguments equal to their default) and (out, lse).
    _MODS_DEFAULT = (-1, -1, 0.0)  # (window_left, window_right, softcap)

    def _mods(inputs, first):
        """The forward op's (window_left, window_right, softcap), from inputs[first:]."""
        return tuple(inputs[first + i] if len(inputs) > first + i else _MODS_DEFAULT[i]
                     for i in range(3))

    def _setup_dense(ctx, inputs, output):
        q, k, v, causal, softmax_scale = inputs[:5]
        ctx.save_for_backward(q, k, v, *output)
        ctx.causal, ctx.softmax_scale = causal, softmax_scale
        ctx.deterministic = bool(inputs[6]) if len(inputs) > 6 else False
        ctx.mods = _mods(inputs, 7)
        # Gradients of unused outputs (lse, nearly always) stay None instead of zeros.
        ctx.set_materialize_grads(False)

    def _setup_varlen(ctx, inputs, output):
        q, k, v, cu_seqlens_q, cu_seqlens_k = inputs[:5]
        ctx.save_for_backward(q, k, v, *output, cu_seqlens_q, cu_seqlens_k)
        ctx.max_seqlens = inputs[5], inputs[6]
        ctx.causal, ctx.softmax_scale = inputs[7], inputs[8]
        ctx.deterministic = bool(inputs[11]) if len(inputs) > 11 else False
        ctx.mods = _mods(inputs, 12)
        ctx.set_materialize_grads(False)

    def _reject_lse_grad(grad_lse):
        # (A gradient of the (0,) placeholder lse carries nothing: AOTAutograd may pass one.)
        if grad_lse is not None and grad_lse.numel() != 0:
            raise NotImplementedError(_NO_LSE_GRAD)

    def _dense_backward(ctx, grad_out, grad_lse):
        n_args = 10  # the forward op's arguments
        _reject_lse_grad(grad_lse)
        if grad_out is None:
            return (None,) * n_args
        q, k, v, out, lse = ctx.saved_tensors
        if lse.dim() != 3:  # the (0,) placeholder of return_lse=False
            raise RuntimeError(_LSE_MISSING)
        dq, dk, dv = _bwd_dense_op(grad_out, q, k, v, out, lse, ctx.causal,
                                   ctx.softmax_scale, ctx.deterministic, *ctx.mods)
        return (dq, dk, dv) + (None,) * (n_args - 3)

    def _varlen_backward(ctx, grad_out, grad_lse):
        n_args = 15
        _reject_lse_grad(grad_lse)
        if grad_out is None:
            return (None,) * n_args
        q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        if lse.dim() != 2:
            raise RuntimeError(_LSE_MISSING)
        dq, dk, dv = _bwd_varlen_op(grad_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                    *ctx.max_seqlens, ctx.causal, ctx.softmax_scale,
                                    ctx.deterministic, *ctx.mods)
        return (dq, dk, dv) + (None,) * (n_args - 3)

    if hasattr(torch.library, "custom_op"):  # torch >= 2.4
        attention_fwd_op = torch.library.custom_op(
            "flashkit::attention_fwd", _attention_fwd, mutates_args=())
        attention_fwd_op.register_fake(_attention_fwd_fake)
        attention_fwd_op.register_autograd(_dense_backward, setup_context=_setup_dense)

        attention_varlen_fwd_op = torch.library.custom_op(
            "flashkit::attention_varlen_fwd", _attention_varlen_fwd, mutates_args=())
        attention_varlen_fwd_op.register_fake(_attention_varlen_fwd_fake)
        attention_varlen_fwd_op.register_autograd(_varlen_backward, setup_context=_setup_varlen)

        attention_bwd_op = torch.library.custom_op(
            "flashkit::attention_bwd", _attention_bwd, mutates_args=())
        attention_bwd_op.register_fake(_attention_bwd_fake)

        attention_varlen_bwd_op = torch.library.custom_op(
            "flashkit::attention_varlen_bwd", _attention_varlen_bwd, mutates_args=())
        attention_varlen_bwd_op.register_fake(_attention_varlen_bwd_fake)

        _dense_op = torch.ops.flashkit.attention_fwd
        _varlen_op = torch.ops.flashkit.attention_varlen_fwd
        _bwd_dense_op = torch.ops.flashkit.attention_bwd
        _bwd_varlen_op = torch.ops.flashkit.attention_varlen_bwd
    else:  # older torch: eager only, no autograd (no torch.compile / fake-tensor support)
        _dense_op = _attention_fwd
        _varlen_op = _attention_varlen_fwd
        _bwd_dense_op = _attention_bwd
        _bwd_varlen_op = _attention_varlen_bwd

    def _function_backward(ctx, grad_out, grad_lse, n_args, direct, op):
        """The backward of _DenseFn / _VarlenFn: the forward's saved tensors and arguments
        handed to ``direct`` (the implementation) in a plain eager backward, else to ``op`` (the
        backward op, as the custom op's autograd would call it: create_graph=True, compile,
        modes). Gradients for q, k, v; None for the other ``n_args - 3`` forward arguments."""
        _reject_lse_grad(grad_lse)
        if grad_out is None:
            return (None,) * n_args
        saved = tuple(ctx.saved_tensors)
        args = (grad_out,) + saved + ctx.args
        if not torch.is_grad_enabled() and _eager_direct(args[:1 + len(saved)]):
            dq, dk, dv = direct(*args)
        else:
            dq, dk, dv = op(*args)
        return (dq, dk, dv) + (None,) * (n_args - 3)

    class _DenseFn(torch.autograd.Function):
        """Eager autograd of the dense forward without the dispatcher (_eager_autograd): the
        same implementations, saved tensors and backward arguments as the custom op's
        register_autograd path (_setup_dense / _dense_backward)."""

        @staticmethod
        def forward(ctx, q, k, v, causal, softmax_scale, deterministic, window_left, window_right,
                    softcap):
            out, lse = _dense(q, k, v, causal, softmax_scale, True, window_left, window_right,
                              softcap)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.args = (causal, softmax_scale, deterministic, window_left, window_right, softcap)
            ctx.set_materialize_grads(False)
            return out, lse

        @staticmethod
        def backward(ctx, grad_out, grad_lse):
            # (module globals looked up at call time: tests replace them)
            return _function_backward(ctx, grad_out, grad_lse, 9, lambda *a: _dense_bwd(*a),
                                      lambda *a: _bwd_dense_op(*a))

    class _VarlenFn(torch.autograd.Function):
        """_DenseFn for attention_varlen (the custom op's _setup_varlen / _varlen_backward)."""

        @staticmethod
        def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                    softmax_scale, check_inputs, deterministic, window_left, window_right, softcap):
            out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               causal, softmax_scale, True, check_inputs, window_left,
                               window_right, softcap)
            ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)
            ctx.args = (max_seqlen_q, max_seqlen_k, causal, softmax_scale, deterministic,
                        window_left, window_right, softcap)
            ctx.set_materialize_grads(False)
            return out, lse

        @staticmethod
        def backward(ctx, grad_out, grad_lse):
            return _function_backward(ctx, grad_out, grad_lse, 14, lambda *a: _varlen_bwd(*a),
                                      lambda *a: _bwd_varlen_op(*a))

    def _needs_grad(q, k, v):
        return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                            v.requires_grad)

    def _deterministic(deterministic):
        return bool(deterministic) or torch.are_deterministic_algorithms_enabled()


def attention(q, k, v, causal, softmax_scale, return_lse, deterministic=False, window_left=-1,
              window_right=-1, softcap=0.0):
    """torch path of flashkit.attention (arguments already normalized by flashkit.ops)."""
    _check_tensors("attention", (("k", k), ("v", v)))
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    _check_ndim(v, "v", 4, "[B, S_k, H_kv, D_v]")
    if _eager_direct((q, k, v)):
        out, lse = _dense(q, k, v, causal, softmax_scale, return_lse, window_left, window_right,
                          softcap)
    else:
        # A forward that autograd may differentiate keeps its lse for the backward.
        grad = _needs_grad(q, k, v)
        if grad and _eager_autograd((q, k, v)):
            out, lse = _DenseFn.apply(q, k, v, causal, softmax_scale, _deterministic(deterministic),
                                      window_left, window_right, softcap)
        else:
            out, lse = _dense_op(q, k, v, causal, softmax_scale, return_lse or grad,
                                 _deterministic(deterministic) if grad else bool(deterministic),
                                 window_left, window_right, softcap)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                     softmax_scale, return_lse, check_inputs=False, deterministic=False,
                     window_left=-1, window_right=-1, softcap=0.0):
    """torch path of flashkit.attention_varlen."""
    _check_tensors("attention_varlen", (("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                                        ("cu_seqlens_k", cu_seqlens_k)))
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    _check_ndim(v, "v", 3, "[total_k, H_kv, D_v]")
    if _eager_direct((q, k, v, cu_seqlens_q, cu_seqlens_k)):
        out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal, softmax_scale, return_lse, check_inputs, window_left,
                           window_right, softcap)
    else:
        grad = _needs_grad(q, k, v)
        if grad and _eager_autograd((q, k, v, cu_seqlens_q, cu_seqlens_k)):
            out, lse = _VarlenFn.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                       max_seqlen_k, causal, softmax_scale, check_inputs,
                                       _deterministic(deterministic), window_left, window_right,
                                       softcap)
        else:
            out, lse = _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  causal, softmax_scale, return_lse or grad, check_inputs,
                                  _deterministic(deterministic) if grad else bool(deterministic),
                                  window_left, window_right, softcap)
    return (out, lse) if return_lse else out


def attention_backward(dout, q, k, v, out, lse, causal, softmax_scale, deterministic=False,
                       window_left=-1, window_right=-1, softcap=0.0):
    """torch path of flashkit.attention_backward: (dq, dk, dv)."""
    _check_tensors("attention_backward", (("dout", dout), ("k", k), ("v", v), ("out", out),
                                          ("lse", lse)))
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    args = (dout, q, k, v, out, lse, causal, softmax_scale, _deterministic(deterministic),
            window_left, window_right, softcap)
    if _eager_direct((dout, q, k, v, out, lse)):
        return _dense_bwd(*args)
    return _bwd_dense_op(*args)


def attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, causal, softmax_scale, deterministic=False,
                              window_left=-1, window_right=-1, softcap=0.0):
    """torch path of flashkit.attention_varlen_backward: (dq, dk, dv)."""
    _check_tensors("attention_varlen_backward",
                   (("dout", dout), ("k", k), ("v", v), ("out", out), ("lse", lse),
                    ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)))
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    deterministic = _deterministic(deterministic)
    args = (dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            causal, softmax_scale, deterministic, window_left, window_right, softcap)
    if _eager_direct((dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)):
        return _varlen_bwd(*args)
    return _bwd_varlen_op(*args)
