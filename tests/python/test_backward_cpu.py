"""The attention backward without a GPU: the reference gradients and the argument checks.

- ``attention_backward_reference`` (float64 numpy) against central finite differences of
  ``attention_reference``, GQA/MQA, causal with rows and keys that see nothing, S_k = 0,
  custom scale, sliding windows and softcap, and its varlen form against the dense one per
  sequence. numpy only.
- ``flashkit.attention_backward`` / ``attention_varlen_backward`` with numpy arrays: the
  Python-side checks (array kinds, ranks, softmax_scale, max_seqlen types) raise
  TypeError/ValueError naming the argument; what passes them reaches the C++ validation,
  which rejects CPU arrays (ValueError naming q and the device), writing nothing.
- ``flashkit._C.validate_attention_bwd`` with ``FakeCudaArray`` descriptors: every argument
  reaches the field it names (a wrong dtype on each one is reported under its own name),
  the workspace size, None handling, ``attention_bwd_workspace_size``.

The API tests need the native extension: skipped without it, unless FLASHKIT_REQUIRE_EXT=1.
"""

import re

import numpy as np
import pytest

try:
    from flashkit.testing import fake_dlpack
except ImportError as e:  # the flashkit package itself is broken (FLASHKIT_REQUIRE_EXT: error)
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

F = fake_dlpack.FakeCudaArray


def names(arg):
    return re.compile(r"(?<![\w])" + re.escape(arg) + r"(?![\w])")


def assert_error(excinfo, arg, what=None):
    msg = str(excinfo.value)
    assert names(arg).search(msg), f"message does not name {arg!r}: {msg!r}"
    if what is not None:
        assert re.search(what, msg, re.IGNORECASE), f"message lacks /{what}/: {msg!r}"


# ---------------------------------------------------------------------------------------
# The reference gradients
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k, H_q, H_kv, D, causal, scale)
GRAD_CASES = [
    (1, 3, 5, 2, 2, 4, False, None),
    (2, 4, 4, 4, 2, 3, True, None),     # GQA 2, square causal
    (1, 5, 3, 4, 1, 4, True, None),     # MQA, S_q > S_k: rows 0, 1 see no key
    (1, 2, 6, 2, 1, 4, True, 0.7),      # S_q < S_k, custom scale
    (2, 1, 1, 2, 2, 4, True, None),     # single token
]


def _loss_grads_fd(R, q, k, v, dout, causal, scale, eps=1e-6, **mods):
    """Central finite differences of sum(out * dout) with respect to q, k, v (mods: window,
    softcap)."""
    def loss():
        return float((R.attention_reference(q, k, v, causal=causal, softmax_scale=scale,
                                             **mods)[0] * dout).sum())

    grads = []
    for x in (q, k, v):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + eps
            hi = loss()
            x[idx] = old - eps
            lo = loss()
            x[idx] = old
            g[idx] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: "B{}_Sq{}_Sk{}_H{}-{}_D{}_{}_{}".format(
    *c[:6], "causal" if c[6] else "full", c[7]))
def test_reference_backward_matches_finite_differences(R, case):
    B, S_q, S_k, H_q, H_kv, D, causal, scale = case
    rng = np.random.default_rng(hash(case) % 2**32)
    q = rng.standard_normal((B, S_q, H_q, D))
    k = rng.standard_normal((B, S_k, H_kv, D))
    v = rng.standard_normal((B, S_k, H_kv, D))
    dout = rng.standard_normal((B, S_q, H_q, D))
    grads = R.attention_backward_reference(q, k, v, dout, causal=causal, softmax_scale=scale)
    expected = _loss_grads_fd(R, q, k, v, dout, causal, scale)
    for name, g, e, x in zip(("dq", "dk", "dv"), grads, expected, (q, k, v)):
        assert g.shape == x.shape and g.dtype == np.float64, name
        np.testing.assert_allclose(g, e, atol=1e-7, rtol=1e-6, err_msg=name)


# (B, S_q, S_k, H_q, H_kv, D, causal, window, softcap)
MOD_GRAD_CASES = [
    (1, 5, 5, 2, 1, 4, True, (1, -1), 0.0),     # causal sliding window, MQA
    (1, 4, 6, 2, 2, 3, False, (1, 1), 0.0),     # two-sided, S_q < S_k
    (1, 6, 3, 4, 2, 4, False, (0, 0), 0.0),     # one key per row, rows 0..2 see none
    (1, 3, 5, 2, 2, 4, False, (-1, -1), 2.0),   # softcap alone
    (2, 5, 4, 4, 2, 3, True, (2, -1), 1.5),     # window + softcap, S_q > S_k
    (1, 4, 7, 2, 1, 4, False, (-1, 2), 5.0),    # right bound only + softcap
]


@pytest.mark.parametrize("case", MOD_GRAD_CASES, ids=lambda c: "Sq{}_Sk{}_{}_w{}_{}_cap{}".format(
    c[1], c[2], "causal" if c[6] else "full", *c[7], c[8]))
def test_reference_backward_with_window_and_softcap(R, case):
    import zlib

    B, S_q, S_k, H_q, H_kv, D, causal, window, softcap = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    q = rng.standard_normal((B, S_q, H_q, D)) * 1.5
    k = rng.standard_normal((B, S_k, H_kv, D)) * 1.5
    v = rng.standard_normal((B, S_k, H_kv, D))
    dout = rng.standard_normal((B, S_q, H_q, D))
    mods = dict(window=window, softcap=softcap)
    grads = R.attention_backward_reference(q, k, v, dout, causal=causal, **mods)
    expected = _loss_grads_fd(R, q, k, v, dout, causal, None, **mods)
    for name, g, e in zip(("dq", "dk", "dv"), grads, expected):
        np.testing.assert_allclose(g, e, atol=1e-7, rtol=1e-6, err_msg=name)
    empty = ~R.allowed_keys(S_q, S_k, causal, window).any(axis=1)
    assert not grads[0][:, empty].any(), "rows that see no key have no gradient"
    unseen = ~R.allowed_keys(S_q, S_k, causal, window).any(axis=0)
    assert not grads[1][:, unseen].any() and not grads[2][:, unseen].any(), \
        "keys no row sees have no gradient"


def test_varlen_reference_backward_with_window_and_softcap(R):
    rng = np.random.default_rng(4)
    lens_q, lens_k = [3, 0, 5, 2], [4, 6, 0, 5]
    cq, ck = np.cumsum([0] + lens_q), np.cumsum([0] + lens_k)
    q, dout = (rng.standard_normal((sum(lens_q), 4, 8)) for _ in range(2))
    k, v = (rng.standard_normal((sum(lens_k), 2, 8)) for _ in range(2))
    mods = dict(causal=True, window=(1, -1), softcap=2.0)
    dq, dk, dv = R.attention_varlen_backward_reference(q, k, v, dout, cq, ck, **mods)
    for b in range(len(lens_q)):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        g = R.attention_backward_reference(q[None, qs], k[None, ks], v[None, ks],
                                           dout[None, qs], **mods)
        np.testing.assert_array_equal(dq[qs], g[0][0])
        np.testing.assert_array_equal(dk[ks], g[1][0])
        np.testing.assert_array_equal(dv[ks], g[2][0])


def test_reference_backward_rows_and_keys_that_see_nothing(R):
    rng = np.random.default_rng(1)
    B, S_q, S_k, H = 1, 5, 2, 2
    q, dout = (rng.standard_normal((B, S_q, H, 4)) for _ in range(2))
    k, v = (rng.standard_normal((B, S_k, H, 4)) for _ in range(2))
    dq, dk, dv = R.attention_backward_reference(q, k, v, dout, causal=True)
    assert not dq[:, :S_q - S_k].any(), "rows that see no key have no gradient"
    assert np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    # S_k = 0 and S_q = 0: zero gradients of the right shapes.
    dq, dk, dv = R.attention_backward_reference(q, k[:, :0], v[:, :0], dout)
    assert dq.shape == q.shape and not dq.any() and dk.shape == (1, 0, 2, 4)
    dq, dk, dv = R.attention_backward_reference(q[:, :0], k, v, dout[:, :0])
    assert dq.shape == (1, 0, 2, 4) and not dk.any() and not dv.any() and dv.shape == v.shape


def test_reference_backward_gqa_is_the_sum_over_the_group(R):
    """dk/dv of a KV head = the sum of the per-query-head gradients of repeated heads."""
    rng = np.random.default_rng(2)
    q, dout = (rng.standard_normal((2, 6, 4, 8)) for _ in range(2))
    k, v = (rng.standard_normal((2, 9, 2, 8)) for _ in range(2))
    dq, dk, dv = R.attention_backward_reference(q, k, v, dout, causal=True)
    dq_r, dk_r, dv_r = R.attention_backward_reference(q, np.repeat(k, 2, axis=2),
                                                      np.repeat(v, 2, axis=2), dout, causal=True)
    np.testing.assert_allclose(dq, dq_r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dk, dk_r[:, :, 0::2] + dk_r[:, :, 1::2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dv, dv_r[:, :, 0::2] + dv_r[:, :, 1::2], rtol=1e-12, atol=1e-12)


def test_reference_backward_rejects_a_wrong_dout(R):
    q = np.zeros((1, 3, 2, 4))
    k = v = np.zeros((1, 5, 2, 4))
    with pytest.raises(ValueError, match="dout"):
        R.attention_backward_reference(q, k, v, np.zeros((1, 3, 2, 5)))


def test_varlen_reference_backward_is_the_dense_one_per_sequence(R):
    rng = np.random.default_rng(3)
    lens_q, lens_k = [3, 0, 5, 2], [4, 6, 0, 2]
    cq, ck = np.cumsum([0] + lens_q), np.cumsum([0] + lens_k)
    q, dout = (rng.standard_normal((sum(lens_q), 4, 8)) for _ in range(2))
    k, v = (rng.standard_normal((sum(lens_k), 2, 8)) for _ in range(2))
    dq, dk, dv = R.attention_varlen_backward_reference(q, k, v, dout, cq, ck, causal=True)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    for b in range(len(lens_q)):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        g = R.attention_backward_reference(q[None, qs], k[None, ks], v[None, ks],
                                           dout[None, qs], causal=True)
        np.testing.assert_array_equal(dq[qs], g[0][0])
        np.testing.assert_array_equal(dk[ks], g[1][0])
        np.testing.assert_array_equal(dv[ks], g[2][0])
    assert not dk[ck[1]:ck[2]].any(), "keys of a sequence without queries get no gradient"


# ---------------------------------------------------------------------------------------
# The public API with numpy arrays
# ---------------------------------------------------------------------------------------


def np_bwd_args(dtype=np.float16, B=1, S_q=4, S_k=6, H_q=4, H_kv=2, D=64):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, S_q, H_q, D)).astype(dtype)
    k = rng.standard_normal((B, S_k, H_kv, D)).astype(dtype)
    v = rng.standard_normal((B, S_k, H_kv, D)).astype(dtype)
    out = rng.standard_normal((B, S_q, H_q, D)).astype(dtype)
    dout = rng.standard_normal((B, S_q, H_q, D)).astype(dtype)
    lse = rng.standard_normal((B, H_q, S_q)).astype(np.float32)
    return dict(dout=dout, q=q, k=k, v=v, out=out, lse=lse)


def np_varlen_args():
    """The dense arguments' first batch entry packed as one varlen batch of 2 sequences."""
    a = {name: x[0] for name, x in np_bwd_args().items() if name != "lse"}
    a["lse"] = np.zeros((4, 4), dtype=np.float32)  # [H_q, total_q]
    a.update(cu_seqlens_q=np.array([0, 1, 4], dtype=np.int32),
             cu_seqlens_k=np.array([0, 3, 6], dtype=np.int32), max_seqlen_q=3, max_seqlen_k=3)
    return a


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_numpy_backward_is_rejected_as_not_cuda(flashkit_ext, causal, deterministic):
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_backward(**np_bwd_args(), causal=causal,
                                        deterministic=deterministic)
    assert_error(ei, "q", r"cuda|device")


def test_numpy_varlen_backward_is_rejected_as_not_cuda(flashkit_ext):
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_varlen_backward(**np_varlen_args(), causal=True)
    assert_error(ei, "q", r"cuda|device")


def test_forward_takes_the_deterministic_flag(flashkit_ext):
    a = np_bwd_args()
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention(a["q"], a["k"], a["v"], causal=True, deterministic=True)
    assert_error(ei, "q", r"cuda|device")
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_varlen(a["q"][0], a["k"][0], a["v"][0],
                                      np.array([0, 4], dtype=np.int32),
                                      np.array([0, 6], dtype=np.int32), 4, 6, deterministic=True)
    assert_error(ei, "q", r"cuda|device")


@pytest.mark.parametrize("arg", ["dout", "k", "v", "out", "lse"])
@pytest.mark.parametrize("bad", [None, [[1.0]], "x"], ids=["None", "list", "str"])
def test_non_array_arguments_are_type_errors(flashkit_ext, arg, bad):
    a = np_bwd_args()
    a[arg] = bad
    with pytest.raises(TypeError) as ei:
        flashkit_ext.attention_backward(**a)
    assert_error(ei, arg)


def test_non_array_q_is_a_type_error(flashkit_ext):
    a = np_bwd_args()
    a["q"] = [[0.0]]
    with pytest.raises(TypeError):
        flashkit_ext.attention_backward(**a)


@pytest.mark.parametrize("arg", ["cu_seqlens_q", "cu_seqlens_k", "dout"])
def test_varlen_non_array_arguments_are_type_errors(flashkit_ext, arg):
    a = np_varlen_args()
    a[arg] = [0, 4]
    with pytest.raises(TypeError) as ei:
        flashkit_ext.attention_varlen_backward(**a)
    assert_error(ei, arg)


@pytest.mark.parametrize("arg", ["max_seqlen_q", "max_seqlen_k"])
@pytest.mark.parametrize("bad", [3.0, "3", True, None], ids=["float", "str", "bool", "None"])
def test_varlen_max_seqlen_must_be_ints(flashkit_ext, arg, bad):
    a = np_varlen_args()
    a[arg] = bad
    with pytest.raises(TypeError) as ei:
        flashkit_ext.attention_varlen_backward(**a)
    assert_error(ei, arg)


def test_wrong_ranks_name_the_argument(flashkit_ext):
    a = np_bwd_args()
    a["q"] = a["q"][0]
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_backward(**a)
    assert_error(ei, "q", r"dimensions")
    v = np_varlen_args()
    v["q"] = v["q"][None]
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_varlen_backward(**v)
    assert_error(ei, "q", r"dimensions")


@pytest.mark.parametrize("scale", [-1.0, 0.0, float("nan"), float("inf")])
def test_bad_softmax_scale_is_rejected(flashkit_ext, scale):
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_backward(**np_bwd_args(), softmax_scale=scale)
    assert_error(ei, "softmax_scale")
    with pytest.raises(TypeError) as ei:
        flashkit_ext.attention_backward(**np_bwd_args(), softmax_scale="0.5")
    assert_error(ei, "softmax_scale")


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_window_and_softcap_types_are_checked_in_python(flashkit_ext, varlen):
    fn = flashkit_ext.attention_varlen_backward if varlen else flashkit_ext.attention_backward
    args = np_varlen_args() if varlen else np_bwd_args()
    for kw, error, what in ((dict(window=3), TypeError, "window"),
                            (dict(window=(3,)), ValueError, "window"),
                            (dict(window=(3, 0.5)), TypeError, "window"),
                            (dict(softcap="5"), TypeError, "softcap"),
                            (dict(softcap=False), TypeError, "softcap")):
        with pytest.raises(error) as ei:
            fn(**args, **kw)
        assert_error(ei, what)
    # Well-typed values pass on to the C++ validation (which rejects the numpy q).
    with pytest.raises(ValueError) as ei:
        fn(**args, causal=True, window=(4, -1), softcap=30.0)
    assert_error(ei, "q", r"cuda|device")


def test_native_backward_writes_nothing_when_rejected(flashkit_ext):
    a = np_bwd_args()
    dq, dk, dv = (np.full(a[n].shape, np.nan, dtype=a[n].dtype) for n in ("q", "k", "v"))
    ws = np.full((1 << 20,), 0xAB, dtype=np.uint8)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.attention_bwd(a["dout"], a["q"], a["k"], a["v"], a["out"], a["lse"],
                                      dq, dk, dv, workspace=ws)
    assert_error(ei, "q", r"cuda|device")
    assert np.isnan(dq).all() and np.isnan(dk).all() and np.isnan(dv).all()
    assert (ws == 0xAB).all()


@pytest.mark.parametrize("arg", ["dout", "q", "k", "v", "out", "dq", "dk", "dv"])
def test_native_required_arrays_may_not_be_none(flashkit_ext, arg):
    a = dense_fake("float16", 64)
    a[arg] = None
    with pytest.raises(TypeError, match=rf"^{arg}: expected an array, got None$"):
        flashkit_ext._C.attention_bwd(**a)


def test_bwd_kernel_family_arguments(flashkit_ext):
    assert flashkit_ext.bwd_kernel_family("bfloat16", 128) in ("", "sm80")
    assert flashkit_ext.bwd_kernel_family("float16", 80) == ""
    with pytest.raises(ValueError, match="dtype"):
        flashkit_ext._C.bwd_kernel_family("float32", 128)


# ---------------------------------------------------------------------------------------
# The C++ validation through fake CUDA descriptors
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def variant(flashkit_ext):
    compiled = flashkit_ext.compiled_fwd_variants()
    name = "float16/128" if "float16/128" in compiled else compiled[0]
    dt, d = name.split("/")
    return dt, int(d)


def workspace_size(C, a):
    varlen = a.get("cu_seqlens_q") is not None
    q = a["q"]
    if varlen:
        batch, rows, max_q = a["cu_seqlens_q"].shape[0] - 1, q.shape[0], a["max_seqlen_q"]
    else:
        batch, rows, max_q = q.shape[0], q.shape[0] * q.shape[1], q.shape[1]
    return C.attention_bwd_workspace_size(batch, rows, max_q, q.shape[-2], q.shape[-1],
                                          a.get("deterministic", False))


def dense_fake(dt, D, B=2, S_q=128, S_k=256, H_q=8, H_kv=2, deterministic=False, **over):
    a = dict(dout=F((B, S_q, H_q, D), dt), q=F((B, S_q, H_q, D), dt), k=F((B, S_k, H_kv, D), dt),
             v=F((B, S_k, H_kv, D), dt), out=F((B, S_q, H_q, D), dt),
             lse=F((B, H_q, S_q), "float32"), dq=F((B, S_q, H_q, D), dt),
             dk=F((B, S_k, H_kv, D), dt), dv=F((B, S_k, H_kv, D), dt),
             deterministic=deterministic)
    a["workspace"] = F((_size(a),), "uint8")
    a.update(over)
    return a


def varlen_fake(dt, D, H_q=8, H_kv=2, deterministic=False, **over):
    tq, tk = 87, 147
    a = dict(dout=F((tq, H_q, D), dt), q=F((tq, H_q, D), dt), k=F((tk, H_kv, D), dt),
             v=F((tk, H_kv, D), dt), out=F((tq, H_q, D), dt), lse=F((H_q, tq), "float32"),
             dq=F((tq, H_q, D), dt), dk=F((tk, H_kv, D), dt), dv=F((tk, H_kv, D), dt),
             cu_seqlens_q=F((6,), "int32"), cu_seqlens_k=F((6,), "int32"), max_seqlen_q=64,
             max_seqlen_k=130, deterministic=deterministic)
    a["workspace"] = F((_size(a),), "uint8")
    a.update(over)
    return a


def _size(a):
    import flashkit

    return workspace_size(flashkit._C, a) if flashkit._C is not None else 1 << 20


def other_dtype(dt):
    return "bfloat16" if dt == "float16" else "float16"


TENSOR_ARGS = ["dout", "q", "k", "v", "out", "lse", "dq", "dk", "dv", "workspace",
               "cu_seqlens_q", "cu_seqlens_k"]


@pytest.mark.parametrize("arg", TENSOR_ARGS)
def test_every_argument_is_reported_under_its_own_name(flashkit_ext, variant, arg):
    """A wrong dtype on each argument: the binding hands every array to the field it names."""
    a = varlen_fake(*variant)
    bad = "float64" if arg != "q" else "int64"
    a[arg] = F(a[arg].shape, bad, strides=a[arg].strides)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.validate_attention_bwd(**a)
    assert str(ei.value).startswith(f"{arg}: "), str(ei.value)
    assert f"got {bad}" in str(ei.value)


@pytest.mark.parametrize("case", [
    ("lse_missing", lambda a: a.update(lse=None), "lse", r"missing"),
    ("workspace_missing", lambda a: a.update(workspace=None), "workspace", r"missing"),
    ("dq_shape", lambda a: a.update(dq=F((2, 127, 8, a["q"].shape[3]), a["q"].dtype)),
     "dq", r"shape"),
    ("dk_heads", lambda a: a.update(dk=F((2, 256, 4, a["q"].shape[3]), a["q"].dtype)),
     "dk", r"shape"),
    ("dv_length", lambda a: a.update(dv=F((2, 255, 2, a["q"].shape[3]), a["q"].dtype)),
     "dv", r"shape"),
    ("dout_other_dtype",
     lambda a: a.update(dout=F(a["dout"].shape, other_dtype(a["q"].dtype))), "dout",
     r"dtype"),
    ("dout_on_cpu", lambda a: a.update(dout=F(a["dout"].shape, a["q"].dtype, device="cpu")),
     "dout", r"cuda"),
    ("dq_rows_overlap",
     lambda a: a.update(dq=F(a["dq"].shape, a["q"].dtype, strides=(0,) + a["dq"].strides[1:])),
     "dq", r"overlap"),
    ("dout_last_dim_strided",
     lambda a: a.update(dout=F(a["dout"].shape, a["q"].dtype,
                               strides=a["dout"].strides[:3] + (2,))), "dout", r"stride"),
    ("workspace_small",
     lambda a: a.update(workspace=F((a["workspace"].shape[0] - 1,), "uint8")), "workspace",
     r"bytes"),
    ("workspace_small_for_deterministic", lambda a: a.update(deterministic=True), "workspace",
     r"bytes"),
    ("workspace_float32", lambda a: a.update(workspace=F(a["workspace"].shape, "float32")),
     "workspace", r"dtype"),
    ("workspace_2d", lambda a: a.update(workspace=F((1,) + a["workspace"].shape, "uint8")),
     "workspace", None),
    ("workspace_on_cpu",
     lambda a: a.update(workspace=F(a["workspace"].shape, "uint8", device="cpu")), "workspace",
     r"cuda"),
    ("workspace_other_gpu",
     lambda a: a.update(workspace=F(a["workspace"].shape, "uint8", device_id=1)), "workspace",
     r"device"),
    ("h_q_not_multiple", lambda a: a.update(dense_fake(a["q"].dtype, a["q"].shape[3],
                                                       H_q=6, H_kv=4)), "H_q", r"H_kv"),
    ("head_dim_80", lambda a: a.update(dense_fake(a["q"].dtype, 80)), "q", r"head_dim"),
    ("window_left_below_minus_one", lambda a: a.update(window_left=-2), "window_left", None),
    ("window_right_below_minus_one", lambda a: a.update(causal=True, window_right=-7),
     "window_right", None),
    ("softcap_negative", lambda a: a.update(softcap=-0.5), "softcap", None),
    ("softcap_nan", lambda a: a.update(softcap=float("nan")), "softcap", None),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_validation_rejects(flashkit_ext, variant, case):
    _, mutate, arg, what = case
    a = dense_fake(*variant)
    mutate(a)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.validate_attention_bwd(**a)
    assert_error(ei, arg, what)


@pytest.mark.parametrize("build", [
    lambda dt, D: dense_fake(dt, D),
    lambda dt, D: dense_fake(dt, D, deterministic=True, causal=True, softmax_scale=0.3),
    lambda dt, D: dense_fake(dt, D, H_q=16, H_kv=1),
    lambda dt, D: varlen_fake(dt, D),
    lambda dt, D: varlen_fake(dt, D, deterministic=True),
    lambda dt, D: dict(dense_fake(dt, D), workspace=F((1 << 24,), "int32")),
    lambda dt, D: dict(dense_fake(dt, D), dout=F((2, 128, 8, D), dt,  # BHSD storage
                                                 strides=(8 * 128 * D, D, 128 * D, 1))),
    lambda dt, D: dense_fake(dt, D, deterministic=True, causal=True, window_left=64,
                             softcap=30.0),
    lambda dt, D: dense_fake(dt, D, window_left=32, window_right=32),
    lambda dt, D: varlen_fake(dt, D, causal=True, window_left=5, window_right=0, softcap=5.0),
], ids=["dense", "deterministic_causal_scale", "mqa", "varlen", "varlen_deterministic",
        "int32_workspace", "dout_bhsd", "deterministic_window_softcap", "two_sided_window",
        "varlen_window_softcap"])
def test_validation_accepts(flashkit_ext, variant, build):
    assert flashkit_ext._C.validate_attention_bwd(**build(*variant)) is None


def test_workspace_size(flashkit_ext):
    size = flashkit_ext._C.attention_bwd_workspace_size
    for det in (False, True):
        n = size(2, 300, 200, 8, 128, det)
        assert isinstance(n, int) and n >= 300 * 8 * 128 * 4 + 300 * 8 * 4
        assert size(0, 0, 0, 8, 128, det) == 0
    assert size(4, 4096, 1024, 16, 64, True) >= size(4, 4096, 1024, 16, 64, False)
    assert size(batch=1, rows_q=64, max_seqlen_q=64, num_heads_q=2, head_dim=64) == \
        size(1, 64, 64, 2, 64, False)
