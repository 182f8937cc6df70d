"""Argument checks of flashkit's Python API and of the C++ validation, without a GPU.

- numpy arrays go through ``flashkit.attention`` / ``attention_varlen`` into the same C++
  validation as CUDA tensors; they live on the CPU, so they are rejected (ValueError
  naming q and the device).
- Every other rule of SPEC §2 (dtype, rank, shapes, H_q % H_kv, head dim, strides,
  alignment, 32-bit sizes, varlen arguments) is exercised through
  ``flashkit._C.validate_attention_fwd`` with ``FakeCudaArray``: DLPack descriptors that
  claim a CUDA device and own no memory (validation reads descriptors only).

Needs the native extension: skipped without it, unless FLASHKIT_REQUIRE_EXT=1.
"""

import math
import re

import numpy as np
import pytest

try:
    from flashkit.testing import fake_dlpack
except ImportError as e:  # the flashkit package itself is broken (FLASHKIT_REQUIRE_EXT: error)
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

F = fake_dlpack.FakeCudaArray

SPEC_VARIANTS = [f"{dt}/{d}" for dt in ("float16", "bfloat16") for d in (64, 96, 128, 192, 256)]


def names(arg):
    """Regex: ``arg`` as a whole token of the message (e.g. q, not the q of 'seq')."""
    return re.compile(r"(?<![\w])" + re.escape(arg) + r"(?![\w])")


def assert_error(excinfo, arg, what=None):
    msg = str(excinfo.value)
    assert names(arg).search(msg), f"message does not name {arg!r}: {msg!r}"
    if what is not None:
        assert re.search(what, msg, re.IGNORECASE), f"message lacks /{what}/: {msg!r}"


# ---------------------------------------------------------------------------------------
# The public API with numpy arrays
# ---------------------------------------------------------------------------------------


def np_qkv(dtype=np.float16, B=1, S_q=4, S_k=6, H_q=4, H_kv=2, D=64):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, S_q, H_q, D)).astype(dtype)
    k = rng.standard_normal((B, S_k, H_kv, D)).astype(dtype)
    v = rng.standard_normal((B, S_k, H_kv, D)).astype(dtype)
    return q, k, v


def test_compiled_fwd_variants(flashkit_ext):
    variants = flashkit_ext.compiled_fwd_variants()
    assert isinstance(variants, list) and variants, variants
    assert all(isinstance(v, str) for v in variants)
    assert all(re.fullmatch(r"(float16|bfloat16)/(64|96|128|192|256)", v) for v in variants), \
        variants
    assert len(set(variants)) == len(variants)


def test_version(flashkit_ext):
    assert isinstance(flashkit_ext.__version__, str)
    assert re.match(r"\d+\.\d+", flashkit_ext.__version__)


@pytest.mark.parametrize("return_lse", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_numpy_arrays_are_rejected_as_not_cuda(flashkit_ext, causal, return_lse):
    q, k, v = np_qkv()
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention(q, k, v, causal=causal, return_lse=return_lse)
    assert_error(ei, "q", r"cuda|device")


def test_numpy_float32_is_rejected(flashkit_ext):
    q, k, v = np_qkv(np.float32)
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention(q, k, v)
    assert_error(ei, "q", r"cuda|device|dtype|float32")


def test_numpy_varlen_is_rejected(flashkit_ext):
    q, k, v = (x[0] for x in np_qkv())
    cu_q = np.array([0, 1, 4], dtype=np.int32)
    cu_k = np.array([0, 3, 6], dtype=np.int32)
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention_varlen(q, k, v, cu_q, cu_k, 3, 3, causal=True)
    assert_error(ei, "q", r"cuda|device")


def test_numpy_wrong_rank_names_the_argument(flashkit_ext):
    q, k, v = np_qkv()
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention(q[0], k, v)
    assert_error(ei, "q")


@pytest.mark.parametrize("bad", [None, [[1.0, 2.0]], "q", 3, object()],
                         ids=["None", "list", "str", "int", "object"])
def test_non_array_q_is_a_type_error(flashkit_ext, bad):
    _, k, v = np_qkv()
    with pytest.raises(TypeError):
        flashkit_ext.attention(bad, k, v)


@pytest.mark.parametrize("which", ["k", "v"])
def test_non_array_k_or_v_is_a_type_error(flashkit_ext, which):
    q, k, v = np_qkv()
    args = {"q": q, "k": k, "v": v, which: [[0.0]]}
    with pytest.raises(TypeError):
        flashkit_ext.attention(**args)


def test_non_array_varlen_arguments_are_type_errors(flashkit_ext):
    q, k, v = (x[0] for x in np_qkv())
    cu = np.array([0, 4], dtype=np.int32)
    with pytest.raises(TypeError):
        flashkit_ext.attention_varlen(q, k, v, [0, 4], cu, 4, 6)
    with pytest.raises(TypeError):
        flashkit_ext.attention_varlen(None, k, v, cu, cu, 4, 6)


@pytest.mark.parametrize("scale", [-1.0, float("nan"), float("inf")])
def test_bad_softmax_scale_is_rejected(flashkit_ext, scale):
    q, k, v = np_qkv()
    with pytest.raises(ValueError) as ei:
        flashkit_ext.attention(q, k, v, softmax_scale=scale)
    assert_error(ei, "softmax_scale")


@pytest.mark.parametrize("fn", ["attention", "attention_varlen"])
@pytest.mark.parametrize("kw, error, what", [
    (dict(window=4), TypeError, r"window.*tuple"),
    (dict(window="4,0"), TypeError, r"window"),
    (dict(window=(4,)), ValueError, r"window.*two"),
    (dict(window=(4, 0, 1)), ValueError, r"window.*two"),
    (dict(window=(4.0, 0)), TypeError, r"window.*left.*int"),
    (dict(window=(4, True)), TypeError, r"window.*right.*int"),
    (dict(window=(None, 0)), TypeError, r"window.*left"),
    (dict(softcap="30"), TypeError, r"softcap"),
    (dict(softcap=True), TypeError, r"softcap"),
    (dict(softcap=[30.0]), TypeError, r"softcap"),
], ids=["int", "str", "one", "three", "float_left", "bool_right", "none_left", "cap_str",
        "cap_bool", "cap_list"])
def test_window_and_softcap_types_are_checked_in_python(flashkit_ext, fn, kw, error, what):
    q, k, v = np_qkv()
    if fn == "attention_varlen":
        cu = np.array([0, 4], dtype=np.int32)
        args = (q[0], k[0], v[0], cu, cu, 4, 6)
    else:
        args = (q, k, v)
    with pytest.raises(error, match=what):
        getattr(flashkit_ext, fn)(*args, **kw)


def test_window_and_softcap_accepted_forms_reach_the_native_validation(flashkit_ext):
    """Tuples, lists, numpy ints, None; ints for softcap: all pass the Python checks and
    reach the C++ validation (which rejects the numpy q as not on a CUDA device)."""
    q, k, v = np_qkv()
    for kw in (dict(window=(4, 0)), dict(window=[-1, 3]), dict(window=(np.int64(2), -1)),
               dict(window=None), dict(softcap=30), dict(softcap=5.0), dict(softcap=None),
               dict(window=(-2, 0)), dict(softcap=-1.0)):  # values: the C++ side's job
        with pytest.raises(ValueError) as ei:
            flashkit_ext.attention(q, k, v, causal=True, **kw)
        assert_error(ei, "q", r"cuda|device")


def test_native_call_writes_nothing_when_rejected(flashkit_ext):
    q, k, v = np_qkv()
    out = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full((q.shape[0], q.shape[2], q.shape[1]), np.nan, dtype=np.float32)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.attention_fwd(q, k, v, out, lse)
    assert_error(ei, "q", r"cuda|device")
    assert np.isnan(out).all() and np.isnan(lse).all()


# ---------------------------------------------------------------------------------------
# The C++ validation through fake CUDA descriptors
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def variant(flashkit_ext):
    """(dtype, D) of a compiled variant: float16/128 when built, else the first one."""
    compiled = flashkit_ext.compiled_fwd_variants()
    name = "float16/128" if "float16/128" in compiled else compiled[0]
    dt, d = name.split("/")
    return dt, int(d)


def other_dtype(dt):
    return "bfloat16" if dt == "float16" else "float16"


def dense(dt, D, B=2, S_q=128, S_k=256, H_q=8, H_kv=2, **over):
    args = dict(q=F((B, S_q, H_q, D), dt), k=F((B, S_k, H_kv, D), dt),
                v=F((B, S_k, H_kv, D), dt), out=F((B, S_q, H_q, D), dt),
                lse=F((B, H_q, S_q), "float32"))
    args.update(over)
    return args


VARLEN_LENS_Q = [5, 0, 17, 1, 64]
VARLEN_LENS_K = [7, 9, 0, 1, 130]


def varlen(dt, D, H_q=8, H_kv=2, **over):
    tq, tk, b = sum(VARLEN_LENS_Q), sum(VARLEN_LENS_K), len(VARLEN_LENS_Q)
    args = dict(q=F((tq, H_q, D), dt), k=F((tk, H_kv, D), dt), v=F((tk, H_kv, D), dt),
                out=F((tq, H_q, D), dt), lse=F((H_q, tq), "float32"),
                cu_seqlens_q=F((b + 1,), "int32"), cu_seqlens_k=F((b + 1,), "int32"),
                max_seqlen_q=max(VARLEN_LENS_Q), max_seqlen_k=max(VARLEN_LENS_K))
    args.update(over)
    return args


def padded(shape, dt, pad, dim=-1):
    """Strides of a view [..., :n] of storage padded by ``pad`` elements along ``dim``."""
    full = list(shape)
    full[dim] += pad
    strides = []
    acc = 1
    for n in reversed(full):
        strides.append(acc)
        acc *= n
    return F(shape, dt, strides=tuple(reversed(strides)))


# Each case: (id, builder(dt, D) -> kwargs, argument the message must name, /what/).
INVALID = [
    ("q_on_cpu", lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), dt, device="cpu")),
     "q", r"cuda|device"),
    ("k_on_other_gpu", lambda dt, D: dense(dt, D, k=F((2, 256, 2, D), dt, device_id=1)),
     "k", r"device"),
    ("out_on_cpu", lambda dt, D: dense(dt, D, out=F((2, 128, 8, D), dt, device="cpu")),
     "out", r"cuda|device"),
    ("q_float32", lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), "float32")),
     "q", r"dtype|float32"),
    ("k_other_dtype", lambda dt, D: dense(dt, D, k=F((2, 256, 2, D), other_dtype(dt))),
     "k", r"dtype"),
    ("v_other_dtype", lambda dt, D: dense(dt, D, v=F((2, 256, 2, D), other_dtype(dt))),
     "v", r"dtype"),
    ("out_other_dtype", lambda dt, D: dense(dt, D, out=F((2, 128, 8, D), other_dtype(dt))),
     "out", r"dtype"),
    ("lse_float16", lambda dt, D: dense(dt, D, lse=F((2, 8, 128), "float16")),
     "lse", r"dtype|float32"),
    ("q_3d_without_cu_seqlens", lambda dt, D: dense(dt, D, q=F((256, 8, D), dt)),
     "q", r"dim"),
    ("k_batch_differs", lambda dt, D: dense(dt, D, k=F((3, 256, 2, D), dt)),
     "k", r"batch|\bB\b"),
    ("v_length_differs", lambda dt, D: dense(dt, D, v=F((2, 255, 2, D), dt)),
     "v", r"S_k|255"),
    ("v_heads_differ", lambda dt, D: dense(dt, D, v=F((2, 256, 1, D), dt)),
     "v", r"H_kv|head"),
    ("h_q_not_multiple_of_h_kv",
     lambda dt, D: dense(dt, D, H_q=6, H_kv=4), "H_q", r"H_kv"),
    ("head_dim_80", lambda dt, D: dense(dt, 80), "q", r"head_dim|\bD\b"),
    ("head_dim_32", lambda dt, D: dense(dt, 32), "q", r"head_dim|\bD\b"),
    ("k_head_dim_differs",
     lambda dt, D: dense(dt, D, k=F((2, 256, 2, 2 * D if D <= 128 else D // 2), dt)),
     "k", r"head_dim|\bD\b"),
    ("out_length_differs", lambda dt, D: dense(dt, D, out=F((2, 127, 8, D), dt)),
     "out", r"shape"),
    ("out_heads_differ", lambda dt, D: dense(dt, D, out=F((2, 128, 2, D), dt)),
     "out", r"shape"),
    ("lse_shape", lambda dt, D: dense(dt, D, lse=F((2, 128, 8), "float32")),
     "lse", r"shape"),
    ("q_last_dim_strided",
     lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), dt, strides=(128 * 8 * D * 2, 8 * D * 2,
                                                                 D * 2, 2))),
     "q", r"contiguous|stride"),
    ("k_rows_misaligned", lambda dt, D: dense(dt, D, k=padded((2, 256, 2, D), dt, 1)),
     "k", r"stride|align"),
    ("v_rows_misaligned", lambda dt, D: dense(dt, D, v=padded((2, 256, 2, D), dt, 3)),
     "v", r"stride|align"),
    ("q_pointer_misaligned", lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), dt, offset_bytes=2)),
     "q", r"align"),
    ("out_pointer_misaligned",
     lambda dt, D: dense(dt, D, out=F((2, 128, 8, D), dt, offset_bytes=8)), "out", r"align"),
    ("q_negative_stride",
     lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), dt, strides=(128 * 8 * D, -8 * D, D, 1))),
     "q", r"stride|negative"),
    ("out_rows_overlap",
     lambda dt, D: dense(dt, D, out=F((2, 128, 8, D), dt, strides=(8 * D, 0, D, 1))),
     "out", r"stride|overlap"),
    ("lse_not_contiguous",
     lambda dt, D: dense(dt, D, lse=F((2, 8, 128), "float32", strides=(8 * 256, 256, 1))),
     "lse", r"contiguous|stride"),
    ("seqlen_beyond_int32",
     lambda dt, D: dense(dt, D, S_q=2**31, lse=None), "q", r"2\^31|32-bit|int32|overflow"),
    ("softmax_scale_inf", lambda dt, D: dense(dt, D, softmax_scale=math.inf),
     "softmax_scale", None),
    ("window_left_below_minus_one", lambda dt, D: dense(dt, D, causal=True, window_left=-2),
     "window_left", r"-1|>= 0"),
    ("window_right_below_minus_one", lambda dt, D: dense(dt, D, window_right=-5),
     "window_right", r"-1|>= 0"),
    ("softcap_negative", lambda dt, D: dense(dt, D, softcap=-1.0), "softcap", None),
    ("softcap_nan", lambda dt, D: dense(dt, D, softcap=math.nan), "softcap", None),
    ("softcap_inf", lambda dt, D: dense(dt, D, softcap=math.inf), "softcap", None),
    ("softcap_beyond_float32", lambda dt, D: dense(dt, D, softcap=1e300), "softcap", None),
    ("softcap_rounds_to_zero", lambda dt, D: dense(dt, D, softcap=1e-50), "softcap", r"float32"),
    ("softcap_too_small", lambda dt, D: dense(dt, D, softcap=1e-40), "softcap", r"too small"),
    ("varlen_window_left_below_minus_one",
     lambda dt, D: varlen(dt, D, window_left=-3, softcap=5.0), "window_left", None),
    # varlen
    ("cu_seqlens_k_missing", lambda dt, D: varlen(dt, D, cu_seqlens_k=None),
     "cu_seqlens_k", None),
    ("cu_seqlens_q_missing", lambda dt, D: varlen(dt, D, cu_seqlens_q=None),
     "cu_seqlens_q", None),
    ("cu_seqlens_int64",
     lambda dt, D: varlen(dt, D, cu_seqlens_q=F((len(VARLEN_LENS_Q) + 1,), "int64")),
     "cu_seqlens_q", r"dtype|int32"),
    ("cu_seqlens_lengths_differ",
     lambda dt, D: varlen(dt, D, cu_seqlens_k=F((len(VARLEN_LENS_Q),), "int32")),
     "cu_seqlens_k", None),
    ("cu_seqlens_2d", lambda dt, D: varlen(dt, D, cu_seqlens_q=F((1, 6), "int32")),
     "cu_seqlens_q", r"dim"),
    ("cu_seqlens_on_cpu",
     lambda dt, D: varlen(dt, D, cu_seqlens_q=F((6,), "int32", device="cpu")),
     "cu_seqlens_q", r"cuda|device"),
    ("cu_seqlens_strided",
     lambda dt, D: varlen(dt, D, cu_seqlens_k=F((6,), "int32", strides=(2,))),
     "cu_seqlens_k", r"contiguous|stride"),
    ("max_seqlen_q_zero", lambda dt, D: varlen(dt, D, max_seqlen_q=0), "max_seqlen_q", None),
    ("max_seqlen_k_negative", lambda dt, D: varlen(dt, D, max_seqlen_k=-1),
     "max_seqlen_k", None),
    ("varlen_q_4d", lambda dt, D: varlen(dt, D, q=F((1, 87, 8, D), dt)), "q", r"dim"),
    ("varlen_lse_3d", lambda dt, D: varlen(dt, D, lse=F((1, 8, 87), "float32")), "lse",
     r"dim"),
    ("varlen_out_rows_differ", lambda dt, D: varlen(dt, D, out=F((86, 8, D), dt)), "out",
     r"shape"),
]

VALID = [
    ("dense", lambda dt, D: dense(dt, D)),
    ("causal_scale", lambda dt, D: dense(dt, D, causal=True, softmax_scale=0.5)),
    ("no_lse", lambda dt, D: dense(dt, D, lse=None)),
    ("mha", lambda dt, D: dense(dt, D, H_q=4, H_kv=4)),
    ("mqa", lambda dt, D: dense(dt, D, H_q=16, H_kv=1)),
    ("single_token", lambda dt, D: dense(dt, D, B=3, S_q=1, S_k=1)),
    ("s_q_longer_than_s_k", lambda dt, D: dense(dt, D, S_q=300, S_k=7, causal=True)),
    ("empty_keys", lambda dt, D: dense(dt, D, S_k=0)),
    ("heads_slice",  # q = storage[:, :, ::2] of [B, S, 16, D]
     lambda dt, D: dense(dt, D, q=F((2, 128, 8, D), dt, strides=(128 * 16 * D, 16 * D,
                                                                 2 * D, 1)))),
    ("head_dim_padded",  # k = storage[..., :D] of [B, S, H, D + 8]
     lambda dt, D: dense(dt, D, k=padded((2, 256, 2, D), dt, 8))),
    ("bhsd_storage",  # v = storage[B, H, S, D].transpose(1, 2)
     lambda dt, D: dense(dt, D, v=F((2, 256, 2, D), dt, strides=(2 * 256 * D, D, 256 * D, 1)))),
    ("size_one_dims_any_stride",  # DLPack exporters may put anything in size-1 strides
     lambda dt, D: dense(dt, D, B=1, S_q=1, q=F((1, 1, 8, D), dt, strides=(3, 5, D, 1)),
                         out=F((1, 1, 8, D), dt, strides=(0, 7, D, 1)))),
    ("causal_window", lambda dt, D: dense(dt, D, causal=True, window_left=64)),
    ("causal_window_right_clipped",
     lambda dt, D: dense(dt, D, causal=True, window_left=0, window_right=17)),
    ("two_sided_window", lambda dt, D: dense(dt, D, window_left=32, window_right=32)),
    ("right_bound_only", lambda dt, D: dense(dt, D, window_right=0)),
    ("window_wider_than_sequences",
     lambda dt, D: dense(dt, D, window_left=10**12, window_right=10**12)),
    ("softcap", lambda dt, D: dense(dt, D, softcap=30.0)),
    ("window_softcap_s_q_longer", lambda dt, D: dense(dt, D, S_q=300, S_k=7, causal=True,
                                                      window_left=3, softcap=5.0)),
    ("varlen", lambda dt, D: varlen(dt, D)),
    ("varlen_window_softcap",
     lambda dt, D: varlen(dt, D, causal=True, window_left=3, window_right=0, softcap=5.0)),
    ("varlen_causal_no_lse", lambda dt, D: varlen(dt, D, causal=True, lse=None)),
    ("varlen_kv_packed",  # k, v = kv[:, 0], kv[:, 1] of [total_k, 2, H_kv, D]
     lambda dt, D: varlen(dt, D, k=F((147, 2, D), dt, strides=(4 * D, D, 1)),
                          v=F((147, 2, D), dt, strides=(4 * D, D, 1)))),
    ("varlen_empty_batch_totals",
     lambda dt, D: varlen(dt, D, q=F((0, 8, D), dt), out=F((0, 8, D), dt),
                          lse=F((8, 0), "float32"), k=F((0, 2, D), dt), v=F((0, 2, D), dt),
                          max_seqlen_q=0, max_seqlen_k=0)),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_validation_rejects(flashkit_ext, variant, case):
    _, build, arg, what = case
    args = build(*variant)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.validate_attention_fwd(**args)
    assert_error(ei, arg, what)


@pytest.mark.parametrize("case", VALID, ids=[c[0] for c in VALID])
def test_validation_accepts(flashkit_ext, variant, case):
    _, build = case
    assert flashkit_ext._C.validate_attention_fwd(**build(*variant)) is None


@pytest.mark.parametrize("name", SPEC_VARIANTS)
def test_each_spec_variant_is_compiled_or_reported_as_not_compiled(flashkit_ext, name):
    dt, D = name.split("/")
    args = dense(dt, int(D))
    if name in flashkit_ext.compiled_fwd_variants():
        assert flashkit_ext._C.validate_attention_fwd(**args) is None
    else:
        with pytest.raises(NotImplementedError, match=r"not compiled"):
            flashkit_ext._C.validate_attention_fwd(**args)


def test_fake_arrays_describe_what_they_claim():
    a = F((2, 3, 4, 64), "bfloat16", strides=(1000, 300, 70, 1), device_id=3, offset_bytes=16)
    assert a.__dlpack_device__() == (fake_dlpack.KDL_CUDA, 3)
    assert a.data % 256 == 16
    assert F((2, 3), device="cpu").__dlpack_device__() == (fake_dlpack.KDL_CPU, 0)
    assert F((2, 3, 4)).strides == (12, 4, 1)


# ---------------------------------------------------------------------------------------
# dtype names: every tensor argument's message names the dtype actually given
# ---------------------------------------------------------------------------------------

TENSOR_ARGS = ["q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k"]
EXPECTED_DTYPE = {"q": "float16 or bfloat16", "k": "{dt} (same as q)", "v": "{dt} (same as q)",
                  "out": "{dt} (same as q)", "lse": "float32", "cu_seqlens_q": "int32",
                  "cu_seqlens_k": "int32"}


def _with_dtype(a, dtype):
    return F(a.shape, dtype, strides=a.strides)


@pytest.mark.parametrize("dtype", ["int64", "float32", "uint8", "bool"])
@pytest.mark.parametrize("arg", TENSOR_ARGS)
def test_dtype_message_names_the_given_dtype(flashkit_ext, variant, arg, dtype):
    dt, D = variant
    if arg == "lse" and dtype == "float32":
        pytest.skip("float32 is lse's dtype")
    args = varlen(dt, D)
    args[arg] = _with_dtype(args[arg], dtype)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.validate_attention_fwd(**args)
    expected = EXPECTED_DTYPE[arg].format(dt=dt)
    assert str(ei.value) == f"{arg}: expected dtype {expected}, got {dtype}"


@pytest.mark.parametrize("dtype", [d for d in fake_dlpack.DTYPES
                                   if d not in ("float16", "bfloat16", "complex64")])
@pytest.mark.parametrize("arg", ["q", "cu_seqlens_k"])
def test_every_named_dtype_is_reported(flashkit_ext, variant, arg, dtype):
    dt, D = variant
    args = varlen(dt, D)
    if arg == "cu_seqlens_k" and dtype == "int32":
        pytest.skip("int32 is cu_seqlens_k's dtype")
    args[arg] = _with_dtype(args[arg], dtype)
    with pytest.raises(ValueError, match=rf"^{arg}: expected dtype .*, got {dtype}$"):
        flashkit_ext._C.validate_attention_fwd(**args)


@pytest.mark.parametrize("raw, name", [
    ((5, 64, 1), "complex64"),
    ((5, 128, 1), "complex128"),
    ((11, 8, 1), "float8_e4m3fnuz"),
    ((17, 4, 1), "float4_e2m1fn"),
    ((2, 8, 1), "float8"),  # kDLFloat with 8 bits: not a type FlashKit knows
    ((2, 16, 4), "float16 x 4 lanes"),
    ((3, 64, 1), "DLPack dtype code 3, 64 bits"),
], ids=lambda x: str(x))
@pytest.mark.parametrize("arg", ["q", "lse", "cu_seqlens_q"])
def test_unknown_dtypes_are_unsupported(flashkit_ext, variant, arg, raw, name):
    dt, D = variant
    args = varlen(dt, D)
    args[arg] = F(args[arg].shape, raw)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C.validate_attention_fwd(**args)
    assert str(ei.value) == f"{arg}: unsupported dtype {name}"


@pytest.mark.parametrize("np_dtype, name", [
    (np.float16, "float16"), (np.float32, "float32"), (np.float64, "float64"),
    (np.int8, "int8"), (np.int16, "int16"), (np.int32, "int32"), (np.int64, "int64"),
    (np.uint8, "uint8"), (np.uint16, "uint16"), (np.uint32, "uint32"), (np.uint64, "uint64"),
    (np.bool_, "bool"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_numpy_dtypes_map_to_their_names(flashkit_ext, np_dtype, name):
    assert flashkit_ext._C._dtype_of(np.zeros((2, 3), dtype=np_dtype)) == name


def test_numpy_complex_is_unsupported(flashkit_ext):
    with pytest.raises(ValueError, match=r"^x: unsupported dtype complex64$"):
        flashkit_ext._C._dtype_of(np.zeros(3, dtype=np.complex64))



TORCH_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_dtypes_map_to_their_names(flashkit_ext, name):
    """The torch fast path of the binding (no DLPack) names every torch dtype it knows;
    CPU tensors are enough, nothing is launched."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, name):
        pytest.skip(f"torch {torch.__version__} has no torch.{name}")
    x = torch.empty((2, 3), dtype=getattr(torch, name))
    assert flashkit_ext._C._dtype_of(x) == name


def test_torch_complex_is_unsupported(flashkit_ext):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"^x: unsupported dtype complex64$"):
        flashkit_ext._C._dtype_of(torch.zeros(3, dtype=torch.complex64))


# ---------------------------------------------------------------------------------------
# Check mode (arguments only: the checks themselves run on the GPU)
# ---------------------------------------------------------------------------------------


def test_numpy_varlen_accepts_check_inputs(flashkit_ext):
    q, k, v = (x[0] for x in np_qkv())
    cu_q = np.array([0, 1, 4], dtype=np.int32)
    cu_k = np.array([0, 3, 6], dtype=np.int32)
    with pytest.raises(ValueError) as ei:  # CPU arrays: the device check comes first
        flashkit_ext.attention_varlen(q, k, v, cu_q, cu_k, 3, 3, check_inputs=True)
    assert_error(ei, "q", r"cuda|device")


@pytest.mark.parametrize("case, arg, what", [
    (dict(block_table=F((4, 8), "int64")), "block_table", r"^block_table: expected dtype int32, "
                                                          r"got int64$"),
    (dict(seqlens_k=F((4,), "bool")), "seqlens_k", r"^seqlens_k: expected dtype int32, got bool$"),
    (dict(seqlens_k=F((3,), "int32")), "seqlens_k", r"expected length B = 4"),
    (dict(block_table=F((32,), "int32")), "block_table", r"expected 2 dims"),
    (dict(seqlens_k=F((4,), "int32", device="cpu")), "seqlens_k", r"CUDA tensor"),
    (dict(page_size=0), "page_size", r"expected >= 1, got 0"),
    (dict(num_pages=-1), "num_pages", r"expected >= 0, got -1"),
    (dict(block_table=F((4, 8), "complex64")), "block_table", r"unsupported dtype complex64"),
], ids=["table_int64", "lengths_bool", "lengths_short", "table_1d", "lengths_cpu", "page_size_0",
        "num_pages_negative", "table_complex"])
def test_block_table_check_arguments(flashkit_ext, case, arg, what):
    args = dict(block_table=F((4, 8), "int32"), seqlens_k=F((4,), "int32"), num_pages=100,
                page_size=16)
    args.update(case)
    with pytest.raises(ValueError) as ei:
        flashkit_ext._C._check_block_table(**args)
    assert_error(ei, arg, what)
