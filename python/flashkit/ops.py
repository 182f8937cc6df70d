"""FlashKit operators: allocation of outputs around the native ``flashkit._C`` calls.

The C++ library validates every argument (shape, dtype, device, strides, ...) and its
message comes back verbatim as ``ValueError`` (bad argument), ``NotImplementedError``
(variant not compiled into this build) or ``RuntimeError`` (device / CUDA error). This
module only checks what it needs to allocate the outputs (array types, ranks) and raises
``TypeError`` / ``ValueError`` for those.

torch tensors go through the custom ops ``torch.ops.flashkit.attention_fwd`` /
``attention_varlen_fwd`` and, for autograd or :func:`attention_backward`,
``attention_bwd`` / ``attention_varlen_bwd`` (defined in ``flashkit._torch_ops``, which
imports torch): ``torch.compile(fullgraph=True)`` traces them without a graph break and
they can be captured in CUDA graphs. numpy and cupy arrays call the extension directly
with outputs allocated by their own module (numpy arrays live on the CPU, so they are
rejected by the C++ validation: useful for checking arguments without a GPU).
"""

import math
import sys

import numpy as np

__all__ = ["attention", "attention_varlen", "attention_backward", "attention_varlen_backward",
           "compiled_fwd_variants", "compiled_fwd_kernels", "fwd_kernel_family",
           "bwd_kernel_family"]

_ARRAY_KINDS = "a torch.Tensor, a cupy array or a numpy array"


_pkg = sys.modules[__name__.rpartition(".")[0]]  # the flashkit package (holds _C)
_tops = None  # flashkit._torch_ops once loaded


def _native():
    C = _pkg._C
    if C is None:
        raise ImportError(
            "flashkit's native extension (flashkit._C) is not available: "
            f"{_pkg._C_IMPORT_ERROR}. Install the package (pip install --no-build-isolation .) "
            "or put a build's development package on the path "
            "(PYTHONPATH=<build>/python)."
        )
    return C


def _torch_ops_module():
    # Imports torch when installed. Under torch.compile, dynamo performs imports for real,
    # so a first call inside a compiled region works too.
    global _tops
    from . import _torch_ops

    _tops = _torch_ops
    return _torch_ops


def compiled_fwd_variants():
    """The forward variants compiled into this build, e.g. ``['bfloat16/128', ...]``."""
    return list(_native().compiled_fwd_variants())


def compiled_fwd_kernels():
    """Every compiled kernel as ``'<family>/<dtype>/<head_dim>'``, e.g.
    ``'sm90/bfloat16/128'``: ``sm80`` (portable) for every compiled variant, ``sm90``
    (Hopper) for the head dims that have one."""
    return list(_native().compiled_fwd_kernels())


def fwd_kernel_family(dtype, head_dim):
    """Kernel family :func:`attention` runs for ``dtype`` and ``head_dim`` on the current
    device: ``'sm90'`` (Hopper wgmma kernels), ``'sm80'`` (portable kernels) or ``''`` (not
    compiled, or no usable GPU). ``dtype``: a torch dtype or ``'float16'``/``'bfloat16'``.
    The environment variable ``FLASHKIT_FWD_PORTABLE=1`` (read once) forces ``'sm80'``."""
    name = str(dtype).replace("torch.", "")
    return str(_native().fwd_kernel_family(name, int(head_dim)))


def bwd_kernel_family(dtype, head_dim):
    """Kernel family :func:`attention_backward` (and autograd through :func:`attention`)
    runs for ``dtype`` and ``head_dim`` on the current device: ``'sm90'`` (the Hopper
    kernels, compute capability 9.0, head dims 64 / 96 / 128 / 192 / 256), ``'sm80'``
    (portable kernels) or ``''`` (not compiled, or no usable GPU). It names the fast
    mode's family: on Hopper a deterministic call at head dim 96 with a softcap runs the
    portable kernels."""
    name = str(dtype).replace("torch.", "")
    return str(_native().bwd_kernel_family(name, int(head_dim)))


def _scale_arg(softmax_scale):
    """None -> 0.0 (the C++ default, 1/sqrt(D)); otherwise a positive finite float."""
    if softmax_scale is None:
        return 0.0
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float)):
        raise TypeError(
            "softmax_scale: expected a float or None, got " + type(softmax_scale).__name__
        )
    scale = float(softmax_scale)
    if not (scale > 0.0 and math.isfinite(scale)):
        raise ValueError(f"softmax_scale: expected a positive finite number or None, got {scale}")
    return scale


def _window_arg(window):
    """``(left, right)`` of ints (-1: no bound on that side); None is ``(-1, -1)``. Only the
    types are checked here: the C++ validation checks the values (and names the bound)."""
    if window is None:
        return -1, -1
    if not isinstance(window, (tuple, list)):
        raise TypeError("window: expected a (left, right) tuple of ints (-1: no bound on "
                        f"that side), got {_type_name(window)}")
    if len(window) != 2:
        raise ValueError(f"window: expected two values (left, right), got {len(window)}: "
                         f"{tuple(window)!r}")
    bounds = []
    for side, x in zip(("left", "right"), window):
        if isinstance(x, bool) or not hasattr(x, "__index__"):
            raise TypeError(f"window: the {side} bound must be an int (-1: no bound), got "
                            f"{_type_name(x)}")
        bounds.append(int(x.__index__()))
    return bounds[0], bounds[1]


def _softcap_arg(softcap):
    """A float (0.0: off); None is 0.0. The value (finite, >= 0) is checked in C++."""
    if softcap is None:
        return 0.0
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
        raise TypeError(f"softcap: expected a float (0: off), got {_type_name(softcap)}")
    return float(softcap)


def _check_ndim(x, name, ndim, layout):
    if x.ndim != ndim:
        raise ValueError(
            f"{name}: expected {ndim} dimensions {layout}, got shape {list(x.shape)}"
        )


def _type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _array_module(x, name, fn):
    """numpy or cupy, the module that allocates outputs like ``x``; TypeError otherwise."""
    if isinstance(x, np.ndarray):
        return np
    top = type(x).__module__.partition(".")[0]
    if top == "cupy":
        import cupy

        return cupy
    if hasattr(x, "__dlpack__"):
        raise TypeError(
            f"flashkit.{fn}: {name} is a {_type_name(x)}; outputs can be allocated for "
            "torch tensors, cupy and numpy arrays only. For other DLPack arrays call "
            "flashkit._C.attention_fwd(q, k, v, out, lse, ...) with preallocated outputs."
        )
    raise TypeError(f"flashkit.{fn}: {name} must be {_ARRAY_KINDS}, got {_type_name(x)}")


def _same_kind(xp, arrays, fn):
    for name, x in arrays:
        if xp is np:
            ok = isinstance(x, np.ndarray)
        else:
            ok = type(x).__module__.partition(".")[0] == xp.__name__
        if not ok:
            raise TypeError(
                f"flashkit.{fn}: {name} must be a {xp.__name__} array like q, "
                f"got {_type_name(x)}"
            )


def _check_int_args(**named):
    for name, val in named.items():
        if isinstance(val, bool) or not hasattr(val, "__index__"):
            raise TypeError(f"{name}: expected an int, got {_type_name(val)}")


def _run_array(xp, q, k, v, out_shape, lse_shape, cu_seqlens_q, cu_seqlens_k,
               max_seqlen_q, max_seqlen_k, scale, causal, return_lse, check_inputs=False,
               mods=(-1, -1, 0.0)):
    """numpy / cupy path: allocate with the array's module, launch on its current stream.
    mods: (window_left, window_right, softcap)."""
    C = _native()
    if xp is np:
        out = np.empty(out_shape, dtype=q.dtype)
        lse = np.empty(lse_shape, dtype=np.float32) if return_lse else None
        stream = 0
    else:  # cupy: allocate on q's device, launch on its current stream
        with q.device:
            out = xp.empty(out_shape, dtype=q.dtype)
            lse = xp.empty(lse_shape, dtype=xp.float32) if return_lse else None
            stream = xp.cuda.get_current_stream().ptr
            C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                            max_seqlen_q, max_seqlen_k, scale, causal, stream, check_inputs,
                            *mods)
        return (out, lse) if return_lse else out
    C.attention_fwd(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, scale, causal, stream, check_inputs, *mods)
    return (out, lse) if return_lse else out


def attention(q, k, v, causal=False, softmax_scale=None, return_lse=False,
              deterministic=False, window=(-1, -1), softcap=0.0):
    """Dense attention forward: ``softmax(q k^T * softmax_scale [+ mask]) v``.

    Args:
        q: ``[B, S_q, H_q, D]`` float16/bfloat16 on a CUDA device (any strides, last
            dimension contiguous).
        k: ``[B, S_k, H_kv, D]``; ``H_q % H_kv == 0`` (GQA/MQA).
        v: ``[B, S_k, H_kv, D_v]``.
        causal: bottom-right aligned mask: query row i sees keys j <= i + S_k - S_q.
        softmax_scale: defaults to ``1/sqrt(D)``.
        return_lse: also return the log-sum-exp of each row (natural log).
        deterministic: for the backward (torch autograd): dq, dk and dv bitwise
            reproducible run to run (dq is then summed over key tiles in 32-bit fixed point
            with a per-row scale on Hopper, in a fixed order elsewhere, instead of with fp32
            atomics; somewhat slower). Also on whenever
            ``torch.are_deterministic_algorithms_enabled()``. The forward is always
            deterministic.
        window: ``(left, right)`` sliding window (Mistral / Gemma style), bottom-right
            aligned like ``causal``: with ``d = S_k - S_q``, query row i sees keys j with
            ``i + d - left <= j <= i + d + right``; -1 means no bound on that side (the
            default ``(-1, -1)``: no window). ``causal=True`` is ``right = 0`` (a larger
            right bound is clipped to 0), so ``causal=True, window=(W, -1)`` or
            ``window=(W, 0)`` is a causal sliding window over the last ``W + 1`` keys.
            Key tiles outside every row's window are skipped, not computed.
        softcap: logit soft-capping (Gemma-2): scores ``s = q k^T * softmax_scale`` become
            ``softcap * tanh(s / softcap)`` before the mask and the softmax (``lse`` is of
            the capped scores). 0 (the default): off; otherwise a finite value > 0.

    Returns:
        ``out [B, S_q, H_q, D_v]`` in q's dtype, or ``(out, lse)`` with ``lse`` float32
        ``[B, H_q, S_q]``. Rows that see no key (e.g. S_q > S_k under ``causal``, or a
        window that leaves a row none) give out = 0, lse = -inf.

    Autograd (torch tensors): differentiable with respect to q, k and v (FlashKit's fused
    backward, see :func:`attention_backward`, with the same mask, window and softcap);
    ``lse`` is not differentiable (a loss that uses it raises NotImplementedError in the
    backward).

    Raises:
        TypeError: q/k/v are not arrays of a supported kind; ``window`` is not a pair of
            ints or ``softcap`` not a number.
        ValueError: a bad argument (message from the C++ validation, naming it; e.g. a
            window bound below -1 or a negative softcap); ``window`` without two values.
        NotImplementedError: this (dtype, head dim) is not compiled into this build.
        RuntimeError: no usable GPU or a CUDA error.
    """
    scale = _scale_arg(softmax_scale)
    causal = bool(causal)
    mods = _window_arg(window) + (_softcap_arg(softcap),)
    if not isinstance(q, np.ndarray):
        tops = _tops if _tops is not None else _torch_ops_module()
        if tops.is_tensor(q):
            return tops.attention(q, k, v, causal, scale, bool(return_lse),
                                  bool(deterministic), *mods)
    xp = _array_module(q, "q", "attention")
    _same_kind(xp, (("k", k), ("v", v)), "attention")
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    _check_ndim(v, "v", 4, "[B, S_k, H_kv, D_v]")
    B, S_q, H_q, _ = q.shape
    return _run_array(xp, q, k, v, (B, S_q, H_q, v.shape[3]), (B, H_q, S_q), None, None,
                      0, 0, scale, causal, bool(return_lse), mods=mods)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, softmax_scale=None, return_lse=False, check_inputs=False,
                     deterministic=False, window=(-1, -1), softcap=0.0):
    """Variable-length (packed) attention forward.

    Args:
        q: ``[total_q, H_q, D]``; sequence i is rows ``cu_seqlens_q[i]:cu_seqlens_q[i+1]``.
        k: ``[total_k, H_kv, D]``;  v: ``[total_k, H_kv, D_v]``.
        cu_seqlens_q, cu_seqlens_k: int32 ``[B+1]`` on q's device: 0, then non-decreasing,
            ending at ``total_q`` / ``total_k``.
        max_seqlen_q, max_seqlen_k: upper bounds of the per-sequence lengths (ints).
        causal, softmax_scale, return_lse, deterministic, window, softcap: as in
            :func:`attention`, per sequence (``S_q``, ``S_k`` are the sequence's lengths,
            so the causal mask and the window are bottom-right aligned in each).
        check_inputs: validate ``cu_seqlens_q/k`` on the GPU before the launch and raise
            ValueError naming the argument and the first bad index. Synchronizes the stream,
            so it is off by default and cannot be used during CUDA-graph capture (ValueError).
            ``FLASHKIT_CHECK_INPUTS=1`` in the environment turns it on for every call that is
            not being captured.

    Without ``check_inputs``, cu_seqlens are not read on the host (that would cost a sync);
    the kernels clamp every range to the tensors, so wrong values never cause an
    out-of-bounds access: a sequence with a bad q range writes nothing, one with a bad k
    range gets out = 0 and lse = -inf, and the device error flag is set
    (:func:`flashkit.check_device_errors`).

    Returns:
        ``out [total_q, H_q, D_v]`` or ``(out, lse)`` with ``lse`` float32 ``[H_q, total_q]``.
    """
    scale = _scale_arg(softmax_scale)
    causal = bool(causal)
    check_inputs = bool(check_inputs)
    mods = _window_arg(window) + (_softcap_arg(softcap),)
    if not isinstance(q, np.ndarray):
        tops = _tops if _tops is not None else _torch_ops_module()
        if tops.is_tensor(q):
            return tops.attention_varlen(
                q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                scale, bool(return_lse), check_inputs, bool(deterministic), *mods)
    _check_int_args(max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    xp = _array_module(q, "q", "attention_varlen")
    _same_kind(xp, (("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                    ("cu_seqlens_k", cu_seqlens_k)), "attention_varlen")
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    _check_ndim(v, "v", 3, "[total_k, H_kv, D_v]")
    total_q, H_q, _ = q.shape
    return _run_array(xp, q, k, v, (total_q, H_q, v.shape[2]), (H_q, total_q), cu_seqlens_q,
                      cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), scale, causal,
                      bool(return_lse), check_inputs, mods)


# ---------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------


def _run_array_bwd(xp, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sizes,
                   max_seqlen_k, scale, causal, deterministic, mods):
    """numpy / cupy path of the backward: dq, dk, dv and the workspace allocated with the
    array's module, launched on its current stream. sizes: (batch, rows_q, max_seqlen_q);
    mods: (window_left, window_right, softcap)."""
    C = _native()
    batch, rows_q, max_seqlen_q = sizes
    size = C.attention_bwd_workspace_size(max(batch, 0), rows_q, max(max_seqlen_q, 0),
                                          q.shape[-2], q.shape[-1], deterministic)

    def launch(stream):
        dq, dk, dv = (xp.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
        ws = xp.empty((max(int(size), 0),), dtype=xp.uint8)
        C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                        max_seqlen_q, max_seqlen_k, scale, causal, deterministic, ws, stream,
                        False, *mods)
        return dq, dk, dv

    if xp is np:
        return launch(0)
    with q.device:  # cupy: allocate on q's device, launch on its current stream
        return launch(xp.cuda.get_current_stream().ptr)


def attention_backward(dout, q, k, v, out, lse, causal=False, softmax_scale=None,
                       deterministic=False, window=(-1, -1), softcap=0.0):
    """Dense attention backward: the gradients of :func:`attention`'s output.

    For users who manage their own autograd (or none): ``out, lse = attention(q, k, v,
    causal, softmax_scale, return_lse=True)`` in the forward, then with ``dout``, the
    gradient of the loss with respect to ``out``::

        dq, dk, dv = flashkit.attention_backward(dout, q, k, v, out, lse, causal, softmax_scale)

    (with ``window=`` and ``softcap=`` as the forward's when it used them).

    The probabilities are recomputed from ``lse`` on chip (never stored); torch autograd
    through :func:`attention` calls the same kernels.

    Args:
        dout: like ``out``, ``[B, S_q, H_q, D_v]`` (any strides, last dim contiguous).
        q, k, v: the forward's inputs.
        out, lse: the forward's output and log-sum-exp (float32 ``[B, H_q, S_q]``).
        causal, softmax_scale, window, softcap: the forward's (``softmax_scale`` None:
            1/sqrt(D); see :func:`attention`). The backward recomputes the probabilities
            with them, so they must be the forward's: other values give wrong gradients.
        deterministic: dq, dk, dv bitwise reproducible run to run (dk and dv always are;
            without it dq is accumulated with atomics). Also on whenever
            ``torch.are_deterministic_algorithms_enabled()`` (torch tensors).

    Returns:
        ``(dq, dk, dv)`` shaped like q, k, v (contiguous), in their dtype. GQA/MQA: dk and
        dv of a KV head sum over the query heads that read it. Rows that see no key give
        no gradient.

    Raises:
        TypeError, ValueError, NotImplementedError, RuntimeError: as :func:`attention`.
    """
    scale = _scale_arg(softmax_scale)
    causal, deterministic = bool(causal), bool(deterministic)
    mods = _window_arg(window) + (_softcap_arg(softcap),)
    if not isinstance(q, np.ndarray):
        tops = _tops if _tops is not None else _torch_ops_module()
        if tops.is_tensor(q):
            return tops.attention_backward(dout, q, k, v, out, lse, causal, scale,
                                           deterministic, *mods)
    xp = _array_module(q, "q", "attention_backward")
    _same_kind(xp, (("dout", dout), ("k", k), ("v", v), ("out", out), ("lse", lse)),
               "attention_backward")
    _check_ndim(q, "q", 4, "[B, S_q, H_q, D]")
    B, S_q = q.shape[0], q.shape[1]
    return _run_array_bwd(xp, dout, q, k, v, out, lse, None, None, (B, B * S_q, S_q), 0, scale,
                          causal, deterministic, mods)


def attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, causal=False, softmax_scale=None,
                              deterministic=False, window=(-1, -1), softcap=0.0):
    """Variable-length (packed) attention backward: the gradients of
    :func:`attention_varlen`'s output.

    Args:
        dout: like ``out``, ``[total_q, H_q, D_v]``.
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
            softmax_scale, window, softcap: the forward's.
        out, lse: the forward's output and log-sum-exp (float32 ``[H_q, total_q]``).
        deterministic: as in :func:`attention_backward`.

    Returns:
        ``(dq, dk, dv)`` shaped like q, k, v. Rows of k and v that no query sees (e.g. the
        keys of a sequence whose q is empty) get zero gradients.
    """
    scale = _scale_arg(softmax_scale)
    causal, deterministic = bool(causal), bool(deterministic)
    mods = _window_arg(window) + (_softcap_arg(softcap),)
    _check_int_args(max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    max_seqlen_q, max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    if not isinstance(q, np.ndarray):
        tops = _tops if _tops is not None else _torch_ops_module()
        if tops.is_tensor(q):
            return tops.attention_varlen_backward(
                dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                max_seqlen_k, causal, scale, deterministic, *mods)
    xp = _array_module(q, "q", "attention_varlen_backward")
    _same_kind(xp, (("dout", dout), ("k", k), ("v", v), ("out", out), ("lse", lse),
                    ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)),
               "attention_varlen_backward")
    _check_ndim(q, "q", 3, "[total_q, H_q, D]")
    batch = cu_seqlens_q.shape[0] - 1 if cu_seqlens_q.ndim == 1 else 0
    return _run_array_bwd(xp, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                          (batch, q.shape[0], max_seqlen_q), max_seqlen_k, scale, causal,
                          deterministic, mods)
