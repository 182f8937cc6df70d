"""CPU model check of the deterministic backward's fixed-point dQ (docs/kernels/bwd.md "Deterministic
dQ in fixed point"; src/kernels/bwd_sm80/prepost.cuh `dq_row_exp`, prims::to_fixed2).

Row i of dq_accum is the sum over key blocks n of C_n,i = sum_{j in n} bf16(dS_ij) K_j, each
contribution scaled by 2^k_i and rounded to int32 before the (unordered) integer adds. k_i comes
from the bound B_i = 2.0625 ||dO_i|| max_j ||V_j|| max |K|. Checked here with numpy, the kernel's
constants quoted from the source:

- no partial sum can overflow int32, in any order: the sum of |round(2^k_i C_n,i)| over n stays
  below 2^31, on random data and on inputs built to come near the bound (dP_ij = +-||dO_i|| ||V_j||
  with K_j of the same sign: half the bound, the most any input reaches; one-hot P; K and dS of
  one sign);
- the result is within a few units of 2^-k_i of the float64 sum, i.e. a row's error is relative
  to its own bound, whatever the other rows' sizes;
- the exponent of a zero bound is 30 (its adds are all zero) and of a non-finite bound the marker.
"""
import math
import pathlib
import re

import pytest

np = pytest.importorskip("numpy")

ROOT = pathlib.Path(__file__).resolve().parents[2]
NON_FINITE = -(1 << 30)


def quoted_constants():
    """(margin, top, kmax) of dq_row_exp in prepost.cuh: bound = margin * ..., k = top - e, k <= kmax."""
    src = (ROOT / "src/kernels/bwd_sm80/prepost.cuh").read_text()
    body = src[src.index("int32_t dq_row_exp("):]
    body = body[:body.index("\n}\n")]
    margin = float(re.search(r"const double bound = ([0-9.]+) \* double\(dnorm\) \* double\(vmax\) \* double\(kmax\);",
                             body).group(1))
    top = int(re.search(r"const int k = (\d+) - e;", body).group(1))
    kmax = int(re.search(r"return k > (\d+) \? \1 : \(k < -(\d+) \? -\2 : k\);", body).group(1))
    return margin, top, kmax


MARGIN, TOP, KMAX = quoted_constants()


def test_constants_are_the_documented_ones():
    assert (MARGIN, TOP, KMAX) == (2.0625, 30, 126)
    params = (ROOT / "src/kernels/bwd_params.h").read_text()
    assert "constexpr int32_t kDqExpNonFinite = -(1 << 30);" in params


def row_exp(dnorm, kmax, vmax):
    """dq_row_exp: the bound in double precision of the fp32 inputs."""
    f = np.float32
    bound = MARGIN * float(f(dnorm)) * float(f(vmax)) * float(f(kmax))
    if not bound <= 1.0e300:
        return NON_FINITE
    _, e = math.frexp(bound)
    if bound == 0:
        e = 0
    return max(min(TOP - e, KMAX), -KMAX)


def to_bf16(x):
    """Round float32 values to bfloat16 (nearest even), returned as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def fixed_dq(q, k, v, do, scale, block_n=64, key_order=None):
    """(dq in fixed point as the kernels compute it (int64 totals of the int32 adds, and the
    largest sum of |adds| per row), the float64 reference, the exponents)."""
    s = (q @ k.T) * scale
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    o = p @ v
    dp = do @ v.T
    delta = (do * o).sum(1, keepdims=True)
    ds = p * (dp - delta)
    ref = ds @ k
    dnorm = np.sqrt((do.astype(np.float32) ** 2).sum(1))
    kmax = np.abs(k).max()
    vmax = np.sqrt((v.astype(np.float32) ** 2).sum(1)).max()
    exps = np.array([row_exp(dn, kmax, vmax) for dn in dnorm])
    ds16 = to_bf16(ds.astype(np.float32)).astype(np.float64)
    n_blocks = (k.shape[0] + block_n - 1) // block_n
    order = key_order if key_order is not None else range(n_blocks)
    total = np.zeros(ref.shape, dtype=np.int64)
    absum = np.zeros(ref.shape, dtype=np.int64)
    exact = np.zeros(ref.shape)  # the same contributions summed in float64
    sc = np.ldexp(1.0, np.clip(exps, -126, None))[:, None]
    for n in order:
        sl = slice(n * block_n, (n + 1) * block_n)
        c = (ds16[:, sl] @ k[sl]).astype(np.float32).astype(np.float64)
        add = np.rint(c * sc).astype(np.int64)
        total += add
        absum += np.abs(add)
        exact += c
    return total, absum, ref, exps, exact


def check(q, k, v, do, scale=0.125, label=""):
    total, absum, ref, exps, exact = fixed_dq(q, k, v, do, scale)
    assert absum.max() < 2**31, f"{label}: a partial sum could reach {absum.max()} >= 2^31"
    got = total / np.ldexp(1.0, exps)[:, None]
    # the fixed point's only error: each add rounded to a unit 2^-k of its row
    unit = np.ldexp(1.0, -exps)[:, None]
    n_adds = (k.shape[0] + 63) // 64
    assert (np.abs(got - exact) <= 0.5 * n_adds * unit * (1 + 1e-9)).all(), label
    return got, ref, exps


def test_random_rows_of_very_different_sizes():
    rng = np.random.default_rng(1)
    S, D = 700, 64
    q, k, v = (rng.standard_normal((S, D)) for _ in range(3))
    do = rng.standard_normal((S, D)) * 10.0 ** rng.integers(-6, 6, (S, 1))
    do[5] = 0
    got, ref, exps = check(q, k, v, do, label="random")
    assert exps[5] == TOP and (got[5] == 0).all()
    # each row relative to its own size: far finer than bf16's half ulp
    size = np.abs(ref).max(1)
    keep = size > 0
    rel = (np.abs(got - ref).max(1)[keep]) / size[keep]
    assert rel.max() < 2.0**-6, rel.max()  # (bf16 dS alone is ~2^-9 .. 2^-7)


@pytest.mark.parametrize("case", ["tight", "one_hot", "one_sign"])
def test_tight_bounds_do_not_overflow(case):
    """Inputs where the bound is (nearly) reached: the int32 partial sums must still fit."""
    rng = np.random.default_rng(2)
    S, D = 256, 128
    q = rng.standard_normal((S, D))
    k = rng.standard_normal((S, D))
    v = rng.standard_normal((S, D))
    do = rng.standard_normal((S, D))
    scale = 0.125
    if case == "tight":
        # uniform P over keys V_j = s_j v and K_j = s_j (1, ..., 1), s_j = +-1 alternating, dO_i
        # along v: dP_ij = s_j ||dO_i|| ||v||, delta_i = 0, so dq_i = ||dO_i|| ||v|| max|K| in every
        # column: half the bound 2 ||dO_i|| vmax kmax, which no input can exceed
        q[:] = 0
        sgn = np.where(np.arange(S) % 2 == 0, 1.0, -1.0)[:, None]
        v = sgn * v[0]
        k = sgn * np.ones((1, D))
        do = np.outer(rng.uniform(0.5, 2, S), v[0] / np.linalg.norm(v[0]))
    elif case == "one_hot":  # P one-hot per row (huge logits), V_j of alternating sign
        q = q * 100.0
        scale = 1.0
        v = np.sign(rng.standard_normal((S, 1))) * np.abs(v)
    else:  # K of one sign, dS of one sign per row: no cancellation at all
        k = np.abs(k) + 1.0
        v = np.abs(v)
        do = np.abs(do)
    check(q, k, v, do, scale=scale, label=case)
    if case == "tight":  # the partial sums do come near the limit
        absum = fixed_dq(q, k, v, do, scale)[1]
        assert absum.max() > 2**28, absum.max()  # (~0.48 x 2^30 here)


def test_order_does_not_matter():
    rng = np.random.default_rng(3)
    S, D = 512, 64
    q, k, v, do = (rng.standard_normal((S, D)) for _ in range(4))
    a = fixed_dq(q, k, v, do, 0.125)[0]
    b = fixed_dq(q, k, v, do, 0.125, key_order=list(rng.permutation(S // 64)))[0]
    assert (a == b).all()


def test_exponents_of_zero_and_non_finite_bounds():
    assert row_exp(0.0, 1.0, 1.0) == TOP  # frexp(0) = (0, 0): its adds are all zero anyway
    assert row_exp(1.0, 0.0, 5.0) == TOP
    assert row_exp(1e-30, 1e-10, 1e-5) == KMAX  # tiny bounds: the scale stops at 2^126
    assert row_exp(float("nan"), 1.0, 1.0) == NON_FINITE
    assert row_exp(1.0, float("inf"), 1.0) == NON_FINITE
    assert row_exp(1e20, 1e10, 1e10) == TOP - 134  # 2.06e40 < 2^134; beyond fp32's range: still finite (double)
    assert row_exp(3e38, 3e38, 3e38) == -KMAX  # the largest bounds clamp the scale at 2^-126
    assert row_exp(1.0, 1.0, 1.0) == TOP - 2  # 2.0625 < 2^2
