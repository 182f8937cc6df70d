"""GPU tests of the attention backward (dq, dk, dv) and its torch integration.

Accuracy (SPEC §3): on fresh ``torch.randn`` inputs (never zeros) seeded by the case, the
gradients FlashKit's autograd gives for a random ``dout`` are compared with the analytic
float64 gradients of the reference (``attention_backward_reference``); the baseline is
PyTorch's own autograd through its math SDPA in the same fp16/bf16 dtype
(``attention_backward_pytorch``). Pass iff FlashKit's max-abs and relative-L2 errors on dq,
dk and dv are at most 2x PyTorch's plus one epsilon of the dtype (``check_close``).

Also: every element of NaN-poisoned dq/dk/dv written by ``flashkit._C.attention_bwd`` (with
a garbage workspace), writes staying inside strided gradient views, S_q != S_k both ways
under the bottom-right causal mask, rows and keys that see nothing, GQA/MQA, varlen with
empty sequences, non-contiguous q/k/v/dout, custom softmax_scale, deterministic mode
(bitwise equal over runs; dk/dv bitwise equal in the fast mode too), the public
``flashkit.attention_backward``, ``torch.compile(fullgraph=True)`` of a training step,
CUDA-graph capture of forward + backward, and 20 SGD steps of a tiny transformer block
against the same block on float32 SDPA. Sliding windows (causal + left bound, two-sided,
one-sided; S_q != S_k both ways; GQA; varlen with empty sequences) and logit softcap (the
baseline: autograd through the math SDPA written out in the same dtype with the cap), with
keys that no row sees getting exactly zero gradients and the deterministic mode bitwise
reproducible under a window.

Run: ``pytest -m gpu tests/python/test_backward_gpu.py`` (well under a minute on an H100).
"""

import functools
import math

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit.testing import (
        case_generator as generator,
        cuda_randn as randn,
        current_stream_handle as stream_handle,
        attention_backward_pytorch,
        attention_backward_reference,
        attention_varlen_backward_pytorch,
        attention_varlen_backward_reference,
        check_close,
        check_written,
        poison_,
    )
except ImportError as e:  # FLASHKIT_REQUIRE_EXT / _GPU turn this into an error in conftest
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
DIMS = [64, 96, 128, 192, 256]


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def compiled_variants():
    return frozenset(flashkit.compiled_fwd_variants())


def require_variant(dtype, D):
    name = f"{str(dtype).removeprefix('torch.')}/{D}"
    if name not in compiled_variants():
        pytest.skip(f"{name} is not compiled into this build")


def any_variant(preferred=("bfloat16/128", "float16/128", "bfloat16/64", "float16/64")):
    name = next((n for n in preferred if n in compiled_variants()),
                min(compiled_variants()) if compiled_variants() else None)
    if name is None:
        pytest.skip("no variant is compiled into this build")
    dt, d = name.split("/")
    return getattr(torch, dt), int(d)


def make_inputs(B, S_q, S_k, H_q, H_kv, D, dtype, gen):
    """q, k, v and the incoming gradient dout."""
    return (randn((B, S_q, H_q, D), dtype, gen), randn((B, S_k, H_kv, D), dtype, gen),
            randn((B, S_k, H_kv, D), dtype, gen), randn((B, S_q, H_q, D), dtype, gen))


def autograd_grads(q, k, v, dout, causal=False, softmax_scale=None, deterministic=False,
                   window=(-1, -1), softcap=0.0):
    """(out, (dq, dk, dv)) through flashkit.attention and torch autograd. q/k/v keep their
    strides (detach() is a view)."""
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    out = flashkit.attention(*leaves, causal=causal, softmax_scale=softmax_scale,
                             deterministic=deterministic, window=window, softcap=softcap)
    assert out.requires_grad, "flashkit.attention's output does not require grad"
    return out.detach(), torch.autograd.grad(out, leaves, dout)


def check_grads(grads, ref, pt, label):
    for name, g, r, p in zip(("dq", "dk", "dv"), grads, ref, pt):
        assert g.shape == r.shape and g.dtype == p.dtype, \
            f"{label}: {name} {tuple(g.shape)} {g.dtype}, expected {tuple(r.shape)} {p.dtype}"
        res = check_close(g, r, p, name=name)
        assert res.ok, f"{label}: {res.message}"


def check_dense_grads(grads, q, k, v, dout, causal, softmax_scale, label, window=(-1, -1),
                      softcap=0.0):
    mods = dict(window=window, softcap=softcap)
    ref = attention_backward_reference(q, k, v, dout, causal=causal, softmax_scale=softmax_scale,
                                       compute_dtype=torch.float64, **mods)
    pt = attention_backward_pytorch(q, k, v, dout, causal=causal, softmax_scale=softmax_scale,
                                    **mods)
    check_grads(grads, ref, pt, label)
    return ref


def assert_bitwise_equal(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs " \
                                                      f"{b.shape}/{b.dtype}"
    if not torch.equal(a, b):
        diff = (a.float() - b.float()).abs().nan_to_num(0.0)
        raise AssertionError(f"{what}: differs in {int((a != b).sum())} elements (max diff "
                             f"{diff.max().item():.3e})")


def workspace_for(q, deterministic, varlen=None):
    """A workspace of the size attention_bwd needs, filled with garbage (0xFF bytes: NaN as
    fp32, -1 as int32): its contents on entry must not matter."""
    if varlen is None:
        B, S_q, H_q, D = q.shape
        size = flashkit._C.attention_bwd_workspace_size(B, B * S_q, S_q, H_q, D, deterministic)
    else:
        batch, max_seqlen_q = varlen
        size = flashkit._C.attention_bwd_workspace_size(batch, q.shape[0], max_seqlen_q,
                                                        q.shape[1], q.shape[2], deterministic)
    return torch.full((size,), 0xFF, dtype=torch.uint8, device="cuda")


def cu_seqlens(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device="cuda")


def case_id(shape):
    return "B{}_Sq{}_Sk{}_H{}-{}".format(*shape)


def test_backward_variants_and_family():
    """The backward exists for every compiled forward variant (which family runs it is
    test_backward_families_gpu.py's check)."""
    for name in compiled_variants():
        dt, d = name.split("/")
        assert flashkit.bwd_kernel_family(getattr(torch, dt), int(d)) in ("sm80", "sm90"), name
    assert flashkit.bwd_kernel_family(torch.float16, 80) == ""


# ---------------------------------------------------------------------------------------
# Accuracy: dtype x head dim x causal x shapes (S 1/3/333/1000, S_q != S_k both ways,
# GQA 4 and 8, MQA)
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k, H_q, H_kv)
SHAPES = [
    (2, 1, 1, 2, 2),        # single token, MHA
    (2, 3, 3, 8, 2),        # tiny, GQA 4
    (1, 333, 333, 4, 1),    # MQA
    (1, 1000, 1000, 2, 2),  # several tiles both ways
    (2, 77, 203, 8, 1),     # S_q < S_k (causal: every row sees keys), GQA 8 / MQA
    (2, 203, 77, 8, 2),     # S_q > S_k (causal: the first 126 rows see no key), GQA 4
]


@pytest.mark.parametrize("shape", SHAPES, ids=case_id)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", DIMS, ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_dense_grads(dtype, D, causal, shape):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = shape
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt,
                                generator("dense", dtype, D, causal, shape))
    _, grads = autograd_grads(q, k, v, dout, causal=causal)
    check_dense_grads(grads, q, k, v, dout, causal, None,
                      f"{dtype} D{D} causal={causal} {case_id(shape)}")


@pytest.mark.parametrize("scale", [0.05, 0.3], ids=lambda s: f"scale{s}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_softmax_scale(dtype, D, causal, scale):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v, dout = make_inputs(2, 65, 130, 4, 2, D, dt, generator("scale", dtype, D, causal,
                                                                  scale))
    _, grads = autograd_grads(q, k, v, dout, causal=causal, softmax_scale=scale)
    check_dense_grads(grads, q, k, v, dout, causal, scale,
                      f"{dtype} D{D} causal={causal} scale={scale}")


# ---------------------------------------------------------------------------------------
# Varlen: empty sequences, q and k lengths that differ
# ---------------------------------------------------------------------------------------

# Per sequence: ordinary, q empty (its keys get no gradient), k empty (its rows get none),
# single token, equal, S_q < S_k, S_q > S_k, both empty, long.
LENS_Q = [5, 0, 17, 1, 64, 3, 130, 0, 333]
LENS_K = [7, 9, 0, 1, 64, 130, 3, 0, 300]


def varlen_inputs(dtype, D, H_q, H_kv, gen, lens_q=LENS_Q, lens_k=LENS_K):
    tq, tk = sum(lens_q), sum(lens_k)
    return (randn((tq, H_q, D), dtype, gen), randn((tk, H_kv, D), dtype, gen),
            randn((tk, H_kv, D), dtype, gen), randn((tq, H_q, D), dtype, gen),
            cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", DIMS, ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_grads(dtype, D, causal):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 8, 2,
                                                      generator("varlen", dtype, D, causal))
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    out = flashkit.attention_varlen(*leaves, cu_q, cu_k, mq, mk, causal=causal)
    grads = torch.autograd.grad(out, leaves, dout)
    ref = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k, causal=causal,
                                              compute_dtype=torch.float64)
    pt = attention_varlen_backward_pytorch(q, k, v, dout, cu_q, cu_k, causal=causal)
    check_grads(grads, ref, pt, f"varlen {dtype} D{D} causal={causal}")
    # The keys of the sequence whose q is empty (rows 7..16) get exactly zero.
    assert not grads[1][7:16].any() and not grads[2][7:16].any()


# ---------------------------------------------------------------------------------------
# Every element written: NaN-poisoned dq/dk/dv, garbage workspace, the low-level call
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k, H_q, H_kv, causal): rows without keys, keys without rows, S_k = 0, S_q = 0.
POISON_CASES = [(2, 203, 77, 4, 2, True), (1, 77, 203, 8, 1, True), (2, 130, 130, 4, 4, False),
                (2, 9, 0, 4, 2, False), (2, 0, 9, 4, 2, True)]


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
@pytest.mark.parametrize("case", POISON_CASES, ids=lambda c: case_id(c[:5]) + ("_causal" if c[5]
                                                                                else ""))
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_poisoned_outputs_are_written(dtype, D, case, deterministic):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv, causal = case
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt,
                                generator("poison", dtype, D, case))
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = (poison_(torch.empty_like(t)) for t in (q, k, v))
    flashkit._C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, causal=causal,
                              deterministic=deterministic,
                              workspace=workspace_for(q, deterministic), stream=stream_handle())
    torch.cuda.synchronize()
    ref = attention_backward_reference(q, k, v, dout, causal=causal, compute_dtype=torch.float64)
    pt = attention_backward_pytorch(q, k, v, dout, causal=causal)
    label = f"{dtype} D{D} {case} deterministic={deterministic}"
    for name, g, r in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        res = check_written(g, r, name=name)
        assert res.ok, f"{label}: {res.message}"
        assert torch.isfinite(g).all(), f"{label}: {name} has non-finite values"
    check_grads((dq, dk, dv), ref, pt, label)


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_poisoned_varlen_outputs_are_written(dtype, deterministic):
    dt, D = DTYPES[dtype], 128
    require_variant(dt, D)
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 4, 1,
                                                      generator("poison_varlen", dtype))
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True,
                                         return_lse=True)
    dq, dk, dv = (poison_(torch.empty_like(t)) for t in (q, k, v))
    ws = workspace_for(q, deterministic, varlen=(len(LENS_Q), mq))
    flashkit._C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q=cu_q,
                              cu_seqlens_k=cu_k, max_seqlen_q=mq, max_seqlen_k=mk, causal=True,
                              deterministic=deterministic, workspace=ws, stream=stream_handle())
    ref = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k, causal=True,
                                              compute_dtype=torch.float64)
    pt = attention_varlen_backward_pytorch(q, k, v, dout, cu_q, cu_k, causal=True)
    for name, g, r in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        res = check_written(g, r, name=name)
        assert res.ok, f"varlen {dtype}: {res.message}"
    check_grads((dq, dk, dv), ref, pt, f"varlen poisoned {dtype} deterministic={deterministic}")
    # The public function gives the same (deterministic mode: bitwise).
    if deterministic:
        got = flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq, mk,
                                                 causal=True, deterministic=True)
        for name, a, b in zip(("dq", "dk", "dv"), got, (dq, dk, dv)):
            assert_bitwise_equal(a, b, f"attention_varlen_backward {name}")


@pytest.mark.parametrize("D", [64, 96, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_writes_stay_inside_strided_gradients(dtype, D):
    """dq, dk, dv as strided views of larger buffers (head dim padded, every other head, a
    BHSD buffer): the views are fully written and correct, the rest keeps its sentinel."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = 2, 70, 45, 4, 2
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt, generator("strided_out", dtype, D))
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    sentinel = 7.0
    dq_store = torch.full((B, S_q, H_q, D + 16), sentinel, dtype=dt, device="cuda")
    dk_store = torch.full((B, S_k, 2 * H_kv, D), sentinel, dtype=dt, device="cuda")
    dv_store = torch.full((B, H_kv + 1, S_k, D), sentinel, dtype=dt, device="cuda")
    dq, dk, dv = dq_store[..., :D], dk_store[:, :, 1::2], dv_store[:, :H_kv].transpose(1, 2)
    for t in (dq, dk, dv):
        poison_(t)
    flashkit._C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, causal=True,
                              workspace=workspace_for(q, False), stream=stream_handle())
    torch.cuda.synchronize()
    ref = check_dense_grads((dq, dk, dv), q, k, v, dout, True, None, f"{dtype} D{D} strided")
    for name, g, r in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        assert check_written(g, r, name=name).ok
    assert (dq_store[..., D:] == sentinel).all(), "wrote outside dq"
    assert (dk_store[:, :, 0::2] == sentinel).all(), "wrote outside dk"
    assert (dv_store[:, H_kv:] == sentinel).all(), "wrote outside dv"


# ---------------------------------------------------------------------------------------
# Non-contiguous q/k/v and dout
# ---------------------------------------------------------------------------------------


def strided_qkv(layout, B, S_q, S_k, H_q, H_kv, D, dt, gen):
    """q/k/v with the last dim contiguous and other strides not those of a dense tensor."""
    if layout == "heads_slice":
        return (randn((B, S_q, 2 * H_q, D), dt, gen)[:, :, 1::2],
                randn((B, S_k, 2 * H_kv, D), dt, gen)[:, :, ::2],
                randn((B, S_k, 2 * H_kv, D), dt, gen)[:, :, 1::2])
    if layout == "d_padded":
        return (randn((B, S_q, H_q, D + 8), dt, gen)[..., :D],
                randn((B, S_k, H_kv, D + 8), dt, gen)[..., :D],
                randn((B, S_k, H_kv, D + 24), dt, gen)[..., 8:D + 8])
    if layout == "bhsd":
        return (randn((B, H_q, S_q, D), dt, gen).transpose(1, 2),
                randn((B, H_kv, S_k, D), dt, gen).transpose(1, 2),
                randn((B, H_kv, S_k, D), dt, gen).transpose(1, 2))
    if layout == "qkv_packed":  # S_q == S_k
        qkv = randn((B, S_q, H_q + 2 * H_kv, D), dt, gen)
        return qkv[:, :, :H_q], qkv[:, :, H_q:H_q + H_kv], qkv[:, :, H_q + H_kv:]
    raise ValueError(layout)


@pytest.mark.parametrize("layout", ["heads_slice", "d_padded", "bhsd", "qkv_packed"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_strided_inputs(dtype, D, causal, layout):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("strided", dtype, D, causal, layout)
    S_q, S_k = (77, 77) if layout == "qkv_packed" else (77, 133)
    q, k, v = strided_qkv(layout, 2, S_q, S_k, 8, 2, D, dt, gen)
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    dout = randn((2, 8, S_q, D), dt, gen).transpose(1, 2)  # BHSD storage: passed as it is
    _, grads = autograd_grads(q, k, v, dout, causal=causal)
    check_dense_grads(grads, q, k, v, dout, causal, None,
                      f"{dtype} D{D} causal={causal} {layout}")


@pytest.mark.parametrize("kind", ["last_dim_strided", "misaligned", "expanded", "row_stride_odd"])
def test_any_dout_layout(kind):
    """Whatever layout autograd hands the backward (a strided or misaligned view, an
    expanded scalar), the gradients are those of a contiguous copy."""
    dt, D = any_variant()
    gen = generator("dout_layout", kind)
    B, S, H = 2, 50, 4
    q, k, v, dout = make_inputs(B, S, S, H, 2, D, dt, gen)
    if kind == "last_dim_strided":
        g = randn((B, S, H, 2 * D), dt, gen)[..., ::2]
    elif kind == "misaligned":  # data pointer 2 bytes past an aligned address
        g = randn((dout.numel() + 1,), dt, gen)[1:].view(dout.shape)
    elif kind == "expanded":  # the gradient of out.sum(): one value broadcast everywhere
        g = torch.full((), 0.75, dtype=dt, device="cuda").expand(dout.shape)
    else:  # rows of D + 1 elements: not 16-byte aligned
        g = randn((B, S, H, D + 1), dt, gen)[..., :D]
    _, grads = autograd_grads(q, k, v, g, causal=True, deterministic=True)
    _, expected = autograd_grads(q, k, v, g.contiguous(), causal=True, deterministic=True)
    for name, a, b in zip(("dq", "dk", "dv"), grads, expected):
        assert_bitwise_equal(a, b, f"dout {kind}: {name}")
    got = flashkit.attention_backward(g, q, k, v, *flashkit.attention(q, k, v, causal=True,
                                                                       return_lse=True),
                                      causal=True, deterministic=True)
    for name, a, b in zip(("dq", "dk", "dv"), got, expected):
        assert_bitwise_equal(a, b, f"attention_backward with dout {kind}: {name}")


# ---------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["dense_causal_gqa", "dense_full_mqa", "varlen", "varlen_full"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_deterministic_mode_is_bitwise_reproducible(dtype, D, case):
    """deterministic=True: dq, dk, dv bitwise equal over 3 runs. The fast mode: dk and dv
    bitwise equal too (only dq's fp32 adds race), dq within the accuracy rule. On Hopper the
    deterministic mode's default is the fixed-point dQ (integer adds, any order); the ordered
    turns and their rotated walk (FLASHKIT_BWD_DET_TURNS=1) are covered by the backward
    families file."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("determinism", dtype, D, case)
    if case.startswith("varlen"):
        lens = [1000, 3, 700]
        causal = case == "varlen"
        q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 8, 2, gen, lens, lens)
        out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=causal,
                                             return_lse=True)

        def run(det):
            return flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq,
                                                      mk, causal=causal, deterministic=det)
    else:
        causal = case == "dense_causal_gqa"
        H_kv = 2 if causal else 1
        q, k, v, dout = make_inputs(2, 1000, 1000, 8, H_kv, D, dt, gen)
        out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)

        def run(det):
            return flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal,
                                               deterministic=det)
    flashkit.device_errors()  # clear
    first = run(True)
    for i in range(2):
        again = run(True)
        for name, a, b in zip(("dq", "dk", "dv"), again, first):
            assert_bitwise_equal(a, b, f"deterministic run {i + 2} {name}")
    # No turn wait gave up (DET_ORDER): these grids are small enough to be resident.
    bits = flashkit.device_errors()
    assert bits == 0, flashkit.describe_device_errors(bits)
    fast = [run(False) for _ in range(3)]
    for i in (1, 2):
        for name, j in (("dk", 1), ("dv", 2)):
            assert_bitwise_equal(fast[i][j], fast[0][j], f"fast mode run {i + 1} {name}")
    # dq of the two modes agree up to the order of fp32 additions.
    torch.testing.assert_close(fast[0][0].float(), first[0].float(), atol=2e-2, rtol=2e-2)


def _row_rel_err(g, ref):
    """Per (batch, row, head): max |g - ref| over D, over max |ref| (rows with ref == 0 left out)."""
    g, ref = g.double(), ref.double()
    scale = ref.abs().amax(-1)
    err = (g - ref).abs().amax(-1)
    keep = scale > 0
    return (err[keep] / scale[keep])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_deterministic_dq_rows_of_different_scales(dtype, D, causal):
    """Deterministic dq (fixed point on Hopper: a per-row scale from ||dO_i||) keeps each row's
    own precision when the rows of dO differ by up to 10^7 in size: every row's error relative to
    its own size stays within the fast mode's (fp32 atomics) plus a little; rows of dO that are
    exactly zero give dq rows exactly zero."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("det-row-scales", dtype, D, causal)
    B, S, H = 2, 700, 4
    q, k, v, dout = make_inputs(B, S, S, H, 2, D, dt, gen)
    expo = torch.randint(-4, 4, (B, S, H, 1), device="cuda", generator=gen).to(torch.float32)
    dout = (dout.float() * torch.pow(10.0, expo)).to(dt)
    dout[:, 5] = 0  # zero rows (every head) ...
    dout[1, 17, 2] = 0  # ... and one (batch, row, head)
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    ref = attention_backward_reference(q, k, v, dout, causal=causal, compute_dtype=torch.float64)
    det = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=True)
    fast = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=False)
    assert torch.equal(det[0][:, 5], torch.zeros_like(det[0][:, 5]))
    assert torch.equal(det[0][1, 17, 2], torch.zeros_like(det[0][1, 17, 2]))
    e_det, e_fast = _row_rel_err(det[0], ref[0]), _row_rel_err(fast[0], ref[0])
    label = f"{dtype} D{D} causal={causal}"
    assert torch.isfinite(e_det).all(), label
    tol = 2e-3 if dt == torch.float16 else 1e-2
    worst_det, worst_fast = e_det.max().item(), e_fast.max().item()
    assert worst_det <= 1.5 * worst_fast + tol, f"{label}: row error {worst_det:.3e} (fast {worst_fast:.3e})"
    if D in (64, 96, 128) and flashkit.bwd_kernel_family(str(dt).removeprefix("torch."), D) == "sm90":
        # fixed point: the fast kernel's walk, so dk, dv are the fast mode's bits
        assert torch.equal(det[1], fast[1]) and torch.equal(det[2], fast[2]), label


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128, 192, 256], ids=lambda d: f"D{d}")
def test_deterministic_long_keys(D, causal):
    """S_k = 4096: at D 256 the fast mode's pair kernel (clusters of two CTAs that exchange dS),
    which the fixed-point deterministic mode runs too; bitwise over two runs, dq close to the fast
    mode's, dk / dv equal to them (Hopper)."""
    dt = torch.bfloat16
    require_variant(dt, D)
    gen = generator("det-long", D, causal)
    q, k, v, dout = make_inputs(1, 300, 4096, 2, 1, D, dt, gen)
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    runs = [flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=True) for _ in range(2)]
    for name, a, b in zip(("dq", "dk", "dv"), runs[1], runs[0]):
        assert_bitwise_equal(a, b, f"D{D} causal={causal} {name}")
    fast = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal)
    torch.testing.assert_close(runs[0][0].float(), fast[0].float(), atol=2e-2, rtol=2e-2)
    if flashkit.bwd_kernel_family(dt, D) == "sm90":
        assert torch.equal(runs[0][1], fast[1]) and torch.equal(runs[0][2], fast[2])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_d192_long_keys_default_kernels(causal):
    """D 192 with 8192 keys: on Hopper the fast mode's default is the pair kernel there (from 2k keys
    without a mask, 8k with one; D 256's tiles), the deterministic mode's the fixed-point key-split
    kernel: both against the float64 reference."""
    dt = torch.bfloat16
    require_variant(dt, 192)
    q, k, v, dout = make_inputs(1, 200, 8192, 2, 1, 192, dt, generator("d192-long", causal))
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    fast = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal)
    ref = check_dense_grads(fast, q, k, v, dout, causal, None, f"D192 S_k 8192 causal={causal} fast")
    det = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=True)
    pt = attention_backward_pytorch(q, k, v, dout, causal=causal)
    check_grads(det, ref, pt, f"D192 S_k 8192 causal={causal} deterministic")


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
def test_varlen_padding_rows_of_q_get_zero_dq(deterministic):
    """Rows of a varlen q after the last sequence (cu_seqlens_q[-1] < total_q) belong to no
    sequence: their dq is written as 0 even when their dout is NaN (the fixed-point deterministic
    mode must not turn the padding's non-finite bound into NaN there)."""
    dt, D = torch.bfloat16, 128
    require_variant(dt, D)
    gen = generator("varlen-q-padding", deterministic)
    lens = [17, 0, 70]
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 4, 2, gen, lens, lens)
    pad = 9
    q = torch.cat([q, randn((pad, 4, D), dt, gen)])
    dout = torch.cat([dout, torch.full((pad, 4, D), float("nan"), dtype=dt, device="cuda")])
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    out = out.nan_to_num(0.0)
    dq, dk, dv = flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq, mk,
                                                    deterministic=deterministic)
    assert torch.equal(dq[-pad:], torch.zeros_like(dq[-pad:]))
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()


@pytest.mark.parametrize("D", [64, 96, 128, 192, 256], ids=lambda d: f"D{d}")
def test_deterministic_dq_nan_row(D):
    """A NaN in one row of dO makes that row of dq NaN in both modes, and leaves the other rows
    finite (and within the accuracy rule of the fast mode's)."""
    dt = torch.bfloat16
    require_variant(dt, D)
    gen = generator("det-nan-row", D)
    q, k, v, dout = make_inputs(1, 300, 300, 2, 2, D, dt, gen)
    out, lse = flashkit.attention(q, k, v, return_lse=True)
    dout[0, 7, 1, 3] = float("nan")
    for det in (False, True):
        dq = flashkit.attention_backward(dout, q, k, v, out, lse, deterministic=det)[0]
        assert torch.isnan(dq[0, 7, 1]).all(), f"det={det}"
        rest = dq.clone()
        rest[0, 7, 1] = 0
        assert torch.isfinite(rest).all(), f"det={det}"
        if det:
            torch.testing.assert_close(rest.float(), fast_rest.float(), atol=2e-2, rtol=2e-2)
        else:
            fast_rest = rest


# (B, S_q, S_k, H_q, H_kv, D): causal GQA calls that the default splits over clusters
# (src/launch/bwd_gqa_split.h's table: h_ratio a multiple of 8; D 128 fast clusters of 2 from S_k
# 512 to 8k, deterministic 2 / 4 / 8 by S_k; D 64 fast clusters of 2 from 2k to 8k; h_ratio 4:
# deterministic D 128 clusters of 2 from 2k).
# test_backward_families_gpu.py runs this test again with FLASHKIT_BWD_GQA_SPLIT=8 (clusters of 8
# wherever the group allows) and =0 (never).
GQA_SPLIT_SHAPES = [(1, 2048, 2048, 8, 1, 128), (1, 1500, 2100, 16, 2, 128), (2, 700, 600, 8, 1, 128),
                    (1, 2100, 2300, 16, 2, 64), (1, 1900, 2200, 8, 2, 128), (1, 2100, 2300, 16, 2, 96)]


@pytest.mark.parametrize("shape", GQA_SPLIT_SHAPES, ids=lambda s: f"{case_id(s[:5])}_D{s[5]}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gqa_split_grads(dtype, shape):
    """Long GQA 8 / 16 causal calls at D 128 and D 64 (by default, or with FLASHKIT_BWD_GQA_SPLIT
    set, the GQA split: dK / dV of a key block summed over a cluster's CTAs through distributed
    shared memory): gradients against the reference, fast and deterministic; deterministic
    bitwise equal over two runs, fast dk / dv too (their sum order is fixed)."""
    dt = DTYPES[dtype]
    B, S_q, S_k, H_q, H_kv, D = shape
    require_variant(dt, D)
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt, generator("gqa_split", dtype, shape))
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    flashkit.device_errors()  # clear
    runs = {det: [flashkit.attention_backward(dout, q, k, v, out, lse, causal=True, deterministic=det)
                  for _ in range(2)] for det in (False, True)}
    bits = flashkit.device_errors()
    assert bits == 0, flashkit.describe_device_errors(bits)
    ref = None
    for det in (False, True):
        label = f"{dtype} gqa split {case_id(shape[:5])} D{D} deterministic={det}"
        if ref is None:
            ref = check_dense_grads(runs[det][0], q, k, v, dout, True, None, label)
        else:
            pt = attention_backward_pytorch(q, k, v, dout, causal=True)
            check_grads(runs[det][0], ref, pt, label)
        names = ("dq", "dk", "dv") if det else ("dk", "dv")
        for name in names:
            i = ("dq", "dk", "dv").index(name)
            assert_bitwise_equal(runs[det][1][i], runs[det][0][i], f"{label} run 2 {name}")


def test_autograd_uses_the_deterministic_flag(monkeypatch):
    """flashkit.attention(..., deterministic=True) reaches the backward op (bitwise equal to
    attention_backward's deterministic result), and so does
    torch.use_deterministic_algorithms(True) for a default call."""
    from flashkit import _torch_ops

    dt, D = any_variant()
    q, k, v, dout = make_inputs(1, 600, 600, 4, 2, D, dt, generator("det_flag"))
    out, grads = autograd_grads(q, k, v, dout, causal=True, deterministic=True)
    lse = flashkit.attention(q, k, v, causal=True, return_lse=True)[1]
    expected = flashkit.attention_backward(dout, q, k, v, out, lse, causal=True,
                                           deterministic=True)
    for name, a, b in zip(("dq", "dk", "dv"), grads, expected):
        assert_bitwise_equal(a, b, f"autograd deterministic {name}")

    seen = []

    def recording(real):
        def call(*args):
            seen.append(args[8])  # (dout, q, k, v, out, lse, causal, scale, deterministic, ...)
            return real(*args)
        return call

    # The backward op (custom-op autograd) or the direct implementation (the eager
    # torch.autograd.Function path): whichever runs records the flag.
    for name in ("_bwd_dense_op", "_dense_bwd"):
        monkeypatch.setattr(_torch_ops, name, recording(getattr(_torch_ops, name)))
    autograd_grads(q, k, v, dout)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        autograd_grads(q, k, v, dout)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert seen == [False, True]


# ---------------------------------------------------------------------------------------
# The public function and the autograd edge cases
# ---------------------------------------------------------------------------------------


def test_attention_backward_matches_autograd():
    dt, D = any_variant()
    q, k, v, dout = make_inputs(2, 130, 257, 8, 2, D, dt, generator("public"))
    out, grads = autograd_grads(q, k, v, dout, causal=True, softmax_scale=0.2,
                                deterministic=True)
    _, lse = flashkit.attention(q, k, v, causal=True, softmax_scale=0.2, return_lse=True)
    with torch.inference_mode():  # the direct path (no dispatcher)
        direct = flashkit.attention_backward(dout, q, k, v, out, lse, causal=True,
                                             softmax_scale=0.2, deterministic=True)
    op = torch.ops.flashkit.attention_bwd(dout, q, k, v, out, lse, True, 0.2, True)
    for name, a, b, c in zip(("dq", "dk", "dv"), grads, direct, op):
        assert_bitwise_equal(b, a, f"attention_backward {name}")
        assert_bitwise_equal(c, a, f"torch.ops.flashkit.attention_bwd {name}")
        assert b.is_contiguous()


def test_opcheck_backward_ops():
    if not hasattr(torch.library, "opcheck"):
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    dt, D = any_variant()
    q, k, v, dout = make_inputs(2, 40, 56, 4, 2, D, dt, generator("opcheck"))
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_bwd.default,
                          (dout, q, k, v, out, lse, True, 0.0, True))
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 4, 2, generator("opcheck_v"),
                                                      [5, 0, 30], [9, 4, 0])
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_varlen_bwd.default,
                          (dout, q, k, v, out, lse, cu_q, cu_k, mq, mk, False, 0.0, False))


def test_gradient_through_lse_is_refused():
    dt, D = any_variant()
    q, k, v, dout = make_inputs(1, 20, 30, 2, 2, D, dt, generator("lse_grad"))
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    out, lse = flashkit.attention(*leaves, return_lse=True)
    with pytest.raises(NotImplementedError, match="lse"):
        torch.autograd.grad((out.float().sum() + lse.sum()), leaves)
    # Asking for lse without differentiating it is fine.
    out, lse = flashkit.attention(*leaves, return_lse=True)
    grads = torch.autograd.grad(out, leaves, dout)
    _, expected = autograd_grads(q, k, v, dout)
    for name, a, b in zip(("dq", "dk", "dv"), grads, expected):
        torch.testing.assert_close(a, b, msg=f"{name} with lse returned")


def test_forward_op_without_lse_cannot_be_differentiated():
    dt, D = any_variant()
    q, k, v, _ = make_inputs(1, 8, 8, 2, 2, D, dt, generator("no_lse"))
    q.requires_grad_(True)
    out, _ = torch.ops.flashkit.attention_fwd(q, k, v, False, 0.0, False)
    with pytest.raises(RuntimeError, match="return_lse"):
        out.float().sum().backward()


def test_only_some_inputs_require_grad():
    dt, D = any_variant()
    q, k, v, dout = make_inputs(1, 40, 60, 4, 2, D, dt, generator("partial"))
    kl = k.detach().requires_grad_(True)
    out = flashkit.attention(q, kl, v, causal=True)
    (dk,) = torch.autograd.grad(out, (kl,), dout)
    _, (_, dk_all, _) = autograd_grads(q, k, v, dout, causal=True)
    torch.testing.assert_close(dk, dk_all)


def test_backward_runs_on_the_current_stream():
    """flashkit.attention_backward under torch.cuda.stream(side) sees the work queued
    before it on `side`."""
    dt, D = any_variant()
    q, k, v, dout_new = make_inputs(1, 300, 300, 4, 2, D, dt, generator("stream"))
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    dout = torch.zeros_like(dout_new)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(100_000_000)
        dout.copy_(dout_new)  # runs late, on `side`
        got = flashkit.attention_backward(dout, q, k, v, out, lse, causal=True,
                                          deterministic=True)
    torch.cuda.synchronize()
    expected = flashkit.attention_backward(dout_new, q, k, v, out, lse, causal=True,
                                           deterministic=True)
    for name, a, b in zip(("dq", "dk", "dv"), got, expected):
        assert_bitwise_equal(a, b, f"{name} computed on a side stream")


# ---------------------------------------------------------------------------------------
# torch.compile and CUDA graphs
# ---------------------------------------------------------------------------------------


def _training_step(q, k, v, w, cu=None):
    """Elementwise ops around the attention that are exact in fp16/bf16 (x0.5, the upcast,
    a bf16-valued weight), so compiled and eager gradients must be bitwise equal
    (deterministic backward)."""
    if cu is None:
        out = flashkit.attention(q * 0.5, k, v, causal=True, deterministic=True)
    else:
        out = flashkit.attention_varlen(q * 0.5, k, v, cu[0], cu[1], cu[2], cu[3], causal=True,
                                        deterministic=True)
    return (out.float() * w).sum()


def _compiled_vs_eager(compiled, make):
    for seed in (0, 1):  # the second call: new inputs of the same shape, no recompilation
        q, k, v, w, cu = make(seed)
        leaves_c = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        leaves_e = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        loss_c = compiled(*leaves_c, w, cu)
        loss_c.backward()
        loss_e = _training_step(*leaves_e, w, cu)
        loss_e.backward()
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-3)
        for name, a, b in zip(("dq", "dk", "dv"), leaves_c, leaves_e):
            assert_bitwise_equal(a.grad, b.grad, f"compiled vs eager {name} (seed {seed})")


def test_torch_compile_training_step():
    dt, D = any_variant()
    torch._dynamo.reset()

    def make(seed):
        q, k, v, dout = make_inputs(2, 96, 160, 8, 2, D, dt, generator("compile", seed))
        return q, k, v, dout.float(), None

    _compiled_vs_eager(torch.compile(_training_step, fullgraph=True), make)


def test_torch_compile_training_step_varlen():
    dt, D = any_variant()
    torch._dynamo.reset()
    lens_q, lens_k = [5, 0, 40, 17], [9, 3, 40, 0]

    def make(seed):
        q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 8, 2,
                                                          generator("compile_v", seed),
                                                          lens_q, lens_k)
        return q, k, v, dout.float(), (cu_q, cu_k, mq, mk)

    _compiled_vs_eager(torch.compile(_training_step, fullgraph=True, backend="aot_eager"), make)


def _warm_up(fn):
    """Warm-up on a side stream before capture, as torch.cuda.graph's docs recommend."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_cuda_graph_forward_and_backward():
    dt, D = any_variant()
    q, k, v, dout = (t.clone() for t in make_inputs(2, 150, 150, 8, 2, D, dt,
                                                    generator("graph", 0)))
    leaves = [t.requires_grad_(True) for t in (q, k, v)]

    def step():
        out = flashkit.attention(*leaves, causal=True, deterministic=True)
        return (out,) + torch.autograd.grad(out, leaves, dout)

    _warm_up(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    previous = None
    for seed in (1, 2):  # new inputs copied into the captured buffers, then replay
        fresh = make_inputs(2, 150, 150, 8, 2, D, dt, generator("graph", seed))
        with torch.no_grad():
            for dst, src in zip(leaves + [dout], fresh):
                dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        out_e, grads_e = autograd_grads(*fresh, causal=True, deterministic=True)
        for name, a, b in zip(("out", "dq", "dk", "dv"), static, (out_e,) + tuple(grads_e)):
            assert_bitwise_equal(a, b, f"replayed {name} (inputs {seed})")
        if previous is not None:
            assert not torch.equal(static[1], previous), "replay did not recompute dq"
        previous = static[1].clone()


@pytest.mark.parametrize("S,causal", [(1024, False), (4096, True)], ids=["s1k", "s4k_causal"])
def test_cuda_graph_backward_long_d256(S, causal):
    """D 256 at the lengths where the Hopper launcher picks the pair kernel (clusters of two CTAs,
    kernel_ks_pair.cuh; elsewhere whatever family runs D 256): captured in a CUDA graph and replayed
    on new inputs, it matches an eager call (dk, dv bitwise; dq up to its fp32 atomics' order) and
    the float64 reference."""
    require_variant(torch.bfloat16, 256)
    dt, D, B, H = torch.bfloat16, 256, 1, 2
    q, k, v, dout = (t.clone() for t in make_inputs(B, S, S, H, H, D, dt, generator("graph256", 0)))
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)

    def step():
        return flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal)

    _warm_up(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    for seed in (1, 2):
        fresh = make_inputs(B, S, S, H, H, D, dt, generator("graph256", seed))
        with torch.no_grad():
            for dst, src in zip((q, k, v, dout), fresh):
                dst.copy_(src)
            o2, l2 = flashkit.attention(q, k, v, causal=causal, return_lse=True)
            out.copy_(o2)
            lse.copy_(l2)
        graph.replay()
        torch.cuda.synchronize()
        eager = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal)
        assert_bitwise_equal(static[1], eager[1], f"replayed dk (inputs {seed})")
        assert_bitwise_equal(static[2], eager[2], f"replayed dv (inputs {seed})")
        torch.testing.assert_close(static[0].float(), eager[0].float(), rtol=1e-2, atol=1e-3)
        check_dense_grads(tuple(t.clone() for t in static), q, k, v, dout, causal, None,
                          f"graph D256 S{S} inputs {seed}")


# ---------------------------------------------------------------------------------------
# Sliding window and softcap
# ---------------------------------------------------------------------------------------

# (B, S_q, S_k, H_q, H_kv): single token, tiny GQA 4, MQA 333, several tiles both ways,
# S_q < S_k (GQA 8 / MQA) and S_q > S_k (GQA 2; under a right bound the first rows see no
# key, and with a left bound the first keys are seen by no row).
W_SHAPES = [(2, 1, 1, 2, 2), (2, 3, 3, 8, 2), (1, 333, 333, 4, 1), (1, 1000, 1000, 2, 2),
            (2, 77, 400, 8, 1), (2, 400, 77, 4, 2)]
CAUSAL_LEFTS = [0, 1, 63, 64, 200]
TWO_SIDED = [(32, 32), (0, 0), (100, -1), (-1, 17)]
SOFTCAP_QMUL = 2.0  # q x 2: scaled scores of std ~2, so a cap of 5 bends the tails


def window_id(w):
    return "w{}_{}".format(*w).replace("-1", "inf")


def check_window_grads(dtype, D, shape, causal, window, softcap, tag, deterministic=False):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    B, S_q, S_k, H_q, H_kv = shape
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt,
                                generator(tag, dtype, D, shape, causal, window, softcap))
    if softcap:
        q = q * SOFTCAP_QMUL
    mods = dict(window=window, softcap=softcap)
    _, grads = autograd_grads(q, k, v, dout, causal=causal, deterministic=deterministic, **mods)
    label = (f"{dtype} D{D} causal={causal} window {window} softcap {softcap} "
             f"{case_id(shape)}")
    ref = check_dense_grads(grads, q, k, v, dout, causal, None, label, **mods)
    # keys no row sees and rows that see no key: exactly zero
    from flashkit.testing import allowed_keys

    seen = torch.as_tensor(allowed_keys(S_q, S_k, causal, window), device="cuda")
    if S_q and S_k:
        assert not grads[0][:, ~seen.any(dim=1)].any(), f"{label}: dq of rows without keys"
        unseen = ~seen.any(dim=0)
        assert not grads[1][:, unseen].any() and not grads[2][:, unseen].any(), \
            f"{label}: dk/dv of keys no row sees"
    return grads, ref


@pytest.mark.parametrize("shape", [W_SHAPES[i] for i in (2, 4, 5)], ids=case_id)
@pytest.mark.parametrize("left", CAUSAL_LEFTS, ids=lambda w: f"left{w}")
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_causal_window_grads(dtype, D, left, shape):
    check_window_grads(dtype, D, shape, True, (left, -1), 0.0, "causal_window")


# Non-causal windows: every shape at D 128, two shapes at D 64.
TWO_SIDED_CASES = ([(128, w, s) for w in TWO_SIDED for s in W_SHAPES]
                   + [(64, w, s) for w in TWO_SIDED for s in (W_SHAPES[2], W_SHAPES[5])])


@pytest.mark.parametrize("D,window,shape", TWO_SIDED_CASES, ids=[
    f"D{D}-{window_id(w)}-{case_id(s)}" for D, w, s in TWO_SIDED_CASES])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_window_grads(dtype, D, window, shape):
    check_window_grads(dtype, D, shape, False, window, 0.0, "window")


# (causal, window, shape) per softcap
SOFTCAP_MASKS = [(False, (-1, -1), (2, 333, 333, 8, 2)), (True, (-1, -1), (2, 77, 400, 8, 1)),
                 (True, (64, -1), (1, 1000, 1000, 4, 1)), (False, (32, 32), (2, 400, 77, 4, 2))]


@pytest.mark.parametrize("causal,window,shape", SOFTCAP_MASKS, ids=[
    f"{'causal' if c else 'full'}-{window_id(w)}-{case_id(s)}" for c, w, s in SOFTCAP_MASKS])
@pytest.mark.parametrize("softcap", [30.0, 5.0], ids=lambda c: f"softcap{c:g}")
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_softcap_grads(dtype, D, softcap, causal, window, shape):
    check_window_grads(dtype, D, shape, causal, window, softcap, "softcap")


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
@pytest.mark.parametrize("D", [96, 192, 256], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_window_softcap_grads_other_head_dims(dtype, D, deterministic):
    """One case per remaining head dim: causal window + softcap, GQA 4, S_q < S_k; fast and
    deterministic (on Hopper D 192's fixed-point key-split kernel, D 96 the portable family)."""
    check_window_grads(dtype, D, (2, 203, 333, 8, 2), True, (63, -1), 5.0, "other_dims",
                       deterministic=deterministic)


@pytest.mark.parametrize("causal,window,softcap", [
    (True, (64, -1), 0.0), (False, (32, 32), 0.0), (True, (1, -1), 30.0), (False, (-1, 0), 5.0)],
    ids=["causal_w64", "w32_32", "causal_w1_cap30", "right0_cap5"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_window_softcap_grads(dtype, D, causal, window, softcap):
    dt = DTYPES[dtype]
    require_variant(dt, D)
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(
        dt, D, 8, 2, generator("varlen_window", dtype, D, causal, window, softcap))
    if softcap:
        q = q * SOFTCAP_QMUL
    mods = dict(causal=causal, window=window, softcap=softcap)
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    out = flashkit.attention_varlen(*leaves, cu_q, cu_k, mq, mk, **mods)
    grads = torch.autograd.grad(out, leaves, dout)
    ref = attention_varlen_backward_reference(q, k, v, dout, cu_q, cu_k,
                                              compute_dtype=torch.float64, **mods)
    pt = attention_varlen_backward_pytorch(q, k, v, dout, cu_q, cu_k, **mods)
    check_grads(grads, ref, pt, f"varlen {dtype} D{D} {mods}")
    # The keys of the sequence whose q is empty (rows 7..16) get exactly zero.
    assert not grads[1][7:16].any() and not grads[2][7:16].any()


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
@pytest.mark.parametrize("case", [
    ((1, 77, 203, 8, 1), False, (0, 0), 0.0),     # keys 0..125 seen by no row
    ((2, 203, 77, 4, 2), True, (10, -1), 5.0),    # rows 0..125 see no key
    ((2, 130, 130, 4, 4), False, (3, 70), 30.0),
], ids=["diag_Sq77_Sk203", "causal_w10_cap5_Sq203_Sk77", "w3_70_cap30"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_poisoned_outputs_are_written_with_window(dtype, case, deterministic):
    dt, D = DTYPES[dtype], 128
    require_variant(dt, D)
    (B, S_q, S_k, H_q, H_kv), causal, window, softcap = case
    q, k, v, dout = make_inputs(B, S_q, S_k, H_q, H_kv, D, dt,
                                generator("poison_window", dtype, case))
    mods = dict(window=window, softcap=softcap)
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **mods)
    dq, dk, dv = (poison_(torch.empty_like(t)) for t in (q, k, v))
    flashkit._C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, causal=causal,
                              deterministic=deterministic,
                              workspace=workspace_for(q, deterministic), stream=stream_handle(),
                              window_left=window[0], window_right=window[1], softcap=softcap)
    torch.cuda.synchronize()
    ref = attention_backward_reference(q, k, v, dout, causal=causal, compute_dtype=torch.float64,
                                       **mods)
    pt = attention_backward_pytorch(q, k, v, dout, causal=causal, **mods)
    label = f"{dtype} {case} deterministic={deterministic}"
    for name, g, r in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        res = check_written(g, r, name=name)
        assert res.ok, f"{label}: {res.message}"
        assert torch.isfinite(g).all(), f"{label}: {name} has non-finite values"
    check_grads((dq, dk, dv), ref, pt, label)
    if window == (0, 0):  # keys 0 .. S_k - S_q - 1 are seen by no row: exactly zero
        assert not dk[:, :S_k - S_q].any() and not dv[:, :S_k - S_q].any()
    if causal and S_q > S_k:
        assert not dq[:, :S_q - S_k].any()
    # the public function gives the same (deterministic mode: bitwise)
    if deterministic:
        got = flashkit.attention_backward(dout, q, k, v, out, lse, causal=causal,
                                          deterministic=True, **mods)
        for name, a, b in zip(("dq", "dk", "dv"), got, (dq, dk, dv)):
            assert_bitwise_equal(a, b, f"{label}: attention_backward {name}")


@pytest.mark.parametrize("case", ["dense_causal_window_gqa", "dense_two_sided_mqa",
                                  "varlen_causal_window_softcap"])
@pytest.mark.parametrize("D", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_deterministic_window_is_bitwise_reproducible(dtype, D, case):
    """deterministic=True under a window (the dq adds ordered from the window's last key
    block): dq, dk, dv bitwise equal over 3 runs; the fast mode's dk, dv too."""
    dt = DTYPES[dtype]
    require_variant(dt, D)
    gen = generator("determinism_window", dtype, D, case)
    if case.startswith("varlen"):
        lens = [1000, 3, 700]
        q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(dt, D, 8, 2, gen, lens, lens)
        mods = dict(causal=True, window=(200, -1), softcap=5.0)
        out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True,
                                             **mods)

        def run(det):
            return flashkit.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, mq,
                                                      mk, deterministic=det, **mods)
    else:
        causal = case == "dense_causal_window_gqa"
        mods = (dict(causal=True, window=(200, -1)) if causal
                else dict(causal=False, window=(100, 37)))
        q, k, v, dout = make_inputs(2, 1000, 1000, 8, 2 if causal else 1, D, dt, gen)
        out, lse = flashkit.attention(q, k, v, return_lse=True, **mods)

        def run(det):
            return flashkit.attention_backward(dout, q, k, v, out, lse, deterministic=det,
                                               **mods)
    flashkit.device_errors()  # clear
    first = run(True)
    for i in range(2):
        again = run(True)
        for name, a, b in zip(("dq", "dk", "dv"), again, first):
            assert_bitwise_equal(a, b, f"{case}: deterministic run {i + 2} {name}")
    bits = flashkit.device_errors()
    assert bits == 0, flashkit.describe_device_errors(bits)
    fast = [run(False) for _ in range(2)]
    for name, j in (("dk", 1), ("dv", 2)):
        assert_bitwise_equal(fast[1][j], fast[0][j], f"{case}: fast mode {name}")
    torch.testing.assert_close(fast[0][0].float(), first[0].float(), atol=2e-2, rtol=2e-2)


def _training_step_mods(q, k, v, w, cu=None):
    mods = dict(causal=True, deterministic=True, window=(40, -1), softcap=5.0)
    if cu is None:
        out = flashkit.attention(q * 0.5, k, v, **mods)
    else:
        out = flashkit.attention_varlen(q * 0.5, k, v, cu[0], cu[1], cu[2], cu[3], **mods)
    return (out.float() * w).sum()


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_torch_compile_training_step_with_window_and_softcap(varlen):
    """torch.compile(fullgraph=True) of a training step with a window and a softcap: the
    gradients are bitwise those of eager (deterministic backward). aot_eager: the graph and
    AOTAutograd's backward op carry the window and softcap (inductor is exercised by
    test_torch_compile_training_step; not compiling again keeps the time down)."""
    dt, D = any_variant()
    torch._dynamo.reset()
    compiled = torch.compile(_training_step_mods, fullgraph=True, backend="aot_eager")
    for seed in (0, 1):
        if varlen:
            q, k, v, dout, cu_q, cu_k, mq, mk = varlen_inputs(
                dt, D, 8, 2, generator("compile_window_v", seed), [5, 0, 90, 17], [9, 3, 90, 0])
            cu = (cu_q, cu_k, mq, mk)
        else:
            q, k, v, dout = make_inputs(2, 96, 160, 8, 2, D, dt, generator("compile_window", seed))
            cu = None
        w = dout.float()
        leaves_c = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        leaves_e = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        compiled(*leaves_c, w, cu).backward()
        _training_step_mods(*leaves_e, w, cu).backward()
        for name, a, b in zip(("dq", "dk", "dv"), leaves_c, leaves_e):
            assert_bitwise_equal(a.grad, b.grad, f"compiled vs eager {name} (seed {seed})")


def test_opcheck_backward_ops_with_window_and_softcap():
    if not hasattr(torch.library, "opcheck"):
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    dt, D = any_variant()
    q, k, v, dout = make_inputs(2, 40, 56, 4, 2, D, dt, generator("opcheck_window"))
    out, lse = flashkit.attention(q, k, v, causal=True, window=(8, -1), softcap=5.0,
                                  return_lse=True)
    torch.library.opcheck(torch.ops.flashkit.attention_fwd.default,
                          (q, k, v, True, 0.0, True, True, 8, -1, 5.0))
    torch.library.opcheck(torch.ops.flashkit.attention_bwd.default,
                          (dout, q, k, v, out, lse, True, 0.0, True, 8, -1, 5.0))


@pytest.mark.parametrize("kw, arg", [(dict(window=(-2, 0)), "window_left"),
                                     (dict(window=(0, -2)), "window_right"),
                                     (dict(softcap=-1.0), "softcap")])
def test_backward_rejects_bad_window_and_softcap(kw, arg):
    dt, D = any_variant()
    q, k, v, dout = make_inputs(1, 20, 30, 2, 2, D, dt, generator("bad_bwd_mods", arg))
    out, lse = flashkit.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match=arg):
        flashkit.attention_backward(dout, q, k, v, out, lse, **kw)


# ---------------------------------------------------------------------------------------
# A tiny transformer block trained with SGD: FlashKit vs float32 SDPA
# ---------------------------------------------------------------------------------------


class TinyBlock(torch.nn.Module):
    """Token embedding, one causal self-attention layer (2 heads of 64) and an MLP, pre-norm,
    an LM head. The attention gets bf16 q/k/v in both variants: FlashKit computes in
    bf16/fp32, the reference runs SDPA's math backend in float32 on the upcast values."""

    def __init__(self, vocab=64, d_model=128, heads=2):
        super().__init__()
        self.heads, self.d_model = heads, d_model
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 2 * d_model), torch.nn.GELU(),
                                       torch.nn.Linear(2 * d_model, d_model))
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens, use_flashkit):
        B, S = tokens.shape
        x = self.embed(tokens)
        qkv = self.qkv(self.ln1(x)).view(B, S, 3, self.heads, self.d_model // self.heads)
        q, k, v = (t.to(torch.bfloat16) for t in qkv.unbind(2))  # [B, S, H, 64]
        if use_flashkit:
            a = flashkit.attention(q, k, v, causal=True, deterministic=True).float()
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel([SDPBackend.MATH]):
                a = torch.nn.functional.scaled_dot_product_attention(
                    *(t.float().transpose(1, 2) for t in (q, k, v)), is_causal=True)
            a = a.transpose(1, 2)
        x = x + self.proj(a.reshape(B, S, self.d_model))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def _train(model, tokens, use_flashkit, steps=20, lr=0.3):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        logits = model(tokens[:, :-1], use_flashkit)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_tiny_transformer_trains_like_sdpa():
    require_variant(torch.bfloat16, 64)
    torch.manual_seed(0)
    tokens = torch.randint(0, 64, (4, 129), device="cuda")
    ref_model = TinyBlock().cuda()
    fk_model = TinyBlock().cuda()
    fk_model.load_state_dict(ref_model.state_dict())
    ref = _train(ref_model, tokens, use_flashkit=False)
    got = _train(fk_model, tokens, use_flashkit=True)
    assert all(math.isfinite(x) for x in got), got
    assert ref[-1] < 0.97 * ref[0], f"the reference did not learn: {ref}"
    for i, (a, b) in enumerate(zip(got, ref)):
        assert abs(a - b) <= 0.02 * abs(b) + 1e-3, \
            f"step {i}: loss {a:.5f} with FlashKit, {b:.5f} with SDPA\n{got}\n{ref}"
