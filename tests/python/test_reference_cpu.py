"""The float64 numpy reference (flashkit.testing.reference) against a naive per-element
loop (causal, sliding window, softcap), and the checks of SPEC §3 (check_close, check_lse,
check_written, poison_).

CPU only, numpy only: runs in CI without torch, GPU or the native extension.
"""

import math

import numpy as np
import pytest

# (B, S_q, S_k, H_q, H_kv, D, D_v, causal): GQA, causal with S_q < S_k and S_q > S_k
# (fully masked rows), S_k = 0, single tokens, D_v != D.
CASES = [
    (1, 1, 1, 1, 1, 4, 4, False),
    (1, 1, 1, 1, 1, 4, 4, True),
    (2, 3, 3, 2, 2, 8, 8, False),
    (2, 3, 3, 2, 2, 8, 8, True),
    (2, 3, 3, 4, 2, 8, 8, True),      # GQA 2
    (1, 3, 5, 8, 1, 4, 4, False),     # MQA
    (1, 2, 5, 6, 3, 4, 4, True),      # S_q < S_k: rows see S_k - S_q + i + 1 keys
    (1, 5, 2, 4, 1, 4, 4, True),      # S_q > S_k: rows 0..2 see no key
    (2, 4, 1, 2, 1, 4, 4, True),      # S_k = 1: only the last row sees a key
    (2, 3, 0, 2, 1, 4, 4, False),     # S_k = 0: every row empty
    (2, 3, 0, 2, 1, 4, 4, True),
    (1, 3, 7, 4, 2, 4, 6, True),      # D_v != D
    (2, 17, 17, 4, 4, 8, 8, True),
]


def naive_visible(i, j, S_q, S_k, causal, window):
    """The mask as flashkit.attention documents it, one (row, key) at a time."""
    left, right = window
    if causal:
        right = 0
    d = S_k - S_q
    return (j < S_k and (right < 0 or j <= i + d + right) and
            (left < 0 or j >= i + d - left))


def naive_attention(q, k, v, causal, scale, window=(-1, -1), softcap=0.0):
    """One output element at a time, in Python floats with math.fsum."""
    B, S_q, H_q, D = q.shape
    S_k, H_kv, D_v = k.shape[1], k.shape[2], v.shape[3]
    group = H_q // H_kv
    out = np.zeros((B, S_q, H_q, D_v))
    lse = np.full((B, H_q, S_q), -math.inf)
    for b in range(B):
        for h in range(H_q):
            hk = h // group
            for i in range(S_q):
                keys = [j for j in range(S_k) if naive_visible(i, j, S_q, S_k, causal, window)]
                if not keys:
                    continue
                s = [scale * math.fsum(float(q[b, i, h, d]) * float(k[b, j, hk, d])
                                       for d in range(D)) for j in keys]
                if softcap:
                    s = [softcap * math.tanh(x / softcap) for x in s]
                m = max(s)
                w = [math.exp(x - m) for x in s]
                z = math.fsum(w)
                lse[b, h, i] = m + math.log(z)
                for e in range(D_v):
                    out[b, i, h, e] = math.fsum(wj * float(v[b, j, hk, e])
                                                for wj, j in zip(w, keys)) / z
    return out, lse


def random_qkv(rng, B, S_q, S_k, H_q, H_kv, D, D_v, dtype=np.float64, spread=1.5):
    q = rng.standard_normal((B, S_q, H_q, D)) * spread
    k = rng.standard_normal((B, S_k, H_kv, D)) * spread
    v = rng.standard_normal((B, S_k, H_kv, D_v))
    return q.astype(dtype), k.astype(dtype), v.astype(dtype)


def zlib_seed(*case):
    """A seed that depends on the case only (hash() of a tuple is salted per process)."""
    import zlib

    return zlib.crc32(repr(case).encode())


def assert_lse_equal(lse, lse_ref):
    assert lse.shape == lse_ref.shape
    assert not np.isnan(lse).any()
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(lse_ref))
    finite = np.isfinite(lse_ref)
    np.testing.assert_allclose(lse[finite], lse_ref[finite], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}_Sq{}_Sk{}_H{}-{}_D{}-{}_{}".format(
    *c[:7], "causal" if c[7] else "full"))
def test_reference_matches_naive_loop(R, case):
    B, S_q, S_k, H_q, H_kv, D, D_v, causal = case
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    q, k, v = random_qkv(rng, B, S_q, S_k, H_q, H_kv, D, D_v)
    out, lse = R.attention_reference(q, k, v, causal=causal)
    out_n, lse_n = naive_attention(q, k, v, causal, 1.0 / math.sqrt(D))
    assert out.dtype == np.float64 and lse.dtype == np.float64
    assert out.shape == (B, S_q, H_q, D_v) and lse.shape == (B, H_q, S_q)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, out_n, rtol=1e-12, atol=1e-12)
    assert_lse_equal(lse, lse_n)


def test_rows_without_keys_are_zero_and_minus_inf(R):
    rng = np.random.default_rng(0)
    q, k, v = random_qkv(rng, 1, 5, 2, 2, 1, 4, 4)
    out, lse = R.attention_reference(q, k, v, causal=True)
    assert (out[:, :3] == 0).all() and np.isneginf(lse[:, :, :3]).all()
    assert np.isfinite(lse[:, :, 3:]).all() and (np.abs(out[:, 3:]) > 0).any()


@pytest.mark.parametrize("scale", [0.3, 2.0])
def test_custom_softmax_scale(R, scale):
    rng = np.random.default_rng(1)
    q, k, v = random_qkv(rng, 2, 3, 5, 4, 2, 8, 8)
    out, lse = R.attention_reference(q, k, v, causal=True, softmax_scale=scale)
    out_n, lse_n = naive_attention(q, k, v, True, scale)
    np.testing.assert_allclose(out, out_n, rtol=1e-12, atol=1e-12)
    assert_lse_equal(lse, lse_n)


def test_float16_inputs_are_computed_in_float64(R):
    rng = np.random.default_rng(2)
    q, k, v = random_qkv(rng, 1, 3, 4, 2, 1, 8, 8, dtype=np.float16)
    out, lse = R.attention_reference(q, k, v)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    out_n, lse_n = naive_attention(q, k, v, False, 1.0 / math.sqrt(8))
    np.testing.assert_allclose(out, out_n, rtol=1e-12, atol=1e-12)


def test_gqa_maps_query_head_to_kv_head_h_div_group(R):
    # kv head 0 gives v = 0, kv head 1 gives v = 1: query heads 0..2 -> 0, 3..5 -> 1.
    q = np.ones((1, 2, 6, 4))
    k = np.ones((1, 3, 2, 4))
    v = np.stack([np.zeros((3, 4)), np.ones((3, 4))], axis=1)[None]
    out, _ = R.attention_reference(q, k, v)
    np.testing.assert_array_equal(out[0, :, :3], 0.0)
    np.testing.assert_array_equal(out[0, :, 3:], 1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_reference_matches_per_sequence_loop(R, causal):
    # Sequences: (q 2, k 3), (q 0, k 2), (q 3, k 0), (q 1, k 4), (q 4, k 2), (q 0, k 0).
    lens_q = [2, 0, 3, 1, 4, 0]
    lens_k = [3, 2, 0, 4, 2, 0]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    H_q, H_kv, D = 4, 2, 8
    rng = np.random.default_rng(3)
    q = rng.standard_normal((cu_q[-1], H_q, D))
    k = rng.standard_normal((cu_k[-1], H_kv, D))
    v = rng.standard_normal((cu_k[-1], H_kv, D))
    out, lse = R.attention_varlen_reference(q, k, v, cu_q, cu_k, causal=causal)
    assert out.shape == (cu_q[-1], H_q, D) and lse.shape == (H_q, cu_q[-1])
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        out_n, lse_n = naive_attention(q[None, sq], k[None, sk], v[None, sk], causal,
                                       1.0 / math.sqrt(D))
        np.testing.assert_allclose(out[sq], out_n[0], rtol=1e-12, atol=1e-12)
        assert_lse_equal(lse[:, sq], lse_n[0])
    # sequence 2 has no keys at all
    assert (out[cu_q[2]:cu_q[3]] == 0).all() and np.isneginf(lse[:, cu_q[2]:cu_q[3]]).all()


def test_varlen_rejects_bad_cu_seqlens(R):
    q = np.zeros((3, 1, 4))
    with pytest.raises(ValueError, match="cu_seqlens"):
        R.attention_varlen_reference(q, q, q, np.array([0, 2, 1, 3]), np.array([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="cu_seqlens"):
        R.attention_varlen_reference(q, q, q, np.array([0, 3]), np.array([0, 1, 3]))


# ---------------------------------------------------------------------------------------
# Sliding window and softcap
# ---------------------------------------------------------------------------------------

# (S_q, S_k, causal, window): causal windows, two-sided, one-sided, S_q != S_k both ways
# (rows without keys), a window of one key, windows wider than the sequence.
WINDOW_CASES = [
    (7, 7, True, (0, -1)),      # causal, the diagonal only
    (7, 7, True, (2, -1)),      # causal sliding window of 3 keys
    (7, 7, True, (2, 5)),       # right clipped to 0 by causal
    (6, 9, True, (1, -1)),      # S_q < S_k
    (9, 4, True, (2, -1)),      # S_q > S_k: rows 0..4 see no key
    (7, 7, False, (2, 2)),      # two-sided
    (7, 7, False, (0, 0)),      # one key per row
    (5, 8, False, (-1, 1)),     # right bound only
    (8, 5, False, (1, -1)),     # left bound only, S_q > S_k
    (8, 5, False, (0, 0)),      # S_q > S_k: rows 0..2 see no key
    (4, 4, False, (100, 100)),  # wider than the sequence: no mask
    (1, 1, True, (0, 0)),
]


@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: "Sq{}_Sk{}_{}_w{}_{}".format(
    c[0], c[1], "causal" if c[2] else "full", *c[3]))
def test_allowed_keys_is_the_documented_mask(R, case):
    S_q, S_k, causal, window = case
    mask = R.allowed_keys(S_q, S_k, causal, window)
    assert mask.shape == (S_q, S_k) and mask.dtype == bool
    for i in range(S_q):
        for j in range(S_k):
            assert mask[i, j] == naive_visible(i, j, S_q, S_k, causal, window), (i, j)


def test_allowed_keys_equivalences(R):
    # causal is the window's right bound 0; (-1, -1) is no mask; causal + (W, -1) is (W, 0).
    np.testing.assert_array_equal(R.allowed_keys(6, 9, True), R.allowed_keys(6, 9, False, (-1, 0)))
    np.testing.assert_array_equal(R.allowed_keys(6, 9, False, (-1, -1)), np.ones((6, 9), bool))
    np.testing.assert_array_equal(R.allowed_keys(9, 6, True, (3, -1)),
                                  R.allowed_keys(9, 6, False, (3, 0)))
    np.testing.assert_array_equal(R.allowed_keys(9, 6, True, (3, 7)),
                                  R.allowed_keys(9, 6, True, (3, -1)))
    # a causal window of W keeps min(i + 1, W + 1) keys per row (S_q == S_k)
    assert list(R.allowed_keys(6, 6, True, (2, -1)).sum(axis=1)) == [1, 2, 3, 3, 3, 3]
    with pytest.raises(ValueError, match="window"):
        R.allowed_keys(3, 3, False, (-2, 0))


@pytest.mark.parametrize("softcap", [0.0, 5.0, 1.5])
@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: "Sq{}_Sk{}_{}_w{}_{}".format(
    c[0], c[1], "causal" if c[2] else "full", *c[3]))
def test_window_and_softcap_match_naive_loop(R, case, softcap):
    S_q, S_k, causal, window = case
    rng = np.random.default_rng(zlib_seed(case, softcap))
    q, k, v = random_qkv(rng, 2, S_q, S_k, 4, 2, 8, 8, spread=2.0)  # capped scores matter
    out, lse = R.attention_reference(q, k, v, causal=causal, window=window, softcap=softcap)
    out_n, lse_n = naive_attention(q, k, v, causal, 1.0 / math.sqrt(8), window, softcap)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, out_n, rtol=1e-12, atol=1e-12)
    assert_lse_equal(lse, lse_n)
    empty = ~R.allowed_keys(S_q, S_k, causal, window).any(axis=1)
    assert (out[:, empty] == 0).all() and np.isneginf(lse[:, :, empty]).all()


def test_softcap_bounds_the_scores(R):
    """With a small cap every score is within (-cap, cap): lse <= log(S_k) + cap."""
    rng = np.random.default_rng(5)
    q, k, v = random_qkv(rng, 1, 4, 6, 2, 2, 8, 8, spread=10.0)
    _, lse = R.attention_reference(q, k, v, softcap=0.5)
    assert (lse < math.log(6) + 0.5).all() and (lse > math.log(6) - 0.5).all()
    out_big, lse_big = R.attention_reference(q, k, v, softcap=1e9)  # a cap far away: none
    out_off, lse_off = R.attention_reference(q, k, v)
    np.testing.assert_allclose(out_big, out_off, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lse_big, lse_off, rtol=1e-9, atol=1e-9)


def test_varlen_window_is_bottom_right_aligned_per_sequence(R):
    lens_q, lens_k = [2, 0, 5, 3, 1], [3, 2, 5, 0, 4]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    rng = np.random.default_rng(6)
    q = rng.standard_normal((cu_q[-1], 4, 8))
    k = rng.standard_normal((cu_k[-1], 2, 8))
    v = rng.standard_normal((cu_k[-1], 2, 8))
    out, lse = R.attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True, window=(1, -1),
                                            softcap=3.0)
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        out_n, lse_n = naive_attention(q[None, sq], k[None, sk], v[None, sk], True,
                                       1.0 / math.sqrt(8), (1, -1), 3.0)
        np.testing.assert_allclose(out[sq], out_n[0], rtol=1e-12, atol=1e-12)
        assert_lse_equal(lse[:, sq], lse_n[0])


# ---------------------------------------------------------------------------------------
# check_close: the 2x rule of SPEC §3
# ---------------------------------------------------------------------------------------


def _ref_pt(seed=4, shape=(2, 5, 3, 8)):
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal(shape)
    e = rng.standard_normal(shape)
    e *= 1e-3 / np.abs(e).max()  # PyTorch's error: max-abs exactly 1e-3
    return ref, ref + e, e


def test_check_close_passes_within_twice_pytorch_error(R):
    ref, pt, e = _ref_pt()
    res = R.check_close(ref + 1.9 * e, ref, pt, atol_slack=0.0, rtol_slack=0.0)
    assert res.ok, res.message
    assert bool(res) and "max_abs" in res.message and "rel_l2" in res.message


def test_check_close_fails_beyond_twice_pytorch_error(R):
    ref, pt, e = _ref_pt()
    res = R.check_close(ref + 2.1 * e, ref, pt, atol_slack=0.0, rtol_slack=0.0)
    assert not res.ok and not bool(res)
    assert "FAILED" in res.message and "worst at" in res.message


def test_check_close_slack_admits_error_when_pytorch_is_exact(R):
    ref, _, _ = _ref_pt()
    out = ref + 1e-4
    assert not R.check_close(out, ref, ref, atol_slack=0.0, rtol_slack=0.0).ok
    assert R.check_close(out, ref, ref, atol_slack=2e-4, rtol_slack=2e-4).ok


def test_check_close_relative_l2_is_checked_too(R):
    # Same max error as PyTorch's, but on every element instead of one: fails on rel-L2.
    ref = np.ones((64,))
    pt = ref.copy()
    pt[0] += 1e-3
    out = ref + 1e-3
    res = R.check_close(out, ref, pt, atol_slack=0.0, rtol_slack=0.0)
    assert not res.ok, res.message


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_close_never_passes_nan_or_inf(R, bad):
    ref, pt, _ = _ref_pt()
    out = ref.copy()
    out[1, 2, 0, 3] = bad
    res = R.check_close(out, ref, pt, atol_slack=1e9, rtol_slack=1e9)
    assert not res.ok, res.message
    if np.isnan(bad):
        assert "NaN" in res.message and "(1, 2, 0, 3)" in res.message


def test_check_close_rejects_shape_mismatch(R):
    ref, pt, _ = _ref_pt()
    res = R.check_close(ref[:1], ref, pt)
    assert not res.ok and "shape" in res.message


def test_check_close_default_slack_follows_output_dtype(R):
    ref = np.full((64,), 0.25)
    out16 = ref.astype(np.float16)
    out16[5] += np.float16(2.0**-12)  # one fp16 ulp at 0.25: within fp16's slack
    assert R.check_close(out16, ref, ref).ok
    assert not R.check_close(out16.astype(np.float32), ref, ref).ok
    a16, r16 = R.default_slack("float16")
    abf, rbf = R.default_slack("bfloat16")
    assert 0 < a16 < abf < 0.01 and 0 < r16 < rbf < 0.01
    assert R.default_slack("torch.bfloat16") == (abf, rbf)


def test_check_close_on_empty_outputs(R):
    e = np.zeros((1, 0, 2, 8))
    assert R.check_close(e, e, e).ok


# ---------------------------------------------------------------------------------------
# check_lse, check_written, poison_
# ---------------------------------------------------------------------------------------


def test_check_lse(R):
    ref = np.array([[1.0, -np.inf, 3.0]])
    assert R.check_lse(ref + 5e-4, ref).ok
    assert not R.check_lse(ref + 5e-2, ref).ok
    assert not R.check_lse(np.array([[1.0, 0.0, 3.0]]), ref).ok        # finite where -inf
    assert not R.check_lse(np.array([[-np.inf, -np.inf, 3.0]]), ref).ok  # -inf where finite
    res = R.check_lse(np.array([[np.nan, -np.inf, 3.0]]), ref)
    assert not res.ok and "NaN" in res.message
    assert not R.check_lse(ref[:, :2], ref).ok
    big = np.array([[100.0]])
    assert R.check_lse(big + 0.09, big).ok  # relative part of the tolerance


def test_poison_and_check_written(R):
    out = np.zeros((2, 3, 4), dtype=np.float16)
    assert R.poison_(out) is out and np.isnan(out).all()
    ref = np.ones((2, 3, 4))
    res = R.check_written(out, ref)
    assert not res.ok and "24 of 24" in res.message
    out[0] = 1
    res = R.check_written(out, ref)
    assert not res.ok and "12 of 24" in res.message and "(1, 0, 0)" in res.message
    out[1] = 1
    assert R.check_written(out, ref).ok
    with pytest.raises(TypeError):
        R.poison_(np.zeros(3, dtype=np.int32))
