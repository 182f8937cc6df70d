"""The torch integration of the attention forward and backward, without a GPU.

``flashkit._C`` is replaced by a stand-in that computes on CPU tensors with the float64
reference (``flashkit.testing``) and records every call, so the Python layer around the
kernels is tested on its own: the custom ops and their fake implementations, what autograd
saves and hands to the backward op (lse computed when a gradient is needed, the
deterministic flag, ``torch.use_deterministic_algorithms``, the window and softcap), the
dout layouts passed on or copied, the errors for a gradient through lse, varlen plumbing,
the public ``attention_backward`` functions, ``torch.library.opcheck`` and
``torch.compile(fullgraph=True)`` of a training step (aot_eager: no compiler needed), with
and without a window and softcap. Also the PyTorch baselines of flashkit.testing with a
window and softcap, run in float64 against the reference.

Needs torch (skipped without it), not a GPU and not the native extension. The kernels
themselves are tested in test_backward_gpu.py.
"""

import math

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit import _torch_ops as tops
    from flashkit.testing import (attention_backward_reference, attention_reference,
                                  attention_varlen_backward_reference,
                                  attention_varlen_reference)
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

if not hasattr(torch.library, "custom_op"):
    pytest.skip("the custom ops need torch >= 2.4", allow_module_level=True)


class FakeNative:
    """What _torch_ops calls of flashkit._C, on CPU tensors, with the reference."""

    def __init__(self):
        self.fwd_calls, self.bwd_calls = [], []

    @staticmethod
    def _scale(softmax_scale):
        return None if softmax_scale <= 0 else softmax_scale

    @staticmethod
    def _mods(window_left, window_right, softcap):
        assert type(window_left) is int and type(window_right) is int, (window_left,
                                                                       window_right)
        assert type(softcap) is float, softcap
        return dict(window=(window_left, window_right), softcap=softcap)

    def attention_fwd(self, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                      max_seqlen_k, softmax_scale, causal, stream, check_inputs,
                      window_left=-1, window_right=-1, softcap=0.0):
        mods = self._mods(window_left, window_right, softcap)
        self.fwd_calls.append(dict(lse=lse is not None, causal=causal, scale=softmax_scale,
                                   varlen=cu_seqlens_q is not None, stream=stream, **mods))
        kw = dict(causal=causal, softmax_scale=self._scale(softmax_scale),
                  compute_dtype=torch.float64, **mods)
        if cu_seqlens_q is None:
            o, l = attention_reference(q, k, v, **kw)
        else:
            o, l = attention_varlen_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
        out.copy_(o)
        if lse is not None:
            lse.copy_(l)

    def attention_bwd(self, dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                      max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic,
                      workspace, stream, check_inputs, window_left=-1, window_right=-1,
                      softcap=0.0):
        mods = self._mods(window_left, window_right, softcap)
        self.bwd_calls.append(dict(dout=dout, deterministic=deterministic, causal=causal,
                                   scale=softmax_scale, lse_shape=tuple(lse.shape),
                                   out=out, workspace=workspace.numel(),
                                   max_seqlens=(max_seqlen_q, max_seqlen_k),
                                   varlen=cu_seqlens_q is not None, **mods))
        assert workspace.dtype == torch.uint8 and workspace.dim() == 1
        assert dq.is_contiguous() and dk.is_contiguous() and dv.is_contiguous()
        kw = dict(causal=causal, softmax_scale=self._scale(softmax_scale),
                  compute_dtype=torch.float64, **mods)
        if cu_seqlens_q is None:
            g = attention_backward_reference(q, k, v, dout, **kw)
        else:
            g = attention_varlen_backward_reference(q, k, v, dout, cu_seqlens_q, cu_seqlens_k,
                                                    **kw)
        for dst, src in zip((dq, dk, dv), g):
            dst.copy_(src)

    @staticmethod
    def attention_bwd_workspace_size(batch, rows_q, max_seqlen_q, num_heads_q, head_dim,
                                     deterministic):
        return rows_q * num_heads_q * (head_dim + 1) * 4 + (batch * 64 if deterministic else 0)


@pytest.fixture
def native(monkeypatch):
    fake = FakeNative()
    monkeypatch.setattr(flashkit, "_C", fake)
    return fake


@pytest.fixture(params=["function", "custom_op"])
def autograd_path(request, monkeypatch):
    """The two ways an eager differentiated call runs: the torch.autograd.Function without
    the dispatcher (_DenseFn / _VarlenFn, the default) and the custom op's registered
    autograd (what torch.compile traces; forced here by turning _eager_autograd off)."""
    if request.param == "custom_op":
        monkeypatch.setattr(tops, "_eager_autograd", lambda tensors: False)
    return request.param


def make(B=2, S_q=9, S_k=13, H_q=4, H_kv=2, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = ((B, S_q, H_q, D), (B, S_k, H_kv, D), (B, S_k, H_kv, D), (B, S_q, H_q, D))
    return [torch.randn(s, generator=g, dtype=torch.float32).to(dtype) for s in shapes]


def leaves(*ts):
    return [t.detach().clone().requires_grad_(True) for t in ts]


def close(a, b, what):
    torch.testing.assert_close(a.double(), b.double(), rtol=1e-5, atol=1e-6, msg=what)


# ---------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_calls_the_backward_op(native, autograd_path, causal):
    q, k, v, dout = make()
    ql, kl, vl = leaves(q, k, v)
    out = flashkit.attention(ql, kl, vl, causal=causal, softmax_scale=0.3)
    assert not isinstance(out, tuple) and out.requires_grad
    assert native.fwd_calls[-1]["lse"], "a forward that may be differentiated keeps its lse"
    out.backward(dout)
    (call,) = native.bwd_calls
    assert call["causal"] is causal and call["scale"] == pytest.approx(0.3)
    assert call["deterministic"] is False and call["lse_shape"] == (2, 4, 9)
    assert call["workspace"] == FakeNative.attention_bwd_workspace_size(2, 18, 9, 4, 16, False)
    expected = attention_backward_reference(q, k, v, dout, causal=causal, softmax_scale=0.3,
                                            compute_dtype=torch.float64)
    for name, t, e in zip(("dq", "dk", "dv"), (ql, kl, vl), expected):
        close(t.grad, e, name)


def test_no_grad_forward_skips_lse_and_the_dispatcher(native):
    q, k, v, _ = make()
    with torch.no_grad():
        flashkit.attention(*leaves(q, k, v))
    flashkit.attention(q, k, v)  # nothing requires grad
    assert [c["lse"] for c in native.fwd_calls] == [False, False]


def test_deterministic_flag_reaches_the_backward(native, autograd_path):
    q, k, v, dout = make()
    flashkit.attention(*leaves(q, k, v), deterministic=True).backward(dout)
    flashkit.attention(*leaves(q, k, v)).backward(dout)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        flashkit.attention(*leaves(q, k, v)).backward(dout)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert [c["deterministic"] for c in native.bwd_calls] == [True, False, True]
    big = FakeNative.attention_bwd_workspace_size(2, 18, 9, 4, 16, True)
    assert native.bwd_calls[0]["workspace"] == big


def test_return_lse_with_grad(native, autograd_path):
    q, k, v, dout = make()
    ql, kl, vl = leaves(q, k, v)
    out, lse = flashkit.attention(ql, kl, vl, causal=True, return_lse=True)
    assert lse.shape == (2, 4, 9) and lse.dtype == torch.float32
    out.backward(dout)  # lse unused: fine
    assert ql.grad is not None
    out, lse = flashkit.attention(*leaves(q, k, v), return_lse=True)
    with pytest.raises(NotImplementedError, match="lse"):
        (out.sum() + lse.sum()).backward()
    with pytest.raises(NotImplementedError, match="lse"):  # lse alone
        flashkit.attention(*leaves(q, k, v), return_lse=True)[1].sum().backward()


def test_forward_op_without_lse_cannot_be_differentiated(native):
    q, k, v, _ = make()
    out, lse = torch.ops.flashkit.attention_fwd(*leaves(q, k, v), False, 0.0, False)
    assert lse.shape == (0,)
    with pytest.raises(RuntimeError, match="return_lse"):
        out.sum().backward()


def test_only_some_inputs_require_grad(native, autograd_path):
    q, k, v, dout = make()
    kl = k.clone().requires_grad_(True)
    out = flashkit.attention(q, kl, v, causal=True)
    (dk,) = torch.autograd.grad(out, (kl,), dout)
    close(dk, attention_backward_reference(q, k, v, dout, causal=True,
                                           compute_dtype=torch.float64)[1], "dk")


@pytest.mark.parametrize("kind", ["contiguous", "bhsd", "expanded", "last_dim_strided",
                                  "misaligned", "row_stride_odd"])
def test_dout_layouts(native, autograd_path, kind):
    """dout reaches the kernel as it is when its layout is one the kernels read (last dim
    contiguous, 16-byte strides and pointer), else as a contiguous copy; same gradients."""
    q, k, v, dout = make(dtype=torch.bfloat16, D=16)
    B, S, H, D = dout.shape
    if kind == "contiguous":
        g = dout
    elif kind == "bhsd":
        g = dout.transpose(1, 2).contiguous().transpose(1, 2)
    elif kind == "expanded":
        g = torch.full((), 0.5, dtype=dout.dtype).expand(dout.shape)
    elif kind == "last_dim_strided":
        g = torch.stack([dout, dout], dim=-1).flatten(-2)[..., ::2]
    elif kind == "misaligned":
        flat = torch.empty(dout.numel() + 8, dtype=dout.dtype)
        start = next(i for i in range(1, 8) if (flat.data_ptr() + 2 * i) % 16)
        g = flat[start:start + dout.numel()].view(dout.shape)
        g.copy_(dout)
    else:
        g = torch.cat([dout, dout[..., :1]], dim=-1)[..., :D]
    passed_as_is = kind in ("contiguous", "bhsd")
    flashkit.attention(*leaves(q, k, v), causal=True).backward(g)
    seen = native.bwd_calls[-1]["dout"]
    assert torch.equal(seen, g)
    assert (seen.data_ptr() == g.data_ptr()) is passed_as_is, kind
    if not passed_as_is:
        assert seen.is_contiguous() and seen.data_ptr() % 16 == 0


# ---------------------------------------------------------------------------------------
# Varlen
# ---------------------------------------------------------------------------------------


def varlen_inputs(lens_q=(3, 0, 5), lens_k=(4, 2, 0), H_q=4, H_kv=2, D=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    tq, tk = sum(lens_q), sum(lens_k)
    q, dout = (torch.randn((tq, H_q, D), generator=g) for _ in range(2))
    k, v = (torch.randn((tk, H_kv, D), generator=g) for _ in range(2))

    def cu(lens):
        return torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))],
                            dtype=torch.int32)

    return q, k, v, dout, cu(lens_q), cu(lens_k), max(lens_q), max(lens_k)


def test_varlen_autograd(native, autograd_path):
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs()
    ql, kl, vl = leaves(q, k, v)
    out = flashkit.attention_varlen(ql, kl, vl, cu_q, cu_k, mq, mk, causal=True,
                                    deterministic=True)
    out.backward(dout)
    (call,) = native.bwd_calls
    assert call["varlen"] and call["max_seqlens"] == (5, 4) and call["deterministic"]
    assert call["lse_shape"] == (4, 8)
    expected = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k, causal=True,
                                                   compute_dtype=torch.float64)
    for name, t, e in zip(("dq", "dk", "dv"), (ql, kl, vl), expected):
        close(t.grad, e, name)


def test_varlen_backward_public(native):
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs()
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    dq, dk, dv = flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq,
                                                    mk, softmax_scale=0.5)
    expected = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k, softmax_scale=0.5,
                                                   compute_dtype=torch.float64)
    for name, a, e in zip(("dq", "dk", "dv"), (dq, dk, dv), expected):
        close(a, e, name)
    with pytest.raises(TypeError, match="max_seqlen_q"):
        flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, 5.0, mk)


# ---------------------------------------------------------------------------------------
# The public dense backward
# ---------------------------------------------------------------------------------------


def test_attention_backward_public(native):
    q, k, v, dout = make()
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = flashkit.attention_backward(dout, q, k, v, out, lse, causal=True,
                                             deterministic=True)
    assert native.bwd_calls[-1]["deterministic"] is True
    assert native.bwd_calls[-1]["out"] is out
    expected = attention_backward_reference(q, k, v, dout, causal=True,
                                            compute_dtype=torch.float64)
    for name, a, e in zip(("dq", "dk", "dv"), (dq, dk, dv), expected):
        close(a, e, name)
    with pytest.raises(TypeError, match="lse"):
        flashkit.attention_backward(dout, q, k, v, out, None)
    with pytest.raises(ValueError, match="q"):
        flashkit.attention_backward(dout, q[0], k, v, out, lse)


# ---------------------------------------------------------------------------------------
# Fake implementations, opcheck, torch.compile
# ---------------------------------------------------------------------------------------


def test_fake_implementations_match_the_real_ones(native):
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, dout = make(dtype=torch.bfloat16)
    out, lse = flashkit.attention(q, k, v, return_lse=True)
    real = torch.ops.flashkit.attention_bwd(dout, q, k, v, out, lse, False, 0.0, False)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(t) for t in (dout, q, k, v, out, lse)]
        fake = torch.ops.flashkit.attention_bwd(*fake_args, False, 0.0, False)
    for a, b in zip(real, fake):
        assert a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()


def test_opcheck(native):
    if not hasattr(torch.library, "opcheck"):
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    q, k, v, dout = make()
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_bwd.default,
                          (dout, q, k, v, out, lse, True, 0.0, True))
    torch.library.opcheck(torch.ops.flashkit.attention_fwd.default,
                          (q, k, v, True, 0.0, True, True))
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs()
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_varlen_bwd.default,
                          (dout, q, k, v, out, lse, cu_q, cu_k, mq, mk, False, 0.0, False))


def _step(q, k, v, w, varlen=None):
    if varlen is None:
        out = flashkit.attention(q * 0.5, k, v, causal=True, deterministic=True)
    else:
        out = flashkit.attention_varlen(q * 0.5, k, v, *varlen, causal=True, deterministic=True)
    return (out * w).sum()


@pytest.mark.parametrize("varlen", [False, True])
def test_torch_compile_training_step(native, varlen):
    torch._dynamo.reset()
    if varlen:
        q, k, v, w, cu_q, cu_k, mq, mk = varlen_inputs()
        extra = (cu_q, cu_k, mq, mk)
    else:
        q, k, v, w = make()
        extra = None
    compiled = torch.compile(_step, fullgraph=True, backend="aot_eager")
    lc, le = leaves(q, k, v), leaves(q, k, v)
    compiled(*lc, w, extra).backward()
    _step(*le, w, extra).backward()
    for name, a, b in zip(("dq", "dk", "dv"), lc, le):
        assert torch.equal(a.grad, b.grad), name
    assert all(c["deterministic"] for c in native.bwd_calls)
    assert len(native.bwd_calls) == 2  # compiled and eager


def test_eager_direct_still_used_for_plain_calls(native, monkeypatch):
    """A no-grad eager call does not go through the dispatcher (the ~20 us fast path), nor
    does a differentiated one (_DenseFn); with the Function path off, the forward op runs."""
    calls = []
    real = tops._dense_op
    monkeypatch.setattr(tops, "_dense_op", lambda *a: (calls.append(a), real(*a))[1])
    q, k, v, _ = make()
    flashkit.attention(q, k, v)
    assert calls == []
    out = flashkit.attention(*leaves(q, k, v))
    assert calls == [] and type(out.grad_fn).__name__ == "_DenseFnBackward"
    assert native.fwd_calls[-1]["lse"]
    monkeypatch.setattr(tops, "_eager_autograd", lambda tensors: False)
    out = flashkit.attention(*leaves(q, k, v))
    assert len(calls) == 1 and calls[0][5] is True  # return_lse for the backward
    assert type(out.grad_fn).__name__ != "_DenseFnBackward"
    assert math.isfinite(float(q.sum()))


@pytest.mark.parametrize("varlen", [False, True])
def test_eager_autograd_function_matches_the_custom_op(native, monkeypatch, varlen):
    """The Function path neither calls the forward nor the backward op, hands the backward the
    same arguments as the custom op's autograd, and gives bitwise the same gradients."""
    fwd_ops, bwd_ops = [], []
    names = ("_varlen_op", "_bwd_varlen_op") if varlen else ("_dense_op", "_bwd_dense_op")
    for name, log in zip(names, (fwd_ops, bwd_ops)):
        real = getattr(tops, name)
        monkeypatch.setattr(tops, name, lambda *a, real=real, log=log: (log.append(a), real(*a))[1])
    if varlen:
        q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs()
        call = lambda ql, kl, vl: flashkit.attention_varlen(  # noqa: E731
            ql, kl, vl, cu_q, cu_k, mq, mk, causal=True, softmax_scale=0.4, deterministic=True,
            window=(3, -1), softcap=2.5)
    else:
        q, k, v, dout = make()
        call = lambda ql, kl, vl: flashkit.attention(  # noqa: E731
            ql, kl, vl, causal=True, softmax_scale=0.4, deterministic=True, window=(3, -1),
            softcap=2.5)
    grads = {}
    for path in ("function", "custom_op"):
        if path == "custom_op":
            monkeypatch.setattr(tops, "_eager_autograd", lambda tensors: False)
        ls = leaves(q, k, v)
        out = call(*ls)
        assert (type(out.grad_fn).__name__ in ("_DenseFnBackward", "_VarlenFnBackward")) == (
            path == "function")
        out.backward(dout)
        grads[path] = [t.grad for t in ls]
        if path == "function":
            assert fwd_ops == [] and bwd_ops == [], "the Function path skips the dispatcher"
        else:
            assert len(fwd_ops) == 1 and len(bwd_ops) == 1
    a, b = native.bwd_calls
    for key in ("deterministic", "causal", "scale", "lse_shape", "max_seqlens", "varlen",
                "window", "softcap", "workspace"):
        assert a[key] == b[key], key
    assert a["deterministic"] is True and a["window"] == (3, -1) and a["softcap"] == 2.5
    for name, x, y in zip(("dq", "dk", "dv"), grads["function"], grads["custom_op"]):
        assert torch.equal(x, y), name


def test_eager_autograd_function_create_graph_uses_the_backward_op(native, monkeypatch):
    """A plain backward of the Function path runs the implementation directly; one with
    create_graph=True (grad mode on inside the backward) runs the backward op, as the custom
    op's autograd does. Same gradients."""
    bwd_ops = []
    real = tops._bwd_dense_op
    monkeypatch.setattr(tops, "_bwd_dense_op", lambda *a: (bwd_ops.append(a), real(*a))[1])
    q, k, v, dout = make()
    expected = attention_backward_reference(q, k, v, dout, causal=True,
                                            compute_dtype=torch.float64)
    ls = leaves(q, k, v)
    out = flashkit.attention(*ls, causal=True)
    assert type(out.grad_fn).__name__ == "_DenseFnBackward"
    plain = torch.autograd.grad(out, ls, dout)
    assert bwd_ops == [] and len(native.bwd_calls) == 1
    ls = leaves(q, k, v)
    out = flashkit.attention(*ls, causal=True)
    nested = torch.autograd.grad(out, ls, dout, create_graph=True)
    assert len(bwd_ops) == 1 and len(native.bwd_calls) == 2
    for name, x, y, e in zip(("dq", "dk", "dv"), plain, nested, expected):
        close(x, e, name)
        assert torch.equal(x, y.detach()), name


# ---------------------------------------------------------------------------------------
# Sliding window and softcap
# ---------------------------------------------------------------------------------------

MODS = [((2, -1), 0.0, True), ((1, 1), 0.0, False), ((-1, -1), 5.0, False),
        ((3, -1), 2.0, True), ((0, 0), 1.5, False)]
MOD_IDS = ["causal_window", "two_sided", "softcap", "causal_window_softcap", "diag_softcap"]


@pytest.mark.parametrize("window, softcap, causal", MODS, ids=MOD_IDS)
def test_window_and_softcap_reach_forward_and_backward(native, autograd_path, window, softcap, causal):
    q, k, v, dout = make(S_q=11, S_k=9)
    ql, kl, vl = leaves(q, k, v)
    out = flashkit.attention(ql, kl, vl, causal=causal, window=window, softcap=softcap)
    fwd = native.fwd_calls[-1]
    assert fwd["window"] == window and fwd["softcap"] == softcap and fwd["lse"]
    out.backward(dout)
    (call,) = native.bwd_calls
    assert call["window"] == window and call["softcap"] == softcap
    assert call["causal"] is causal
    expected = attention_backward_reference(q, k, v, dout, causal=causal, window=window,
                                            softcap=softcap, compute_dtype=torch.float64)
    for name, t, e in zip(("dq", "dk", "dv"), (ql, kl, vl), expected):
        close(t.grad, e, name)
    # The window and softcap change the result (the stand-in computes with them).
    if window != (-1, -1) or softcap:
        plain = attention_reference(q, k, v, causal=causal, compute_dtype=torch.float64)[0]
        assert not torch.allclose(out.detach().double(), plain)


def test_window_and_softcap_no_grad_fast_path(native, monkeypatch):
    calls = []
    real = tops._dense_op
    monkeypatch.setattr(tops, "_dense_op", lambda *a: (calls.append(a), real(*a))[1])
    q, k, v, _ = make()
    with torch.no_grad():
        out, lse = flashkit.attention(*leaves(q, k, v), causal=True, window=[3, 0],
                                      softcap=7, return_lse=True)
    assert calls == [], "no-grad calls skip the dispatcher"
    assert native.fwd_calls[-1]["window"] == (3, 0) and native.fwd_calls[-1]["softcap"] == 7.0
    o, l = attention_reference(q, k, v, causal=True, window=(3, 0), softcap=7.0,
                               compute_dtype=torch.float64)
    close(out, o, "out")
    close(lse, l, "lse")
    monkeypatch.setattr(tops, "_eager_autograd", lambda tensors: False)  # the forward op's path
    flashkit.attention(*leaves(q, k, v), window=(3, 0), softcap=7.0)
    assert len(calls) == 1 and calls[0][7:] == (3, 0, 7.0)


def test_window_and_softcap_varlen_autograd_and_public_backward(native, autograd_path):
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(lens_q=(3, 0, 6, 2), lens_k=(4, 2, 0, 5))
    mods = dict(window=(1, -1), softcap=3.0)
    ql, kl, vl = leaves(q, k, v)
    out = flashkit.attention_varlen(ql, kl, vl, cu_q, cu_k, mq, mk, causal=True, **mods)
    out.backward(dout)
    call = native.bwd_calls[-1]
    assert call["varlen"] and call["window"] == (1, -1) and call["softcap"] == 3.0
    expected = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k, causal=True,
                                                   compute_dtype=torch.float64, **mods)
    for name, t, e in zip(("dq", "dk", "dv"), (ql, kl, vl), expected):
        close(t.grad, e, name)
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True,
                                         return_lse=True, **mods)
    o_ref, l_ref = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True,
                                              compute_dtype=torch.float64, **mods)
    close(out, o_ref, "varlen out")
    got = flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq, mk,
                                             causal=True, **mods)
    assert native.bwd_calls[-1]["window"] == (1, -1)
    for name, a, e in zip(("dq", "dk", "dv"), got, expected):
        close(a, e, name)


def test_window_and_softcap_public_dense_backward(native):
    q, k, v, dout = make(S_q=7, S_k=12)
    mods = dict(window=(2, 3), softcap=4.0)
    out, lse = flashkit.attention(q, k, v, return_lse=True, **mods)
    got = flashkit.attention_backward(dout, q, k, v, out, lse, deterministic=True, **mods)
    call = native.bwd_calls[-1]
    assert call["window"] == (2, 3) and call["softcap"] == 4.0 and call["deterministic"]
    expected = attention_backward_reference(q, k, v, dout, compute_dtype=torch.float64, **mods)
    for name, a, e in zip(("dq", "dk", "dv"), got, expected):
        close(a, e, name)
    with pytest.raises(TypeError, match="window"):
        flashkit.attention_backward(dout, q, k, v, out, lse, window=2)
    with pytest.raises(TypeError, match="softcap"):
        flashkit.attention(q, k, v, softcap="2")


def test_window_and_softcap_opcheck_and_fakes(native):
    if not hasattr(torch.library, "opcheck"):
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, dout = make()
    torch.library.opcheck(torch.ops.flashkit.attention_fwd.default,
                          (q, k, v, True, 0.0, True, False, 4, -1, 5.0))
    out, lse = flashkit.attention(q, k, v, causal=True, window=(4, -1), softcap=5.0,
                                  return_lse=True)
    bwd_args = (dout, q, k, v, out, lse, True, 0.0, True, 4, -1, 5.0)
    torch.library.opcheck(torch.ops.flashkit.attention_bwd.default, bwd_args)
    real = torch.ops.flashkit.attention_bwd(*bwd_args)
    with FakeTensorMode() as mode:
        fake = torch.ops.flashkit.attention_bwd(
            *[mode.from_tensor(t) for t in bwd_args[:6]], *bwd_args[6:])
    for a, b in zip(real, fake):
        assert a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs()
    torch.library.opcheck(torch.ops.flashkit.attention_varlen_fwd.default,
                          (q, k, v, cu_q, cu_k, mq, mk, False, 0.0, True, False, False, 2, 2,
                           3.0))
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, window=(2, 2),
                                         softcap=3.0, return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_varlen_bwd.default,
                          (dout, q, k, v, out, lse, cu_q, cu_k, mq, mk, False, 0.0, False, 2, 2,
                           3.0))


def _step_mods(q, k, v, w, varlen=None):
    mods = dict(causal=True, deterministic=True, window=(3, -1), softcap=4.0)
    if varlen is None:
        out = flashkit.attention(q * 0.5, k, v, **mods)
    else:
        out = flashkit.attention_varlen(q * 0.5, k, v, *varlen, **mods)
    return (out * w).sum()


@pytest.mark.parametrize("varlen", [False, True])
def test_torch_compile_training_step_with_window_and_softcap(native, varlen):
    torch._dynamo.reset()
    if varlen:
        q, k, v, w, cu_q, cu_k, mq, mk = varlen_inputs(lens_q=(6, 0, 5), lens_k=(6, 3, 7))
        extra = (cu_q, cu_k, mq, mk)
    else:
        q, k, v, w = make(S_q=10, S_k=10)
        extra = None
    compiled = torch.compile(_step_mods, fullgraph=True, backend="aot_eager")
    lc, le = leaves(q, k, v), leaves(q, k, v)
    compiled(*lc, w, extra).backward()
    _step_mods(*le, w, extra).backward()
    for name, a, b in zip(("dq", "dk", "dv"), lc, le):
        assert torch.equal(a.grad, b.grad), name
    assert len(native.bwd_calls) == 2
    assert all(c["window"] == (3, -1) and c["softcap"] == 4.0 for c in native.bwd_calls)
    assert all(c["window"] == (3, -1) and c["softcap"] == 4.0 for c in native.fwd_calls)


# The baselines of SPEC §3 with a window and softcap: in float64 they are the reference.
@pytest.mark.parametrize("window, softcap, causal", MODS, ids=MOD_IDS)
def test_pytorch_baselines_match_the_reference_in_float64(window, softcap, causal):
    from flashkit.testing import attention_backward_pytorch, attention_pytorch

    q, k, v, dout = (t.double() for t in make(S_q=13, S_k=9, seed=3))
    mods = dict(causal=causal, window=window, softcap=softcap)
    out = attention_pytorch(q, k, v, **mods)
    ref, _ = attention_reference(q, k, v, compute_dtype=torch.float64, **mods)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    grads = attention_backward_pytorch(q, k, v, dout, **mods)
    expected = attention_backward_reference(q, k, v, dout, compute_dtype=torch.float64, **mods)
    for name, a, e in zip(("dq", "dk", "dv"), grads, expected):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9, msg=name)
        assert torch.isfinite(a).all(), name


def test_pytorch_varlen_baselines_with_window_and_softcap():
    from flashkit.testing import (attention_varlen_backward_pytorch,
                                  attention_varlen_pytorch)

    q, k, v, dout, cu_q, cu_k, _, _ = varlen_inputs(lens_q=(3, 0, 6, 2), lens_k=(4, 2, 0, 5))
    q, k, v, dout = (t.double() for t in (q, k, v, dout))
    mods = dict(causal=True, window=(1, -1), softcap=3.0)
    out = attention_varlen_pytorch(q, k, v, cu_q, cu_k, **mods)
    ref, _ = attention_varlen_reference(q, k, v, cu_q, cu_k, compute_dtype=torch.float64,
                                        **mods)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    grads = attention_varlen_backward_pytorch(q, k, v, dout, cu_q, cu_k, **mods)
    expected = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k,
                                                   compute_dtype=torch.float64, **mods)
    for name, a, e in zip(("dq", "dk", "dv"), grads, expected):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9, msg=name)
