"""GPU tests of the dense and varlen attention forward (SPEC §2 conventions, §3 accuracy).

Every case runs on fresh ``torch.randn`` inputs seeded by the case, writes into outputs
poisoned with NaN (through ``flashkit._C.attention_fwd``), and checks:
- every element of out was written, out passes the SPEC §3 rule against a float32
  reference computed on the upcast inputs, with PyTorch's SDPA in the same low dtype as
  the baseline (rows that see no key: out 0);
- lse matches the reference (1e-3 absolute + 1e-3 relative) and is -inf exactly where a
  row sees no key;
- ``flashkit.attention`` (the public API, with and without lse) gives bitwise the same
  out/lse again (determinism).
Also: non-contiguous inputs and outputs, custom softmax_scale, S_k = 0, varlen batches
with empty sequences, sliding windows (causal and two-sided, S_q != S_k both ways, GQA,
varlen) and logit softcap (the baseline: the math SDPA written out in the same dtype with
the cap), and rejection of bad GPU inputs with nothing written. On Hopper these run the
sm90 family where it has a kernel; test_window_and_softcap_portable_family reruns the
window/softcap tests with FLASHKIT_FWD_PORTABLE=1 in a subprocess (the sm80 family).

Run: ``pytest -m gpu tests/python`` (about a minute on an H100).
"""

import functools
import math
import zlib

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit.testing import (
        attention_pytorch,
        attention_reference,
        attention_varlen_pytorch,
        attention_varlen_reference,
        check_close,
        check_lse,
        check_written,
        poison_,
    )
except ImportError as e:  # FLASHKIT_REQUIRE_EXT / _GPU turn this into an error in conftest
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
DIMS = [64, 96, 128, 192, 256]
SPEC_VARIANTS = [f"{dt}/{d}" for dt in ("float16", "bfloat16") for d in DIMS]


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def compiled_variants():
    return frozenset(flashkit.compiled_fwd_variants())


def require_variant(dtype, D):
    name = f"{str(dtype).removeprefix('torch.')}/{D}"
    if name not in compiled_variants():
        pytest.skip(f"{name} is not compiled into this build "
                    f"(test_all_spec_variants_are_compiled reports it)")


def generator(*case):
    """A CUDA generator seeded by the case, so every case has its own fresh inputs."""
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(case).encode()))
    return g


def randn(shape, dtype, gen):
    return torch.randn(shape, dtype=dtype, device="cuda", generator=gen)


def make_qkv(B, S_q, S_k, H_q, H_kv, D, dtype, gen):
    return (randn((B, S_q, H_q, D), dtype, gen), randn((B, S_k, H_kv, D), dtype, gen),
            randn((B, S_k, H_kv, D), dtype, gen))


def stream_handle():
    return torch.cuda.current_stream().cuda_stream


def run_into(q, k, v, *, causal=False, softmax_scale=None, out=None, lse=None,
             cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0,
             window=(-1, -1), softcap=0.0):
    """flashkit._C.attention_fwd into NaN-poisoned out/lse (allocated unless given)."""
    varlen = cu_seqlens_q is not None
    if out is None:
        out = poison_(torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype,
                                  device=q.device))
    if lse is None:
        shape = (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])
        lse = poison_(torch.empty(shape, dtype=torch.float32, device=q.device))
    flashkit._C.attention_fwd(
        q, k, v, out, lse=lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        softmax_scale=0.0 if softmax_scale is None else float(softmax_scale), causal=causal,
        stream=stream_handle(), window_left=window[0], window_right=window[1],
        softcap=softcap)
    return out, lse


def assert_ok(*results, label=""):
    for res in results:
        assert res.ok, f"{label}: {res.message}"


def assert_bitwise_equal(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs " \
                                                      f"{b.shape}/{b.dtype}"
    if not torch.equal(a, b):
        diff = (a.float() - b.float()).abs()
        diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
        raise AssertionError(f"{what}: two runs differ in {int((a != b).sum())} elements "
                             f"(max diff {diff.max().item():.3e}): forward is not deterministic")


def check_dense(q, k, v, *, causal=False, softmax_scale=None, out=None, lse=None, label="",
                window=(-1, -1), softcap=0.0):
    """Poisoned run + reference + SPEC §3 + lse + bitwise-equal public API runs."""
    mods = dict(window=window, softcap=softcap)
    out, lse = run_into(q, k, v, causal=causal, softmax_scale=softmax_scale, out=out, lse=lse,
                        **mods)
    out_ref, lse_ref = attention_reference(q, k, v, causal=causal, softmax_scale=softmax_scale,
                                           **mods)
    out_pt = attention_pytorch(q, k, v, causal=causal, softmax_scale=softmax_scale, **mods)
    assert_ok(check_written(out, out_ref), check_close(out, out_ref, out_pt),
              check_lse(lse, lse_ref), label=label)

    out2, lse2 = flashkit.attention(q, k, v, causal=causal, softmax_scale=softmax_scale,
                                    return_lse=True, **mods)
    assert_bitwise_equal(out2, out, f"{label}: out")
    assert_bitwise_equal(lse2, lse, f"{label}: lse")
    out3 = flashkit.attention(q, k, v, causal=causal, softmax_scale=softmax_scale, **mods)
    assert_bitwise_equal(out3, out, f"{label}: out without lse")
    return out, lse


def case_id(shape):
    return "B{}_Sq{}_Sk{}".format(*shape)


# ---------------------------------------------------------------------------------------
# The build
# ---------------------------------------------------------------------------------------


def test_all_spec_variants_are_compiled():
    missing = sorted(set(SPEC_VARIANTS) - compiled_variants())
    assert not missing, (f"variants of SPEC §1 missing from this build: {missing} "
                         "(FLASHKIT_DTYPES / FLASHKIT_HEAD_DIMS)")


# ---------------------------------------------------------------------------------------
# Dense: dtype x head dim x causal x GQA x shapes
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k): single token, tiny, tile edges, S_q != S_k both ways (with causal: the
# first S_q - S_k rows see no key), decode-like, one full-size square.
SHAPES = [(1, 1, 1), (2, 3, 3), (2, 17, 17), (1, 128, 129), (2, 113, 203), (2, 203, 113),
          (3, 1, 1000), (1, 1000, 1000)]
H_KV = 2


@pytest.mark.parametrize("shape", SHAPES, ids=case_id)
@pytest.mark.parametrize("gqa", [1, 4, 8], ids=lambda r: f"gqa{r}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", DIMS, ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_dense(dtype, D, causal, gqa, shape):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k = shape
    q, k, v = make_qkv(B, S_q, S_k, H_KV * gqa, H_KV, D, dt,
                       generator("dense", dtype, D, causal, gqa, shape))
    check_dense(q, k, v, causal=causal, label=f"{dtype} D{D} causal={causal} gqa{gqa} {shape}")


# Long sequences on a subset (runtime): (1, 4097, 4097) over D 64/128/256 x GQA 1/8, and
# long uneven S_q < S_k / S_q > S_k at D 128, GQA 8. One kv head.
LONG_CASES = (
    [(dt, D, c, g, (1, 4097, 4097)) for dt in DTYPES for D in (64, 128, 256)
     for c in (False, True) for g in (1, 8)]
    + [(dt, 128, c, 8, shape) for dt in DTYPES for c in (False, True)
       for shape in ((1, 257, 4097), (1, 4097, 1023))]
)


@pytest.mark.parametrize("dtype,D,causal,gqa,shape", LONG_CASES, ids=[
    f"{dt}-D{D}-{'causal' if c else 'full'}-gqa{g}-{case_id(s)}" for dt, D, c, g, s in LONG_CASES])
def test_dense_long(dtype, D, causal, gqa, shape):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k = shape
    q, k, v = make_qkv(B, S_q, S_k, gqa, 1, D, dt,
                       generator("dense_long", dtype, D, causal, gqa, shape))
    check_dense(q, k, v, causal=causal, label=f"{dtype} D{D} causal={causal} gqa{gqa} {shape}")


@pytest.mark.parametrize("scale", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_softmax_scale(dtype, D, causal, scale):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v = make_qkv(2, 65, 130, 4, 2, D, dt, generator("scale", dtype, D, causal, scale))
    check_dense(q, k, v, causal=causal, softmax_scale=scale,
                label=f"{dtype} D{D} causal={causal} scale={scale}")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_no_keys(dtype, D, causal):
    """S_k = 0: every row sees no key -> out exactly 0, lse -inf, no NaN."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v = make_qkv(2, 5, 0, 4, 2, D, dt, generator("no_keys", dtype, D, causal))
    out, lse = run_into(q, k, v, causal=causal)
    assert torch.equal(out, torch.zeros_like(out)), "out must be 0 for rows without keys"
    assert torch.isneginf(lse).all(), "lse must be -inf for rows without keys"
    out2, lse2 = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    assert torch.equal(out2, out) and torch.equal(lse2, lse)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_no_queries(dtype):
    dt = DTYPES[dtype]
    require_variant(dt, 128)
    q, k, v = make_qkv(2, 0, 7, 4, 2, 128, dt, generator("no_queries", dtype))
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    assert out.shape == (2, 0, 4, 128) and lse.shape == (2, 4, 0)


# ---------------------------------------------------------------------------------------
# Strides: non-contiguous inputs and outputs
# ---------------------------------------------------------------------------------------


def strided_qkv(layout, B, S_q, S_k, H_q, H_kv, D, dt, gen):
    """q/k/v with the last dim contiguous and other strides not those of a dense tensor."""
    if layout == "heads_slice":  # every other head of a tensor with twice the heads
        return (randn((B, S_q, 2 * H_q, D), dt, gen)[:, :, 1::2],
                randn((B, S_k, 2 * H_kv, D), dt, gen)[:, :, ::2],
                randn((B, S_k, 2 * H_kv, D), dt, gen)[:, :, 1::2])
    if layout == "d_padded":  # storage [..., D + 8], view [..., :D]
        return (randn((B, S_q, H_q, D + 8), dt, gen)[..., :D],
                randn((B, S_k, H_kv, D + 8), dt, gen)[..., :D],
                randn((B, S_k, H_kv, D + 24), dt, gen)[..., 8:D + 8])
    if layout == "bhsd":  # storage [B, H, S, D] viewed as BSHD
        return (randn((B, H_q, S_q, D), dt, gen).transpose(1, 2),
                randn((B, H_kv, S_k, D), dt, gen).transpose(1, 2),
                randn((B, H_kv, S_k, D), dt, gen).transpose(1, 2))
    if layout == "qkv_packed":  # one [B, S, H_q + 2 H_kv, D] projection, sliced (S_q = S_k)
        qkv = randn((B, S_q, H_q + 2 * H_kv, D), dt, gen)
        return qkv[:, :, :H_q], qkv[:, :, H_q:H_q + H_kv], qkv[:, :, H_q + H_kv:]
    raise ValueError(layout)


@pytest.mark.parametrize("layout", ["heads_slice", "d_padded", "bhsd", "qkv_packed"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_strided_inputs(dtype, D, causal, layout):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    S_q, S_k = (77, 77) if layout == "qkv_packed" else (77, 133)
    q, k, v = strided_qkv(layout, 2, S_q, S_k, 8, 2, D, dt,
                          generator("strided", dtype, D, causal, layout))
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    check_dense(q, k, v, causal=causal, label=f"{dtype} D{D} causal={causal} {layout}")


@pytest.mark.parametrize("out_layout", ["d_padded", "bhsd"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_writes_stay_inside_out_and_lse(dtype, D, causal, out_layout):
    """A strided out inside a larger buffer and lse followed by guard elements: the
    padding and guards keep their sentinel, the views are fully written and correct."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = 2, 70, 45, 4, 2
    q, k, v = make_qkv(B, S_q, S_k, H_q, H_kv, D, dt,
                       generator("out_strides", dtype, D, causal, out_layout))
    sentinel = 7.0
    if out_layout == "d_padded":
        storage = torch.full((B, S_q, H_q, D + 16), sentinel, dtype=dt, device="cuda")
        out = storage[..., :D]
        guard = lambda: storage[..., D:]  # noqa: E731
    else:
        storage = torch.full((B, H_q + 1, S_q, D), sentinel, dtype=dt, device="cuda")
        out = storage[:, :H_q].transpose(1, 2)
        guard = lambda: storage[:, H_q:]  # noqa: E731
    n_lse = B * H_q * S_q
    lse_storage = torch.full((n_lse + 256,), sentinel, dtype=torch.float32, device="cuda")
    lse = lse_storage[:n_lse].view(B, H_q, S_q)
    poison_(out)
    poison_(lse)
    check_dense(q, k, v, causal=causal, out=out, lse=lse,
                label=f"{dtype} D{D} causal={causal} out {out_layout}")
    assert (guard() == sentinel).all(), "the kernel wrote outside out"
    assert (lse_storage[n_lse:] == sentinel).all(), "the kernel wrote past the end of lse"


# ---------------------------------------------------------------------------------------
# Varlen
# ---------------------------------------------------------------------------------------

# Per sequence: ordinary, q empty, k empty, single token, equal, S_q < S_k, S_q > S_k (with
# causal: rows without keys), both empty, long.
LENS_Q = [5, 0, 17, 1, 64, 3, 130, 0, 1000]
LENS_K = [7, 9, 0, 1, 64, 130, 3, 0, 1000]


def cu_seqlens(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device="cuda")


def check_varlen(q, k, v, lens_q, lens_k, causal, label, window=(-1, -1), softcap=0.0):
    mods = dict(window=window, softcap=softcap)
    cu_q, cu_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    mq, mk = max(lens_q), max(lens_k)
    out, lse = run_into(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                        max_seqlen_q=mq, max_seqlen_k=mk, **mods)
    out_ref, lse_ref = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=causal, **mods)
    out_pt = attention_varlen_pytorch(q, k, v, cu_q, cu_k, causal=causal, **mods)
    assert_ok(check_written(out, out_ref), check_close(out, out_ref, out_pt),
              check_lse(lse, lse_ref), label=label)

    out2, lse2 = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=causal,
                                           return_lse=True, **mods)
    assert_bitwise_equal(out2, out, f"{label}: out")
    assert_bitwise_equal(lse2, lse, f"{label}: lse")
    # max_seqlen_* are upper bounds: looser ones give the same result
    out3, lse3 = run_into(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                          max_seqlen_q=mq + 100, max_seqlen_k=mk + 300, **mods)
    assert_bitwise_equal(out3, out, f"{label}: out with looser max_seqlen")
    assert_bitwise_equal(lse3, lse, f"{label}: lse with looser max_seqlen")


@pytest.mark.parametrize("gqa", [1, 4], ids=lambda r: f"gqa{r}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", DIMS, ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen(dtype, D, causal, gqa):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("varlen", dtype, D, causal, gqa)
    q = randn((sum(LENS_Q), H_KV * gqa, D), dt, gen)
    k = randn((sum(LENS_K), H_KV, D), dt, gen)
    v = randn((sum(LENS_K), H_KV, D), dt, gen)
    check_varlen(q, k, v, LENS_Q, LENS_K, causal, f"varlen {dtype} D{D} causal={causal} "
                                                   f"gqa{gqa}")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_qkv_packed(dtype, D, causal):
    """Self-attention on one packed [total, H_q + 2 H_kv, D] projection (strided views)."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    lens = [33, 0, 1, 200, 64]
    H_q, H_kv = 8, 2
    qkv = randn((sum(lens), H_q + 2 * H_kv, D), dt, generator("varlen_qkv", dtype, D, causal))
    q, k, v = qkv[:, :H_q], qkv[:, H_q:H_q + H_kv], qkv[:, H_q + H_kv:]
    check_varlen(q, k, v, lens, lens, causal, f"varlen qkv-packed {dtype} D{D} causal={causal}")


# ---------------------------------------------------------------------------------------
# Rejection of bad inputs: ValueError naming the argument, outputs untouched
# ---------------------------------------------------------------------------------------


def _bad_dense(kind, dt, D):
    gen = generator("bad", kind, str(dt), D)
    B, S_q, S_k, H_q, H_kv = 2, 16, 24, 4, 2
    q, k, v = make_qkv(B, S_q, S_k, H_q, H_kv, D, dt, gen)
    if kind == "q_float32":
        return dict(q=q.float(), k=k.float(), v=v.float()), "q", r"dtype|float32"
    if kind == "k_other_dtype":
        other = torch.bfloat16 if dt == torch.float16 else torch.float16
        return dict(q=q, k=k.to(other), v=v), "k", r"dtype"
    if kind == "h_q_not_multiple_of_h_kv":
        q6, k4, v4 = make_qkv(B, S_q, S_k, 6, 4, D, dt, gen)
        return dict(q=q6, k=k4, v=v4), "H_q", r"H_kv"
    if kind == "head_dim_80":
        q80, k80, v80 = make_qkv(B, S_q, S_k, H_q, H_kv, 80, dt, gen)
        return dict(q=q80, k=k80, v=v80), "q", r"head_dim|\bD\b"
    if kind == "q_last_dim_strided":
        return dict(q=randn((B, S_q, H_q, 2 * D), dt, gen)[..., ::2], k=k, v=v), "q", \
            r"contiguous|stride"
    if kind == "k_stride_misaligned":  # rows of D + 1 elements: not 16-byte aligned
        return dict(q=q, k=randn((B, S_k, H_kv, D + 1), dt, gen)[..., :D], v=v), "k", \
            r"stride|align"
    if kind == "v_pointer_misaligned":  # data pointer 2 bytes past an aligned address
        flat = randn((v.numel() + 1,), dt, gen)
        return dict(q=q, k=k, v=flat[1:].view(v.shape)), "v", r"align"
    if kind == "k_on_cpu":
        return dict(q=q, k=k.cpu(), v=v), "k", r"cuda|device"
    if kind == "batch_mismatch":
        return dict(q=q, k=k[:1], v=v[:1]), "k", r"batch|\bB\b"
    if kind == "kv_length_mismatch":
        return dict(q=q, k=k, v=v[:, :-1]), "v", r"S_k|length|\d"
    raise ValueError(kind)


BAD_DENSE = ["q_float32", "k_other_dtype", "h_q_not_multiple_of_h_kv", "head_dim_80",
             "q_last_dim_strided", "k_stride_misaligned", "v_pointer_misaligned", "k_on_cpu",
             "batch_mismatch", "kv_length_mismatch"]


def _sentinel_outputs(q, v, lse_shape):
    out_dtype = q.dtype if q.dtype in (torch.float16, torch.bfloat16, torch.float32) \
        else torch.float16
    out = torch.full(q.shape[:-1] + (v.shape[-1],), 7.0, dtype=out_dtype, device="cuda")
    lse = torch.full(lse_shape, 7.0, dtype=torch.float32, device="cuda")
    return out, lse


def _assert_untouched(out, lse):
    torch.cuda.synchronize()
    assert (out == 7.0).all() and (lse == 7.0).all(), "a rejected call wrote its outputs"


def _assert_names(excinfo, arg, what):
    import re

    msg = str(excinfo.value)
    assert re.search(r"(?<![\w])" + re.escape(arg) + r"(?![\w])", msg), \
        f"message does not name {arg!r}: {msg!r}"
    assert re.search(what, msg, re.IGNORECASE), f"message lacks /{what}/: {msg!r}"


@pytest.mark.parametrize("kind", BAD_DENSE)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_rejects_bad_dense_inputs(dtype, kind):
    dt = DTYPES[dtype]
    require_variant(dt, 64)
    args, arg, what = _bad_dense(kind, dt, 64)
    with pytest.raises(ValueError) as ei:
        flashkit.attention(**args, causal=True, return_lse=True)
    _assert_names(ei, arg, what)

    q, v = args["q"], args["v"]
    out, lse = _sentinel_outputs(q, v, (q.shape[0], q.shape[2], q.shape[1]))
    with pytest.raises(ValueError) as ei:
        flashkit._C.attention_fwd(args["q"], args["k"], v, out, lse=lse, causal=True,
                                  stream=stream_handle())
    _assert_names(ei, arg, what)
    _assert_untouched(out, lse)


@pytest.mark.parametrize("kind", ["out_shape", "out_dtype", "lse_shape", "lse_dtype",
                                  "out_pointer_misaligned"])
def test_rejects_bad_outputs(kind):
    require_variant(torch.float16, 64)
    q, k, v = make_qkv(2, 16, 24, 4, 2, 64, torch.float16, generator("bad_out", kind))
    out, lse = _sentinel_outputs(q, v, (2, 4, 16))
    arg = "out" if kind.startswith("out") else "lse"
    if kind == "out_shape":
        out = out[:, :15]
    elif kind == "out_dtype":
        out = out.to(torch.bfloat16)
    elif kind == "lse_shape":
        lse = lse[:, :, :15]
    elif kind == "lse_dtype":
        lse = lse.to(torch.float16)
    elif kind == "out_pointer_misaligned":
        flat = torch.full((out.numel() + 1,), 7.0, dtype=out.dtype, device="cuda")
        out = flat[1:].view(out.shape)
    with pytest.raises(ValueError) as ei:
        flashkit._C.attention_fwd(q, k, v, out, lse=lse, stream=stream_handle())
    _assert_names(ei, arg, r".")
    _assert_untouched(out, lse)


@pytest.mark.parametrize("kind", ["cu_seqlens_int64", "cu_seqlens_lengths_differ",
                                  "max_seqlen_q_zero", "q_4d"])
def test_rejects_bad_varlen_inputs(kind):
    require_variant(torch.float16, 64)
    gen = generator("bad_varlen", kind)
    lens_q, lens_k = [3, 0, 5], [4, 2, 0]
    q = randn((8, 4, 64), torch.float16, gen)
    k = randn((6, 2, 64), torch.float16, gen)
    v = randn((6, 2, 64), torch.float16, gen)
    cu_q, cu_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    mq, mk = 5, 4
    if kind == "cu_seqlens_int64":
        cu_q, arg = cu_q.long(), "cu_seqlens_q"
    elif kind == "cu_seqlens_lengths_differ":
        cu_k, arg = cu_k[:-1], "cu_seqlens_k"
    elif kind == "max_seqlen_q_zero":
        mq, arg = 0, "max_seqlen_q"
    elif kind == "q_4d":
        q, arg = q[None], "q"
    with pytest.raises(ValueError) as ei:
        flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    _assert_names(ei, arg, r".")
    if kind == "q_4d":
        return  # the low-level call needs a 3-d out; covered by the CPU validation tests
    out, lse = _sentinel_outputs(q, v, (q.shape[1], q.shape[0]))
    with pytest.raises(ValueError) as ei:
        flashkit._C.attention_fwd(q, k, v, out, lse=lse, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                  max_seqlen_q=mq, max_seqlen_k=mk, stream=stream_handle())
    _assert_names(ei, arg, r".")
    _assert_untouched(out, lse)


def test_valid_call_after_rejections():
    """Rejected calls leave no sticky CUDA error behind."""
    require_variant(torch.float16, 64)
    with pytest.raises(ValueError):
        flashkit.attention(*_bad_dense("k_stride_misaligned", torch.float16, 64)[0].values())
    q, k, v = make_qkv(1, 9, 9, 2, 2, 64, torch.float16, generator("after_rejections"))
    check_dense(q, k, v, causal=True, label="after rejections")
    torch.cuda.synchronize()


def test_requires_grad_inputs_forward():
    """Tensors that require grad can be passed (forward only) and give the same result."""
    require_variant(torch.float16, 64)
    q, k, v = make_qkv(1, 20, 30, 4, 2, 64, torch.float16, generator("requires_grad"))
    expected = flashkit.attention(q, k, v, causal=True)
    got = flashkit.attention(q.clone().requires_grad_(), k.clone().requires_grad_(),
                             v.clone().requires_grad_(), causal=True)
    assert torch.equal(got.detach(), expected)
    assert math.isfinite(got.detach().float().abs().sum().item())


# ---------------------------------------------------------------------------------------
# Sliding window and softcap
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k, H_q, H_kv): single token, tiny GQA, MQA 333, several tiles both ways,
# S_q < S_k and S_q > S_k (GQA 4; under a right bound the first rows see no key).
WINDOW_SHAPES = [(1, 1, 1, 2, 2), (2, 3, 3, 8, 2), (1, 333, 333, 4, 1), (1, 1000, 1000, 2, 2),
                 (2, 203, 1000, 8, 2), (2, 1000, 203, 4, 1)]
CAUSAL_LEFTS = [0, 1, 63, 64, 200]       # the diagonal only, tile edges (64), wider than a tile
TWO_SIDED = [(32, 32), (0, 0), (100, -1), (-1, 17)]


def window_id(w):
    return "w{}_{}".format(*w).replace("-1", "inf")


def wcase_id(shape):
    return "B{}_Sq{}_Sk{}_H{}-{}".format(*shape)


@pytest.mark.parametrize("shape", [WINDOW_SHAPES[i] for i in (2, 4, 5)], ids=wcase_id)
@pytest.mark.parametrize("left", CAUSAL_LEFTS, ids=lambda w: f"left{w}")
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_causal_window(dtype, D, left, shape):
    """causal=True with window=(left, -1): row i sees keys i + d - left .. i + d."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = shape
    q, k, v = make_qkv(B, S_q, S_k, H_q, H_kv, D, dt,
                       generator("causal_window", dtype, D, left, shape))
    check_dense(q, k, v, causal=True, window=(left, -1),
                label=f"{dtype} D{D} causal window ({left}, -1) {shape}")
    # window_right is clipped to 0 under causal: any right bound gives the same result
    out = flashkit.attention(q, k, v, causal=True, window=(left, 0))
    out_right = flashkit.attention(q, k, v, causal=True, window=(left, 5))
    ref = flashkit.attention(q, k, v, causal=True, window=(left, -1))
    assert_bitwise_equal(out, ref, "causal window (left, 0)")
    assert_bitwise_equal(out_right, ref, "causal window (left, 5): right clipped to 0")


# Non-causal windows: every shape at D 128, two shapes at D 64.
TWO_SIDED_CASES = (
    [(128, w, s) for w in TWO_SIDED for s in WINDOW_SHAPES]
    + [(64, w, s) for w in TWO_SIDED for s in (WINDOW_SHAPES[2], WINDOW_SHAPES[5])]
)


@pytest.mark.parametrize("D,window,shape", TWO_SIDED_CASES, ids=[
    f"D{D}-{window_id(w)}-{wcase_id(s)}" for D, w, s in TWO_SIDED_CASES])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_window(dtype, D, window, shape):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = shape
    q, k, v = make_qkv(B, S_q, S_k, H_q, H_kv, D, dt,
                       generator("window", dtype, D, window, shape))
    check_dense(q, k, v, window=window, label=f"{dtype} D{D} window {window} {shape}")


def any_variant():
    """(dtype, D) of a compiled variant, D 128 or 64 preferred."""
    for d in (128, 64, 96, 192, 256):
        for dt in DTYPES.values():
            if f"{str(dt).removeprefix('torch.')}/{d}" in compiled_variants():
                return dt, d
    pytest.skip("no variant is compiled into this build")


def test_window_wider_than_the_sequence_is_no_window():
    dt, D = any_variant()
    q, k, v = make_qkv(2, 300, 333, 8, 2, D, dt, generator("wide_window"))
    for causal in (False, True):
        plain = flashkit.attention(q, k, v, causal=causal, return_lse=True)
        wide = flashkit.attention(q, k, v, causal=causal, window=(333, 333), return_lse=True)
        huge = flashkit.attention(q, k, v, causal=causal, window=(10**9, 10**9),
                                  return_lse=True)
        for name, a, b, c in zip(("out", "lse"), plain, wide, huge):
            assert_bitwise_equal(b, a, f"causal={causal} window (333, 333) {name}")
            assert_bitwise_equal(c, a, f"causal={causal} window (1e9, 1e9) {name}")


# Softcap: scores made larger (q x 3: scaled scores of std ~3) so a cap of 5 bends most of
# them and a cap of 30 the tails. (causal, window, shape) per cap.
SOFTCAP_MASKS = [(False, (-1, -1), (2, 333, 333, 8, 2)), (True, (-1, -1), (2, 203, 1000, 8, 2)),
                 (True, (64, -1), (1, 1000, 1000, 4, 1)), (False, (32, 32), (2, 1000, 203, 4, 2))]
SOFTCAP_QMUL = 3.0


@pytest.mark.parametrize("causal,window,shape", SOFTCAP_MASKS, ids=[
    f"{'causal' if c else 'full'}-{window_id(w)}-{wcase_id(s)}" for c, w, s in SOFTCAP_MASKS])
@pytest.mark.parametrize("softcap", [30.0, 5.0], ids=lambda c: f"softcap{c:g}")
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_softcap(dtype, D, softcap, causal, window, shape):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = shape
    q, k, v = make_qkv(B, S_q, S_k, H_q, H_kv, D, dt,
                       generator("softcap", dtype, D, softcap, causal, window, shape))
    q = q * SOFTCAP_QMUL
    check_dense(q, k, v, causal=causal, window=window, softcap=softcap,
                label=f"{dtype} D{D} softcap {softcap} causal={causal} window {window} {shape}")


@pytest.mark.parametrize("D", [96, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_window_softcap_other_head_dims(dtype, D):
    """One case per remaining head dim: a causal window with a softcap, GQA, S_q < S_k,
    and a two-sided window with S_q > S_k."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v = make_qkv(2, 203, 333, 8, 2, D, dt, generator("other_dims", dtype, D))
    check_dense(q * SOFTCAP_QMUL, k, v, causal=True, window=(63, -1), softcap=5.0,
                label=f"{dtype} D{D} causal window (63, -1) softcap 5")
    q, k, v = make_qkv(1, 333, 203, 4, 1, D, dt, generator("other_dims_2", dtype, D))
    check_dense(q, k, v, window=(17, 40), label=f"{dtype} D{D} window (17, 40)")


@pytest.mark.parametrize("causal,window,softcap", [
    (True, (64, -1), 0.0), (False, (32, 32), 0.0), (True, (1, -1), 30.0), (False, (-1, 0), 5.0),
    (False, (-1, -1), 5.0)], ids=["causal_w64", "w32_32", "causal_w1_cap30", "right0_cap5",
                                   "cap5"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_window_softcap(dtype, D, causal, window, softcap):
    """Per sequence, bottom-right aligned: ordinary, empty q, empty k, single token,
    S_q < S_k, S_q > S_k, both empty, long (LENS_Q / LENS_K)."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("varlen_window", dtype, D, causal, window, softcap)
    q = randn((sum(LENS_Q), 8, D), dt, gen) * (SOFTCAP_QMUL if softcap else 1.0)
    k = randn((sum(LENS_K), 2, D), dt, gen)
    v = randn((sum(LENS_K), 2, D), dt, gen)
    check_varlen(q, k, v, LENS_Q, LENS_K, causal,
                 f"varlen {dtype} D{D} causal={causal} window {window} softcap {softcap}",
                 window=window, softcap=softcap)


def test_window_rows_without_keys_are_zero():
    """window (0, 0) with S_q > S_k: rows 0 .. S_q - S_k - 1 see no key: out exactly 0,
    lse -inf (and the torch path agrees)."""
    dt, D = any_variant()
    q, k, v = make_qkv(2, 300, 100, 4, 2, D, dt, generator("window_empty_rows"))
    out, lse = run_into(q, k, v, window=(0, 0))
    torch.cuda.synchronize()
    assert torch.equal(out[:, :200], torch.zeros_like(out[:, :200]))
    assert torch.isneginf(lse[:, :, :200]).all()
    assert torch.isfinite(lse[:, :, 200:]).all()
    # each remaining row sees exactly one key (j = i - 200): out is that key's v
    torch.testing.assert_close(out[:, 200:].float(), v.repeat_interleave(2, dim=2).float(),
                               rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kw, arg", [
    (dict(window=(-2, 0)), "window_left"), (dict(window=(0, -3)), "window_right"),
    (dict(softcap=-1.0), "softcap"), (dict(softcap=float("nan")), "softcap"),
    (dict(softcap=float("inf")), "softcap")])
def test_rejects_bad_window_and_softcap(kw, arg):
    require_variant(torch.float16, 64)
    q, k, v = make_qkv(2, 16, 24, 4, 2, 64, torch.float16, generator("bad_mods", arg))
    with pytest.raises(ValueError) as ei:
        flashkit.attention(q, k, v, causal=True, return_lse=True, **kw)
    _assert_names(ei, arg, r".")
    out, lse = _sentinel_outputs(q, v, (2, 4, 16))
    window = kw.get("window", (-1, -1))
    with pytest.raises(ValueError) as ei:
        flashkit._C.attention_fwd(q, k, v, out, lse=lse, stream=stream_handle(),
                                  window_left=window[0], window_right=window[1],
                                  softcap=kw.get("softcap", 0.0))
    _assert_names(ei, arg, r".")
    _assert_untouched(out, lse)
