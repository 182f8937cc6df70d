"""Reference attention and the accuracy rule of SPEC §3, for tests and scripts.

Self-contained: needs numpy, and torch only when given torch tensors (so the CPU tests can
load this file without torch and without flashkit's native extension).

- ``attention_reference(q, k, v, causal, softmax_scale, window=..., softcap=...)`` ->
  ``(out, lse)`` in high precision: float64 for numpy arrays, ``compute_dtype`` (float32 by
  default) for torch tensors, on their device. BSHD layout, GQA by repeating kv heads,
  bottom-right causal mask and sliding window (:func:`allowed_keys`), logit softcap, rows
  that see no key give out 0 and lse -inf (never NaN).
- ``attention_varlen_reference(...)``: the same per sequence of a packed batch.
- ``attention_pytorch(...)`` / ``attention_varlen_pytorch(...)``: PyTorch's own attention
  (SDPA, math backend, reductions in the input dtype; with a softcap, which SDPA lacks, the
  same math written out in the input dtype), the baseline error of SPEC §3.
- ``attention_backward_reference(q, k, v, dout, ...)`` -> ``(dq, dk, dv)`` in high
  precision (the analytic gradient: P from the exact softmax, dS = P (dP - rowsum(dO O)));
  ``attention_backward_pytorch(...)``: PyTorch's autograd through the same low-precision
  math SDPA (the gradients' baseline); ``attention_varlen_backward_reference`` /
  ``attention_varlen_backward_pytorch``: the same per sequence of a packed batch.
- ``check_close(out, ref, out_pt)``: pass iff max-abs and relative-L2 errors are at most
  2x those of the PyTorch baseline plus a small slack; NaN never passes.
- ``check_lse``, ``check_written``, ``poison_``: the other checks a test needs.

Every function takes ``window=(left, right)`` (-1: no bound on that side) and ``softcap``
(0: off) with flashkit.attention's meaning: with ``d = S_k - S_q`` row i keeps key j iff
``j < S_k``, ``right < 0 or j <= i + d + right`` and ``left < 0 or j >= i + d - left``,
where ``causal=True`` makes ``right = 0``; a softcap maps the scaled scores ``s`` to
``softcap * tanh(s / softcap)`` before the mask.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CheckResult",
    "allowed_keys",
    "attention_backward_pytorch",
    "attention_backward_reference",
    "attention_pytorch",
    "attention_reference",
    "attention_varlen_backward_pytorch",
    "attention_varlen_backward_reference",
    "attention_varlen_pytorch",
    "attention_varlen_reference",
    "check_close",
    "check_lse",
    "check_written",
    "default_slack",
    "poison_",
]


# ----------------------------------------------------------------------------------------
# Array-library shims: the reference is written once for numpy and torch.
# ----------------------------------------------------------------------------------------


def _is_torch(x) -> bool:
    return type(x).__module__.partition(".")[0] == "torch"


class _NumpyOps:
    @staticmethod
    def to(x, dtype):
        return np.asarray(x, dtype=dtype)

    @staticmethod
    def repeat_heads(x, r):  # [B, S, H, D] -> [B, S, H*r, D], head h -> kv head h // r
        return np.repeat(x, r, axis=2)

    @staticmethod
    def allowed_mask(s_q, s_k, causal, like, window=(-1, -1)):
        return allowed_keys(s_q, s_k, causal, window)

    @staticmethod
    def rowmax(x):
        return np.max(x, axis=-1, keepdims=True)

    @staticmethod
    def rowsum(x):
        return np.sum(x, axis=-1, keepdims=True)

    @staticmethod
    def group_sum(x, r):  # [B, H*r, ...] -> [B, H, ...]: the inverse of repeat_heads' fan-out
        return x.reshape(x.shape[0], x.shape[1] // r, r, *x.shape[2:]).sum(axis=2)

    @staticmethod
    def zeros(shape, like):
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def full(shape, value, like):
        return np.full(shape, value, dtype=like.dtype)

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    tanh = staticmethod(np.tanh)
    where = staticmethod(np.where)
    isfinite = staticmethod(np.isfinite)


class _TorchOps:
    def __init__(self):
        import torch

        self.torch = torch
        self.exp = torch.exp
        self.log = torch.log
        self.tanh = torch.tanh
        self.where = torch.where
        self.isfinite = torch.isfinite

    def to(self, x, dtype):
        return x.to(dtype)

    def repeat_heads(self, x, r):
        return x.repeat_interleave(r, dim=2) if r > 1 else x

    def allowed_mask(self, s_q, s_k, causal, like, window=(-1, -1)):
        t = self.torch
        left, right = _bounds(causal, window)
        i = t.arange(s_q, device=like.device)[:, None]
        j = t.arange(s_k, device=like.device)[None, :]
        allowed = t.ones((s_q, s_k), dtype=t.bool, device=like.device)
        if right >= 0:
            allowed = allowed & (j <= i + (s_k - s_q) + right)
        if left >= 0:
            allowed = allowed & (j >= i + (s_k - s_q) - left)
        return allowed

    def rowmax(self, x):
        return x.amax(dim=-1, keepdim=True)

    def rowsum(self, x):
        return x.sum(dim=-1, keepdim=True)

    def group_sum(self, x, r):
        return x.reshape(x.shape[0], x.shape[1] // r, r, *x.shape[2:]).sum(dim=2)

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=like.dtype, device=like.device)

    def full(self, shape, value, like):
        return self.torch.full(shape, value, dtype=like.dtype, device=like.device)


def _ops_for(x):
    return _TorchOps() if _is_torch(x) else _NumpyOps()


def _compute_dtype(x, ops, compute_dtype):
    """numpy inputs: float64; torch inputs: ``compute_dtype`` (default float32)."""
    if _is_torch(x):
        return compute_dtype if compute_dtype is not None else ops.torch.float32
    return np.float64


# ----------------------------------------------------------------------------------------
# Masks: causal and sliding window
# ----------------------------------------------------------------------------------------


def _bounds(causal, window):
    """(left, right) of the visible band, -1 where unbounded; causal is right = 0 (a larger
    right bound is clipped to 0, as the kernels do)."""
    if window is None:
        window = (-1, -1)
    left, right = (int(x) for x in window)
    if left < -1 or right < -1:
        raise ValueError(f"window bounds must be >= -1, got {(left, right)}")
    if causal:
        right = 0
    return left, right


def _has_mask(causal, window):
    return causal or any(int(x) >= 0 for x in (window or (-1, -1)))


def allowed_keys(s_q, s_k, causal=False, window=(-1, -1)):
    """Boolean numpy ``[s_q, s_k]``: True where query row i sees key j.

    Bottom-right aligned, with ``d = s_k - s_q``: row i keeps key j iff
    ``right < 0 or j <= i + d + right`` and ``left < 0 or j >= i + d - left``, where
    ``(left, right) = window`` (-1: no bound on that side) and ``causal=True`` sets
    ``right = 0``.
    """
    left, right = _bounds(causal, window)
    i = np.arange(s_q)[:, None]
    j = np.arange(s_k)[None, :]
    allowed = np.ones((s_q, s_k), dtype=bool)
    if right >= 0:
        allowed &= j <= i + (s_k - s_q) + right
    if left >= 0:
        allowed &= j >= i + (s_k - s_q) - left
    return allowed


def _swap12(x):  # [B, S, H, D] <-> [B, H, S, D]; a view for numpy and torch alike
    return x.swapaxes(1, 2)


@contextlib.contextmanager
def _ieee_fp32_matmul(x):
    """Make float32 matmuls of the reference run in IEEE float32, not TF32 (torch on CUDA).

    Yields False when the precision setting cannot be read (torch raises after a mix of
    its legacy and new TF32 APIs): the caller then does its matmuls in float64.
    """
    if not _is_torch(x) or x.device.type != "cuda":
        yield True
        return
    import torch

    try:
        prev = torch.get_float32_matmul_precision()
    except RuntimeError:
        yield False
        return
    if prev == "highest":
        yield True
        return
    torch.set_float32_matmul_precision("highest")
    try:
        yield True
    finally:
        torch.set_float32_matmul_precision(prev)


# ----------------------------------------------------------------------------------------
# The reference
# ----------------------------------------------------------------------------------------


def _check_shapes(q, k, v):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"expected 4-d BSHD q/k/v, got {q.shape}, {k.shape}, {v.shape}")
    B, _, H_q, D = q.shape
    if k.shape[0] != B or v.shape[0] != B or k.shape[1] != v.shape[1]:
        raise ValueError(f"batch/length mismatch: q {q.shape}, k {k.shape}, v {v.shape}")
    H_kv = k.shape[2]
    if v.shape[2] != H_kv or H_kv == 0 or H_q % H_kv != 0 or k.shape[3] != D:
        raise ValueError(f"head mismatch: q {q.shape}, k {k.shape}, v {v.shape}")


def attention_reference(q, k, v, causal=False, softmax_scale=None, compute_dtype=None,
                        window=(-1, -1), softcap=0.0):
    """High-precision attention: ``(out [B, S_q, H_q, D_v], lse [B, H_q, S_q])``.

    numpy inputs are computed in float64 (``compute_dtype`` is ignored) and give float64
    results; torch inputs in ``compute_dtype`` (default ``torch.float32``; float32 matmuls
    never use TF32) on their own device. Query row i sees keys j <= i + S_k - S_q when
    ``causal``, and the keys of its ``window`` (:func:`allowed_keys`); ``softcap > 0`` caps
    the scaled scores to ``softcap * tanh(s / softcap)`` before the mask (lse is of the
    capped scores). A row that sees no key gets out 0 and lse -inf.
    """
    _check_shapes(q, k, v)
    ops = _ops_for(q)
    dtype = _compute_dtype(q, ops, compute_dtype)
    B, S_q, H_q, D = q.shape
    S_k, H_kv, D_v = k.shape[1], k.shape[2], v.shape[3]
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)

    qf = _swap12(ops.to(q, dtype))                                   # [B, H_q, S_q, D]
    kf = _swap12(ops.repeat_heads(ops.to(k, dtype), H_q // H_kv))    # [B, H_q, S_k, D]
    vf = _swap12(ops.repeat_heads(ops.to(v, dtype), H_q // H_kv))    # [B, H_q, S_k, D_v]
    if S_k == 0:  # nothing to attend to: every row is empty
        out = ops.zeros((B, S_q, H_q, D_v), like=qf)
        return out, ops.full((B, H_q, S_q), -math.inf, like=qf)

    with _ieee_fp32_matmul(q) as ieee:
        if not ieee:  # unknown TF32 state: float64 matmuls cannot be degraded
            qf, kf, vf = (ops.to(t, ops.torch.float64) for t in (qf, kf, vf))
        s = (qf @ kf.swapaxes(-1, -2)) * scale                       # [B, H_q, S_q, S_k]
        if softcap:
            s = ops.tanh(s * (1.0 / softcap)) * softcap
        allowed = ops.allowed_mask(S_q, S_k, causal, like=qf, window=window)  # [S_q, S_k]
        s = ops.where(allowed, s, -math.inf)
        m = ops.rowmax(s)                                            # [B, H_q, S_q, 1]
        has_key = ops.isfinite(m)
        m = ops.where(has_key, m, 0.0)
        p = ops.exp(s - m)                                           # masked: exp(-inf) = 0
        l = ops.rowsum(p)
        out = (p @ vf) / ops.where(has_key, l, 1.0)                  # empty rows: 0 / 1
    lse = ops.where(has_key, m + ops.log(ops.where(has_key, l, 1.0)), -math.inf)
    return _swap12(ops.to(out, dtype)), ops.to(lse[..., 0], dtype)


def _offsets(cu_seqlens):
    cu = [int(x) for x in cu_seqlens.tolist()]
    if not cu or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must start at 0 and be non-decreasing, got {cu}")
    return cu


def _varlen_apply(fn, q, k, v, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale, **kw):
    """Run a dense attention ``fn`` per sequence of a packed batch.

    q [total_q, H_q, D], k/v [total_k, H_kv, D]; returns (out [total_q, H_q, D_v],
    lse [H_q, total_q]). Rows of q outside every sequence stay 0 / -inf.
    """
    cq, ck = _offsets(cu_seqlens_q), _offsets(cu_seqlens_k)
    if len(cq) != len(ck):
        raise ValueError(f"cu_seqlens_q has {len(cq)} entries, cu_seqlens_k {len(ck)}")
    out, lse = None, None
    for b in range(len(cq) - 1):
        o_b, l_b = fn(q[None, cq[b]:cq[b + 1]], k[None, ck[b]:ck[b + 1]],
                      v[None, ck[b]:ck[b + 1]], causal=causal, softmax_scale=softmax_scale,
                      **kw)
        if out is None:
            ops = _ops_for(o_b)
            out = ops.zeros((q.shape[0], q.shape[1], v.shape[2]), like=o_b)
            lse = ops.full((q.shape[1], q.shape[0]), -math.inf, like=l_b)
        out[cq[b]:cq[b + 1]] = o_b[0]
        lse[:, cq[b]:cq[b + 1]] = l_b[0]
    if out is None:  # B == 0
        raise ValueError("empty batch: cu_seqlens has a single entry")
    return out, lse


def attention_varlen_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False,
                               softmax_scale=None, compute_dtype=None, window=(-1, -1),
                               softcap=0.0):
    """:func:`attention_reference` per sequence of a packed (varlen) batch (the mask and
    window bottom-right aligned in each sequence).

    q [total_q, H_q, D], k/v [total_k, H_kv, D], cu_seqlens int [B+1] (any device).
    Returns (out [total_q, H_q, D_v], lse [H_q, total_q]).
    """
    return _varlen_apply(attention_reference, q, k, v, cu_seqlens_q, cu_seqlens_k, causal,
                         softmax_scale, compute_dtype=compute_dtype, window=window,
                         softcap=softcap)


def attention_backward_reference(q, k, v, dout, causal=False, softmax_scale=None,
                                 compute_dtype=None, window=(-1, -1), softcap=0.0):
    """High-precision gradients of :func:`attention_reference`'s ``out`` for the incoming
    gradient ``dout [B, S_q, H_q, D_v]``: ``(dq, dk, dv)`` shaped like q, k, v.

    The analytic backward, in float64 for numpy and ``compute_dtype`` (default float32;
    pass ``torch.float64`` for gradient tests) for torch::

        S = q k^T * scale, capped: S = c tanh(S / c) when softcap c > 0
        P = softmax(S) (masked: causal, window; 0 for rows that see no key)
        dv = P^T dout,  dS = P * (dout v^T - rowsum(dout * out))  [* (1 - tanh^2) if capped]
        dq = dS k * scale,  dk = dS^T q * scale

    GQA: dk and dv of a KV head are summed over the query heads that read it. Rows that
    see no key contribute nothing (zero dq; no share of dk, dv).
    """
    _check_shapes(q, k, v)
    ops = _ops_for(q)
    dtype = _compute_dtype(q, ops, compute_dtype)
    B, S_q, H_q, D = q.shape
    S_k, H_kv, D_v = k.shape[1], k.shape[2], v.shape[3]
    if tuple(dout.shape) != (B, S_q, H_q, D_v):
        raise ValueError(f"dout: expected shape {(B, S_q, H_q, D_v)}, got {tuple(dout.shape)}")
    r = H_q // H_kv
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)
    qf = _swap12(ops.to(q, dtype))                                   # [B, H_q, S_q, D]
    if S_k == 0 or S_q == 0:
        return (_swap12(ops.zeros((B, H_q, S_q, D), like=qf)),
                _swap12(ops.zeros((B, H_kv, S_k, D), like=qf)),
                _swap12(ops.zeros((B, H_kv, S_k, D_v), like=qf)))
    kf = _swap12(ops.repeat_heads(ops.to(k, dtype), r))              # [B, H_q, S_k, D]
    vf = _swap12(ops.repeat_heads(ops.to(v, dtype), r))              # [B, H_q, S_k, D_v]
    dof = _swap12(ops.to(dout, dtype))                               # [B, H_q, S_q, D_v]
    with _ieee_fp32_matmul(q) as ieee:
        if not ieee:
            qf, kf, vf, dof = (ops.to(t, ops.torch.float64) for t in (qf, kf, vf, dof))
        s = (qf @ kf.swapaxes(-1, -2)) * scale                       # [B, H_q, S_q, S_k]
        if softcap:
            t = ops.tanh(s * (1.0 / softcap))
            s = t * softcap
        s = ops.where(ops.allowed_mask(S_q, S_k, causal, like=qf, window=window), s,
                      -math.inf)
        m = ops.rowmax(s)
        has_key = ops.isfinite(m)
        p = ops.exp(s - ops.where(has_key, m, 0.0))
        p = p / ops.where(has_key, ops.rowsum(p), 1.0)               # empty rows: all 0
        out = p @ vf                                                 # [B, H_q, S_q, D_v]
        dv = p.swapaxes(-1, -2) @ dof                                # [B, H_q, S_k, D_v]
        ds = p * (dof @ vf.swapaxes(-1, -2) - ops.rowsum(dof * out))
        if softcap:
            ds = ds * (1.0 - t * t)                                  # d(c tanh(x/c))/dx
        dq = (ds @ kf) * scale                                       # [B, H_q, S_q, D]
        dk = (ds.swapaxes(-1, -2) @ qf) * scale                      # [B, H_q, S_k, D]
    return (ops.to(_swap12(dq), dtype), ops.to(_swap12(ops.group_sum(dk, r)), dtype),
            ops.to(_swap12(ops.group_sum(dv, r)), dtype))


def _varlen_grads(fn, q, k, v, dout, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale, **kw):
    """Run a dense backward ``fn`` per sequence of a packed batch: (dq, dk, dv) shaped like
    q [total_q, H_q, D], k, v [total_k, H_kv, *]; rows outside every sequence get 0."""
    cq, ck = _offsets(cu_seqlens_q), _offsets(cu_seqlens_k)
    if len(cq) != len(ck):
        raise ValueError(f"cu_seqlens_q has {len(cq)} entries, cu_seqlens_k {len(ck)}")
    if len(cq) < 2:
        raise ValueError("empty batch: cu_seqlens has a single entry")
    grads = None
    for b in range(len(cq) - 1):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        g = fn(q[None, qs], k[None, ks], v[None, ks], dout[None, qs], causal=causal,
               softmax_scale=softmax_scale, **kw)
        if grads is None:
            ops = _ops_for(g[0])
            grads = tuple(ops.zeros(tuple(x.shape), like=gi) for x, gi in zip((q, k, v), g))
        grads[0][qs] = g[0][0]
        grads[1][ks] = g[1][0]
        grads[2][ks] = g[2][0]
    return grads


def attention_varlen_backward_reference(q, k, v, dout, cu_seqlens_q, cu_seqlens_k, causal=False,
                                        softmax_scale=None, compute_dtype=None,
                                        window=(-1, -1), softcap=0.0):
    """:func:`attention_backward_reference` per sequence of a packed batch:
    (dq [total_q, H_q, D], dk [total_k, H_kv, D], dv [total_k, H_kv, D_v])."""
    return _varlen_grads(attention_backward_reference, q, k, v, dout, cu_seqlens_q,
                         cu_seqlens_k, causal, softmax_scale, compute_dtype=compute_dtype,
                         window=window, softcap=softcap)


# ----------------------------------------------------------------------------------------
# PyTorch's own attention in the low dtype: the baseline error of SPEC §3
# ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _low_precision_math_sdpa():
    """SDPA restricted to the math backend with its reductions in fp16/bf16.

    By default the math backend upcasts half inputs to float32; that would make the
    baseline error only the final rounding, not "PyTorch's attention in the same dtype".
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cuda_backends = torch.backends.cuda
    prev = cuda_backends.fp16_bf16_reduction_math_sdp_allowed()
    cuda_backends.allow_fp16_bf16_reduction_math_sdp(True)
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            yield
    finally:
        cuda_backends.allow_fp16_bf16_reduction_math_sdp(prev)


def _sdpa_low(qh, kh, vh, mask, scale, softcap):
    """SDPA's math backend in the inputs' dtype on BHSD tensors: SDPA itself without a
    softcap; with one (SDPA has none) the same math written out in the inputs' dtype (q and
    k scaled by sqrt(scale) each, the cap, the mask, softmax, P v), differentiable."""
    import torch
    import torch.nn.functional as F

    if not softcap:
        return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
    f = math.sqrt(scale)
    s = (qh * f) @ (kh * f).transpose(-2, -1)
    s = torch.tanh(s / softcap) * softcap
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return torch.softmax(s, dim=-1) @ vh


def _pytorch_mask(ops, S_q, S_k, causal, window, like):
    """(mask for SDPA or None, row_has_key [S_q] or None): rows that see no key get their
    mask opened (so SDPA's NaN for an all-masked row cannot reach anything) and are zeroed
    by the caller."""
    if not _has_mask(causal, window):
        return None, None
    allowed = ops.allowed_mask(S_q, S_k, causal, like=like, window=window)
    row_has_key = allowed.any(dim=-1)                                # [S_q]
    return allowed | ~row_has_key[:, None], row_has_key


def attention_pytorch(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0):
    """``torch.nn.functional.scaled_dot_product_attention`` (math backend, computing in the
    inputs' dtype) on BSHD tensors, kv heads repeated for GQA, bottom-right causal mask and
    sliding window as a boolean mask. With ``softcap`` (which SDPA lacks) the math backend's
    computation is written out in the inputs' dtype with the cap added.

    Returns out [B, S_q, H_q, D_v] in the inputs' dtype. Rows that see no key are set to 0,
    the reference's value (SDPA would give NaN or 0 there depending on the version).
    """
    import torch

    _check_shapes(q, k, v)
    B, S_q, H_q, D = q.shape
    S_k, H_kv, D_v = k.shape[1], k.shape[2], v.shape[3]
    if S_k == 0 or S_q == 0:
        return torch.zeros((B, S_q, H_q, D_v), dtype=q.dtype, device=q.device)
    ops = _TorchOps()
    r = H_q // H_kv
    qh = _swap12(q)
    kh = _swap12(ops.repeat_heads(k, r))
    vh = _swap12(ops.repeat_heads(v, r))
    mask, row_has_key = _pytorch_mask(ops, S_q, S_k, causal, window, q)
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)
    with torch.no_grad(), _low_precision_math_sdpa():
        out = _sdpa_low(qh, kh, vh, mask, scale, softcap)
    out = _swap12(out)
    if row_has_key is not None:
        out = torch.where(row_has_key[None, :, None, None], out,
                          torch.zeros((), dtype=out.dtype, device=out.device))
    return out


def attention_varlen_pytorch(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False,
                             softmax_scale=None, window=(-1, -1), softcap=0.0):
    """:func:`attention_pytorch` per sequence of a packed batch -> out [total_q, H_q, D_v]."""

    def dense(qb, kb, vb, causal, softmax_scale, **kw):
        out = attention_pytorch(qb, kb, vb, causal=causal, softmax_scale=softmax_scale, **kw)
        return out, out.new_zeros((1, qb.shape[2], qb.shape[1]), dtype=out.dtype)

    return _varlen_apply(dense, q, k, v, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale,
                         window=window, softcap=softcap)[0]


def attention_backward_pytorch(q, k, v, dout, causal=False, softmax_scale=None,
                               window=(-1, -1), softcap=0.0):
    """PyTorch's gradients in the inputs' dtype: autograd through the math SDPA of
    :func:`attention_pytorch` (reductions in fp16/bf16; with a softcap, through the same
    math written out), kv heads repeated (their gradients summed back by autograd). Returns
    (dq, dk, dv) like q, k, v. Rows that see no key get no gradient (their dout is zeroed
    and their mask opened, so SDPA's NaN for an all-masked row cannot reach the others).
    """
    import torch

    _check_shapes(q, k, v)
    B, S_q, H_q, D = q.shape
    S_k, H_kv = k.shape[1], k.shape[2]
    if S_k == 0 or S_q == 0:
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    ops = _TorchOps()
    r = H_q // H_kv
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)
    ql, kl, vl = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    dout = dout.detach()
    mask, row_has_key = _pytorch_mask(ops, S_q, S_k, causal, window, q)
    if row_has_key is not None:
        dout = torch.where(row_has_key[None, :, None, None], dout,
                           torch.zeros((), dtype=dout.dtype, device=dout.device))
    with torch.enable_grad(), _low_precision_math_sdpa():
        out = _sdpa_low(_swap12(ql), _swap12(ops.repeat_heads(kl, r)),
                        _swap12(ops.repeat_heads(vl, r)), mask, scale, softcap)
        dq, dk, dv = torch.autograd.grad(_swap12(out), (ql, kl, vl), dout)
    return dq, dk, dv


def attention_varlen_backward_pytorch(q, k, v, dout, cu_seqlens_q, cu_seqlens_k, causal=False,
                                      softmax_scale=None, window=(-1, -1), softcap=0.0):
    """:func:`attention_backward_pytorch` per sequence of a packed batch."""
    return _varlen_grads(attention_backward_pytorch, q, k, v, dout, cu_seqlens_q, cu_seqlens_k,
                         causal, softmax_scale, window=window, softcap=softcap)


# ----------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    """Outcome of a check: ``ok`` and a readable ``message`` (also on success)."""

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.message


def _dtype_name(x) -> str:
    return str(x.dtype).replace("torch.", "")


# Machine epsilon of the output dtypes.
_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}


def default_slack(dtype_name: str) -> tuple[float, float]:
    """(absolute slack on the max error, slack on the relative-L2 error) for a dtype.

    One epsilon of the dtype on the max-abs error (about twice the rounding error of an
    output near 1, like FlashAttention's ``fwd_atol``), a quarter of it on the relative
    L2 error: enough for cases where PyTorch happens to be exact (e.g. one key per row).
    """
    eps = _EPS.get(dtype_name.replace("torch.", ""), 2.0**-10)
    return eps, eps / 4


def _as_f64(x):
    """float64 copy on the same device (torch) or a float64 numpy array."""
    if _is_torch(x):
        import torch

        return x.detach().to(torch.float64)
    return np.asarray(x, dtype=np.float64)


def _to_host_f64(x) -> np.ndarray:
    if _is_torch(x):
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _scalar(x) -> float:
    return float(x.item()) if hasattr(x, "item") else float(x)


def _errors(a, ref):
    """(max-abs error, relative-L2 error, flat index of the max error) of a vs ref."""
    diff = abs(a - ref)
    max_err = _scalar(diff.max())
    ref_norm = _scalar((ref * ref).sum()) ** 0.5
    err_norm = _scalar((diff * diff).sum()) ** 0.5
    rel = err_norm / ref_norm if ref_norm > 0 else err_norm
    arg = int(_scalar(diff.argmax())) if hasattr(diff, "argmax") else 0
    return max_err, rel, arg


def _first_indices(mask_host: np.ndarray, n: int = 3) -> str:
    idx = np.argwhere(mask_host)[:n]
    return ", ".join(str(tuple(int(i) for i in row)) for row in idx)


def check_close(out, ref, out_pt, atol_slack=None, rtol_slack=None, name="out") -> CheckResult:
    """SPEC §3: ``out`` passes iff

        max|out - ref|    <= 2 * max|out_pt - ref|    + atol_slack   and
        rel_l2(out, ref)  <= 2 * rel_l2(out_pt, ref)  + rtol_slack,

    where ``ref`` is the high-precision reference and ``out_pt`` PyTorch's own attention in
    ``out``'s dtype on the same inputs. NaN in ``out`` never passes; nor does a shape
    mismatch. Slacks default to :func:`default_slack` of ``out``'s dtype.
    Returns a :class:`CheckResult` whose message gives both errors, both bounds, and the
    worst element.
    """
    d_atol, d_rtol = default_slack(_dtype_name(out))
    atol_slack = d_atol if atol_slack is None else atol_slack
    rtol_slack = d_rtol if rtol_slack is None else rtol_slack
    if tuple(out.shape) != tuple(ref.shape) or tuple(out_pt.shape) != tuple(ref.shape):
        return CheckResult(False, f"{name}: shape {tuple(out.shape)} vs reference "
                                  f"{tuple(ref.shape)} (PyTorch {tuple(out_pt.shape)})")
    n = math.prod(out.shape)
    if n == 0:
        return CheckResult(True, f"{name}: empty {tuple(out.shape)}")
    o, r, p = _as_f64(out), _as_f64(ref), _as_f64(out_pt)
    nan_count = int(_scalar((o != o).sum()))
    if nan_count:
        where = _first_indices(np.isnan(_to_host_f64(out)))
        return CheckResult(False, f"{name}: {nan_count} of {n} elements are NaN "
                                  f"(first at {where})")
    max_err, rel, arg = _errors(o, r)
    max_pt, rel_pt, _ = _errors(p, r)
    max_bound = 2 * max_pt + atol_slack
    rel_bound = 2 * rel_pt + rtol_slack
    ok = max_err <= max_bound and rel <= rel_bound  # False for inf/NaN errors
    idx = tuple(int(i) for i in np.unravel_index(arg, tuple(out.shape)))
    worst = (f"worst at {idx}: got {_scalar(o.reshape(-1)[arg]):.6g}, "
             f"reference {_scalar(r.reshape(-1)[arg]):.6g}")
    msg = (f"{name} [{_dtype_name(out)} {tuple(out.shape)}]: "
           f"{'ok' if ok else 'FAILED'}: max_abs {max_err:.3e} "
           f"(bound {max_bound:.3e} = 2 x PyTorch {max_pt:.3e} + {atol_slack:.1e}), "
           f"rel_l2 {rel:.3e} (bound {rel_bound:.3e} = 2 x PyTorch {rel_pt:.3e} + "
           f"{rtol_slack:.1e}); {worst}")
    return CheckResult(bool(ok), msg)


def check_lse(lse, lse_ref, atol=1e-3, rtol=1e-3, name="lse") -> CheckResult:
    """LSE: -inf exactly where the reference is -inf (rows that see no key), otherwise
    ``|lse - ref| <= atol + rtol * |ref|``; NaN never passes."""
    if tuple(lse.shape) != tuple(lse_ref.shape):
        return CheckResult(False, f"{name}: shape {tuple(lse.shape)} vs reference "
                                  f"{tuple(lse_ref.shape)}")
    if _is_torch(lse) and str(lse.dtype) != "torch.float32":
        return CheckResult(False, f"{name}: dtype {lse.dtype}, expected float32")
    a, r = _to_host_f64(lse), _to_host_f64(lse_ref)
    if a.size == 0:
        return CheckResult(True, f"{name}: empty")
    problems = []
    nan = np.isnan(a)
    if nan.any():
        problems.append(f"{int(nan.sum())} NaN (first at {_first_indices(nan)})")
    ref_empty = np.isneginf(r)
    wrong_inf = ref_empty != np.isneginf(a)
    if wrong_inf.any():
        problems.append(f"{int(wrong_inf.sum())} rows where exactly one of lse/reference is "
                        f"-inf (first at {_first_indices(wrong_inf)})")
    finite = ~ref_empty & ~nan & ~np.isneginf(a)
    max_err = 0.0
    if finite.any():
        a_f, r_f = np.where(finite, a, 0.0), np.where(finite, r, 0.0)
        err = np.abs(a_f - r_f)
        tol = atol + rtol * np.abs(r_f)
        bad = err > tol
        max_err = float(err.max())
        if bad.any():
            i = tuple(int(x) for x in np.unravel_index(np.argmax(err - tol), a.shape))
            problems.append(f"{int(bad.sum())} values off by more than {atol:g} + {rtol:g}|ref| "
                            f"(worst at {i}: got {a[i]:.6g}, reference {r[i]:.6g})")
    n_empty = int(ref_empty.sum())
    if problems:
        return CheckResult(False, f"{name} {a.shape}: FAILED: " + "; ".join(problems))
    return CheckResult(True, f"{name} {a.shape}: ok: max_abs {max_err:.3e}, "
                             f"{n_empty} rows -inf as expected")


def check_written(out, ref, name="out") -> CheckResult:
    """Every element was written: no NaN in ``out`` (poisoned with NaN before the run)
    where the reference has none."""
    o, r = _to_host_f64(out), _to_host_f64(ref)
    if o.shape != r.shape:
        return CheckResult(False, f"{name}: shape {o.shape} vs reference {r.shape}")
    unwritten = np.isnan(o) & ~np.isnan(r)
    count = int(unwritten.sum())
    if count:
        return CheckResult(False, f"{name}: {count} of {o.size} elements still NaN (not "
                                  f"written?), first at {_first_indices(unwritten)}")
    return CheckResult(True, f"{name}: all {o.size} elements written")


def poison_(x):
    """Fill a float array/tensor with NaN in place (before a kernel writes it); returns it."""
    if _is_torch(x):
        if not x.is_floating_point():
            raise TypeError(f"poison_: expected a floating-point tensor, got {x.dtype}")
        return x.fill_(float("nan"))
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"poison_: expected a floating-point array, got {x.dtype}")
    x.fill(np.nan)
    return x
